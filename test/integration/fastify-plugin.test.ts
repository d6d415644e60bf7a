/**
 * The Fastify plugin in front of a Fastify app's own MCP route, over real loopback HTTP: listen is served
 * after the route's hooks (auth) and every other request reaches the route's handler with Fastify's
 * parsed body as it was; the principal; the read checks; what is refused rather than passed on; the
 * cancellation of a caller's own stream; mount order failing closed when the app starts; and the
 * plugin's options, checked when it loads.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from '@jest/globals';
import Fastify, {
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  type HookHandlerDoneFunction,
  type RouteHandlerMethod,
} from 'fastify';
import { SubscriptionHub } from 'mcp-subscriptions';
import { mcpSubscriptions, type McpSubscriptionsFastifyOptions } from 'mcp-subscriptions/fastify';
import { bearer } from '../helpers/bearer.ts';
import { recordingLogger } from '../helpers/fake-response.ts';
import { bearerAuth, listenFastify, logCapture, type AuthedRequest } from '../helpers/fastify-apps.ts';
import { expectOptionsError } from '../helpers/options.ts';
import { cancelBody, listenBody, listenHeaders, post, type SseStream } from '../helpers/sse.ts';

const ACK = 'notifications/subscriptions/acknowledged';
const OFFER = { toolsListChanged: true, resourceSubscriptions: true } as const;
const toolsList = { jsonrpc: '2.0', id: 3, method: 'tools/list', params: { _meta: { x: 1 } } };

/** Whether a principal is an anonymous caller's identity (NUL-prefixed: no principal function can return it). */
const anonymousIdentity = (principal: string | undefined): boolean =>
  principal?.startsWith('\u0000anonymous\u0000') === true;

/** What the host's MCP handler received. */
interface Received {
  readonly method: string;
  readonly body: unknown;
  /** Whether it is the very object Fastify's parser left on the request (seen by a `preValidation` hook). */
  readonly sameBody: boolean;
}

/** The host's MCP route: its hooks, its handler, and what each saw. */
function hostRoute() {
  const received: Received[] = [];
  const order: string[] = [];
  const parsed = new WeakSet<object>();
  const handler: RouteHandlerMethod = async (request: FastifyRequest, reply: FastifyReply) => {
    const body: unknown = request.body;
    received.push({
      method: request.method,
      body,
      sameBody: typeof body === 'object' && body !== null && parsed.has(body),
    });
    await reply.code(200).send({ passed: true, body: body ?? null });
  };
  const routeOptions = {
    onRequest: [
      async (request: FastifyRequest, reply: FastifyReply) => {
        order.push('route onRequest');
        await bearerAuth(request, reply);
      },
    ],
    preValidation: [
      (request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction) => {
        if (typeof request.body === 'object' && request.body !== null) parsed.add(request.body);
        done();
      },
    ],
    preHandler: [
      (request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction) => {
        order.push('route preHandler');
        // A second auth stage, as a host may have: `x-set` puts its JSON on the request (`user`, `auth`).
        const set = request.headers['x-set'];
        if (typeof set === 'string') Object.assign(request, JSON.parse(set));
        done();
      },
    ],
  };
  return { received, order, handler, routeOptions };
}

interface Served {
  readonly app: FastifyInstance;
  readonly hub: SubscriptionHub;
  readonly url: string;
  readonly received: Received[];
  readonly order: string[];
  /** `canRead`'s calls: the URI and the principal. */
  readonly checked: { uri: string; principal: string }[];
  readonly log: ReturnType<typeof logCapture>;
  open(body: unknown, headers?: Record<string, string>): Promise<SseStream>;
  closeStreams(): void;
}

/**
 * An app whose MCP route is `POST /mcp` with bearer auth (`onRequest`), a `preHandler`, and an app-level
 * `onRequest` hook. Notes are readable by their owner; a URI containing `throw` makes `canRead` throw;
 * the subscribe hook refuses URIs containing `nosub`.
 */
async function serve(options: Partial<McpSubscriptionsFastifyOptions> = {}): Promise<Served> {
  const hub = new SubscriptionHub({ logger: recordingLogger() });
  const log = logCapture();
  const app = Fastify({ logger: { level: 'warn', stream: log } });
  const route = hostRoute();
  const checked: Served['checked'] = [];
  app.addHook('onRequest', (_request, _reply, done) => {
    route.order.push('app onRequest');
    done();
  });
  await app.register(mcpSubscriptions, {
    hub,
    capabilities: OFFER,
    keepAliveMs: false,
    canRead: (uri, { principal }) => {
      route.order.push('canRead');
      checked.push({ uri, principal });
      if (uri.includes('throw')) throw Object.assign(new Error(`no way to check ${uri}`), { code: 'E_HOST' });
      return uri.startsWith(`note://${principal}/`);
    },
    handleSubscribeResource: (uri) => !uri.includes('nosub'),
    ...options,
  });
  app.post('/mcp', route.routeOptions, route.handler);
  const url = await listenFastify(app);
  const streams: SseStream[] = [];
  return {
    app,
    hub,
    url,
    received: route.received,
    order: route.order,
    checked,
    log,
    async open(body, headers = listenHeaders(bearer('alice'))) {
      const stream = await post(url, body, headers);
      streams.push(stream);
      return stream;
    },
    closeStreams() {
      for (const stream of streams.splice(0)) stream.close();
    },
  };
}

async function stop(s: Served | undefined): Promise<void> {
  s?.closeStreams();
  await s?.app.close();
  await s?.hub.close();
}

/** The JSON-RPC error of a refused answer, with its status. */
async function refusal(stream: SseStream): Promise<{ status: number; code: unknown; id: unknown }> {
  await stream.end();
  const json = JSON.parse(stream.text);
  return { status: stream.status, code: json.error?.code, id: json.id };
}

describe('Fastify: listen in front of the MCP route, after its hooks', () => {
  let s: Served;
  beforeAll(async () => {
    s = await serve();
  });
  afterEach(() => {
    s.closeStreams();
    s.received.length = 0;
    s.order.length = 0;
    s.checked.length = 0;
    s.log.lines.length = 0;
  });
  afterAll(() => stop(s));

  test('the app hook, then the route onRequest (auth) and preHandler run before listen; the ack holds what the caller may read', async () => {
    const stream = await s.open(
      listenBody('L', {
        toolsListChanged: true,
        resourceSubscriptions: ['note://alice/todo', 'note://bob/secret', 'note://alice/nosub'],
      }),
    );
    expect(stream.status).toBe(200);
    expect(stream.headers['content-type']).toBe('text/event-stream');
    const ack = (await stream.event(1)).json;
    expect(ack).toStrictEqual({
      jsonrpc: '2.0',
      method: ACK,
      params: {
        _meta: { 'io.modelcontextprotocol/subscriptionId': 'L' },
        // bob's note (canRead) and the one the subscribe hook refused look like URIs never asked for.
        notifications: { toolsListChanged: true, resourceSubscriptions: ['note://alice/todo'] },
      },
    });
    expect(s.order.slice(0, 3)).toStrictEqual(['app onRequest', 'route onRequest', 'route preHandler']);
    expect(s.order.slice(3).every((step) => step === 'canRead')).toBe(true);
    expect(s.checked.map(({ principal }) => principal)).toStrictEqual(['alice', 'alice', 'alice']);
    expect(s.received).toStrictEqual([]);
  });

  test('no bearer token: the host hook answers 401, the handler and listen never run, no stream opens', async () => {
    const opened = s.hub.stats().opened;
    const refused = await s.open(listenBody('anon', { toolsListChanged: true }), listenHeaders());
    await refused.end();
    expect(refused.status).toBe(401);
    expect(refused.headers['www-authenticate']).toBe('Bearer');
    expect(refused.headers['content-type']).toMatch(/^application\/json/);
    expect(JSON.parse(refused.text)).toStrictEqual({ error: 'unauthorized' });
    expect(s.order).toStrictEqual(['app onRequest', 'route onRequest']);
    expect(s.checked).toStrictEqual([]);
    expect(s.hub.stats().opened).toBe(opened);
  });

  test('a check that throws is logged on the app logger by name and code (never the URI), and its URI dropped', async () => {
    const stream = await s.open(
      listenBody('T', { resourceSubscriptions: ['note://alice/throw', 'note://alice/fine'] }),
    );
    expect((await stream.event(1)).json.params.notifications).toStrictEqual({
      resourceSubscriptions: ['note://alice/fine'],
    });
    const warnings = s.log.lines.filter((line) => line.level === 40);
    expect(warnings).toStrictEqual([
      expect.objectContaining({
        plugin: 'mcp-subscriptions',
        msg: 'canRead failed; the resource was left out of the acknowledgement: Error (E_HOST)',
      }),
    ]);
    expect(JSON.stringify(s.log.lines)).not.toContain('note://alice/throw');
  });

  test('every other MCP request reaches the handler with the very body Fastify parsed, whatever Mcp-Method says', async () => {
    const bodies = [
      toolsList,
      [toolsList, { ...toolsList, id: 4 }],
      { jsonrpc: '2.0', id: 9, result: {} },
      { jsonrpc: '2.0', method: 'notifications/initialized' },
    ];
    for (const body of bodies) {
      const answer = await post(s.url, body, {
        ...bearer('alice'),
        'content-type': 'application/json',
        'mcp-method': Array.isArray(body) ? 'tools/list' : String((body as { method?: string }).method ?? 'x'),
      });
      await answer.end();
      expect({ status: answer.status, text: answer.text }).toStrictEqual({
        status: 200,
        text: JSON.stringify({ passed: true, body }),
      });
    }
    expect(s.received).toStrictEqual(bodies.map((body) => ({ method: 'POST', body, sameBody: true })));
  });

  test('a body Fastify cannot parse gets its own 400 before the route: neither listen nor the handler sees it', async () => {
    const answer = await s.open('{"jsonrpc": "2.0", "id": 1,');
    await answer.end();
    expect(answer.status).toBe(400);
    expect(JSON.parse(answer.text)).toMatchObject({ statusCode: 400, code: 'FST_ERR_CTP_INVALID_JSON_BODY' });
    expect(s.received).toStrictEqual([]);
    expect(s.checked).toStrictEqual([]);
  });

  test('a body naming listen under another Mcp-Method is refused, -32020, and never passed on', async () => {
    for (const method of ['tools/call', 'tools/call, subscriptions/listen']) {
      const answer = await s.open(
        listenBody('m', { resourceSubscriptions: ['note://alice/todo'] }),
        listenHeaders({ ...bearer('alice'), 'mcp-method': method }),
      );
      expect(await refusal(answer)).toStrictEqual({ status: 400, code: -32020, id: 'm' });
      expect(answer.text).not.toContain('note://alice');
    }
    expect(s.received).toStrictEqual([]);
  });

  test('a batch holding a listen is refused, -32600, and never passed on', async () => {
    const answer = await s.open([listenBody('b', { toolsListChanged: true }), toolsList], {
      ...bearer('alice'),
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2026-07-28',
    });
    expect(await refusal(answer)).toStrictEqual({ status: 400, code: -32600, id: null });
    expect(s.received).toStrictEqual([]);
  });

  test("notifications/cancelled for the caller's own stream: 202, the stream ends; for none, or another caller's, it is passed on", async () => {
    const stream = await s.open(listenBody('C', { toolsListChanged: true }));
    await stream.event(1);
    const cancelHeaders = (user: string) => ({
      ...bearer(user),
      'content-type': 'application/json',
      'mcp-method': 'notifications/cancelled',
    });

    const foreign = await post(s.url, cancelBody('C'), cancelHeaders('bob'));
    await foreign.end();
    const none = await post(s.url, cancelBody('no-such-stream'), cancelHeaders('alice'));
    await none.end();
    expect([foreign.status, none.status]).toStrictEqual([200, 200]);
    expect(s.received).toStrictEqual([
      { method: 'POST', body: cancelBody('C'), sameBody: true },
      { method: 'POST', body: cancelBody('no-such-stream'), sameBody: true },
    ]);
    expect(s.hub.stats().openStreams).toBe(1);

    const own = await post(s.url, cancelBody('C'), cancelHeaders('alice'));
    await own.end();
    expect({ status: own.status, text: own.text }).toStrictEqual({ status: 202, text: '' });
    await stream.end();
    // Nothing more was written: a cancelled stream gets no result.
    expect(stream.events.map((event) => event.json.method)).toStrictEqual([ACK]);
    expect(s.hub.stats().openStreams).toBe(0);
    expect(s.received).toHaveLength(2);
  });

  test('the principal: request.auth (extra.sub, then extra.principal, never clientId), else request.user', async () => {
    const principalFor = async (set: Record<string, unknown>): Promise<string | undefined> => {
      s.checked.length = 0;
      const stream = await s.open(
        listenBody('p', { resourceSubscriptions: ['note://x/y'] }),
        listenHeaders({ ...bearer('alice'), 'x-set': JSON.stringify(set) }),
      );
      await stream.end();
      return s.checked[0]?.principal;
    };
    expect(await principalFor({})).toBe('alice');
    expect(await principalFor({ auth: { clientId: 'c', scopes: [], extra: { principal: 'p' } } })).toBe('p');
    expect(anonymousIdentity(await principalFor({ auth: { clientId: 'c', token: 't', scopes: [] } }))).toBe(true);
    expect(await principalFor({ auth: null, user: 'u' })).toBe('u');
    expect(await principalFor({ auth: null, user: { id: 'i', sub: 's' } })).toBe('i');
    expect(await principalFor({ auth: null, user: { sub: 's', username: 'n' } })).toBe('s');
    expect(await principalFor({ auth: null, user: { username: 'n' } })).toBe('n');
    expect(anonymousIdentity(await principalFor({ auth: null }))).toBe(true);
  });
});

describe('Fastify: the principal option', () => {
  test('replaces the default, is handed the Fastify request, and undefined means anonymous', async () => {
    const seen: unknown[] = [];
    const s = await serve({
      principal: (request) => {
        seen.push((request as AuthedRequest).auth);
        const tenant = request.headers['x-tenant'];
        return typeof tenant === 'string' ? `tenant:${tenant}` : undefined;
      },
    });
    try {
      const named = await s.open(
        listenBody('t', { resourceSubscriptions: ['note://x/y'] }),
        listenHeaders({ ...bearer('alice'), 'x-tenant': 't1' }),
      );
      await named.end();
      const anonymous = await s.open(listenBody('u', { resourceSubscriptions: ['note://x/y'] }));
      await anonymous.end();
      expect(s.checked[0]?.principal).toBe('tenant:t1');
      expect(anonymousIdentity(s.checked[1]?.principal)).toBe(true);
      // The hook's work is there: the option reads the request the route's auth authenticated.
      expect(seen).toStrictEqual([
        { token: 'alice', clientId: 'c', scopes: [], extra: { sub: 'alice' } },
        { token: 'alice', clientId: 'c', scopes: [], extra: { sub: 'alice' } },
      ]);
    } finally {
      await stop(s);
    }
  });
});

describe('Fastify: mount order, checked when the app starts', () => {
  const base = () => ({
    hub: new SubscriptionHub({ logger: recordingLogger() }),
    capabilities: OFFER,
    canRead: () => true,
  });
  const host: RouteHandlerMethod = (_request, reply) => reply.send({ passed: true });

  test('a POST /mcp registered before the plugin, or none at all: ready() rejects with ERR_MCP_SUBSCRIPTIONS_ROUTE_NOT_PLACED', async () => {
    const before = Fastify();
    before.post('/mcp', host);
    await before.register(mcpSubscriptions, base());
    await expect(before.ready()).rejects.toMatchObject({
      code: 'ERR_MCP_SUBSCRIPTIONS_ROUTE_NOT_PLACED',
      message: expect.stringMatching(/POST \/mcp was registered before the plugin loaded/),
    });
    await before.close();

    const none = Fastify();
    await none.register(mcpSubscriptions, base());
    none.post('/other', host);
    await expect(none.ready()).rejects.toMatchObject({
      code: 'ERR_MCP_SUBSCRIPTIONS_ROUTE_NOT_PLACED',
      message: expect.stringMatching(/Expected a route serving POST \/mcp/),
    });
    await none.close();
  });

  /** Listens on `url` as alice, and sends GET, DELETE and a tools/list there: what the host answered. */
  async function exercise(url: string, hub: SubscriptionHub) {
    const stream = await post(url, listenBody('o', { toolsListChanged: true }), listenHeaders(bearer('alice')));
    try {
      expect((await stream.event(1)).json.method).toBe(ACK);
      expect(hub.toolsListChanged().written).toBe(1);
      expect((await stream.event(2)).json.method).toBe('notifications/tools/list_changed');
    } finally {
      stream.close();
    }
    const answers: string[] = [];
    for (const method of ['GET', 'DELETE']) {
      const response = await fetch(url, { method, headers: bearer('alice') });
      answers.push(`${method} ${response.status} ${await response.text()}`);
    }
    const other = await post(url, toolsList, { ...bearer('alice'), 'content-type': 'application/json' });
    await other.end();
    answers.push(`POST ${other.status} ${other.text}`);
    return answers;
  }

  test("a route in a child context with a prefix ('/api/mcp') is served", async () => {
    const options = base();
    const app = Fastify();
    await app.register(mcpSubscriptions, { ...options, path: '/api/mcp' });
    await app.register(
      (api, _options, done) => {
        api.post('/mcp', { onRequest: bearerAuth }, (request, reply) => reply.send({ passed: request.body }));
        done();
      },
      { prefix: '/api' },
    );
    try {
      const url = await listenFastify(app, '/api/mcp');
      expect(app.mcpSubscriptions.path).toBe('/api/mcp');
      expect(await exercise(url, options.hub)).toStrictEqual([
        'GET 404 {"message":"Route GET:/api/mcp not found","error":"Not Found","statusCode":404}',
        'DELETE 404 {"message":"Route DELETE:/api/mcp not found","error":"Not Found","statusCode":404}',
        `POST 200 ${JSON.stringify({ passed: toolsList })}`,
      ]);
    } finally {
      await app.close();
      await options.hub.close();
    }
  });

  for (const shape of ["method ['GET', 'POST', 'DELETE']", 'app.all'] as const) {
    test(`a route with ${shape}: listen on POST; GET and DELETE go straight to the host`, async () => {
      const options = base();
      const app = Fastify();
      await app.register(mcpSubscriptions, options);
      const handler: RouteHandlerMethod = (request, reply) =>
        reply.send({ host: request.method, body: request.body ?? null });
      if (shape === 'app.all') app.all('/mcp', { onRequest: bearerAuth }, handler);
      else app.route({ method: ['GET', 'POST', 'DELETE'], url: '/mcp', onRequest: bearerAuth, handler });
      try {
        const url = await listenFastify(app);
        expect(await exercise(url, options.hub)).toStrictEqual([
          'GET 200 {"host":"GET","body":null}',
          'DELETE 200 {"host":"DELETE","body":null}',
          `POST 200 ${JSON.stringify({ host: 'POST', body: toolsList })}`,
        ]);
      } finally {
        await app.close();
        await options.hub.close();
      }
    });
  }
});

describe('Fastify: options, checked when the plugin loads', () => {
  const hub = new SubscriptionHub({ logger: recordingLogger() });
  afterAll(() => hub.close());
  const base = { hub, capabilities: OFFER, canRead: () => true };

  /** The error `register()` rejects with, asserted to be an option mistake. */
  async function loadError(options: unknown, app = Fastify()): Promise<Error & { code?: string }> {
    try {
      await app.register(mcpSubscriptions, options as McpSubscriptionsFastifyOptions);
    } catch (error) {
      expectOptionsError(error);
      return error as Error & { code?: string };
    } finally {
      await app.close().catch(() => {});
    }
    throw new Error('expected register() to reject');
  }

  test('an unknown key is refused with the nearest known one suggested', async () => {
    const error = await loadError({ ...base, canread: () => true });
    expect(error.code).toBe('ERR_MCP_SUBSCRIPTIONS_UNKNOWN_OPTION');
    expect(error.message).toMatch(/`canread`.*did you mean `canRead`\?/);
  });

  test('a path that is no route URL: ERR_MCP_SUBSCRIPTIONS_INVALID_PATH', async () => {
    for (const path of ['mcp', '', 42]) {
      expect((await loadError({ ...base, path })).code).toBe('ERR_MCP_SUBSCRIPTIONS_INVALID_PATH');
    }
  });

  test('no hub: ERR_MCP_SUBSCRIPTIONS_MISSING_OPTION naming `hub`', async () => {
    const error = await loadError({ capabilities: OFFER });
    expect(error.code).toBe('ERR_MCP_SUBSCRIPTIONS_MISSING_OPTION');
    expect(error.message).toMatch(/`hub`/);
  });

  test('registered twice in one context: ERR_MCP_SUBSCRIPTIONS_ALREADY_REGISTERED', async () => {
    const app = Fastify();
    await app.register(mcpSubscriptions, base);
    expect((await loadError(base, app)).code).toBe('ERR_MCP_SUBSCRIPTIONS_ALREADY_REGISTERED');
  });

  test("Fastify's own register options (prefix, logLevel) are accepted; the decorator holds the hub", async () => {
    const app = Fastify();
    await app.register(mcpSubscriptions, { ...base, prefix: '/ignored', logLevel: 'error' });
    app.post('/mcp', { onRequest: bearerAuth }, (_request, reply) => reply.send({ passed: true }));
    try {
      await app.ready();
      expect(app.mcpSubscriptions.hub).toBe(hub);
      expect(app.mcpSubscriptions.path).toBe('/mcp');
      expect(app.mcpSubscriptions.handler.options.hub).toBe(hub);
    } finally {
      await app.close();
    }
  });
});
