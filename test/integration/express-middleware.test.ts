/**
 * The Express middleware on Express 5 and Express 4, over supertest for what does not stream: request
 * validation with HTTP statuses, pass-through of every other request (with and without a body parser
 * before it), the default principal, the body limit and option validation.
 */
import http from 'node:http';
import { describe, expect, test } from '@jest/globals';
import request from 'supertest';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { SubscriptionHub } from 'mcp-subscriptions';
import { mcpSubscriptions, type McpSubscriptionsOptions } from 'mcp-subscriptions/express';
import { expressFlavours, listenOn, readRaw, type ExpressFlavour } from '../helpers/express-apps.ts';
import { recordingLogger } from '../helpers/fake-response.ts';
import { optionsErrorOf } from '../helpers/options.ts';
import { listenBody, listenHeaders, SseParser, type SseEvent } from '../helpers/sse.ts';

/** Whether a principal is an anonymous caller's identity: NUL-prefixed, so no principal function can return it. */
const anonymousIdentity = (principal: string | undefined): boolean =>
  principal !== undefined && principal.startsWith('\u0000anonymous\u0000') && principal.length === 47;

interface AppInit {
  before?: RequestHandler[];
  after?: RequestHandler[];
  options?: Partial<McpSubscriptionsOptions>;
}

/** The host's own handler for everything that is not ours: it reports what it received. */
function hostHandler(req: Request, res: Response, next: NextFunction): void {
  const parsed: unknown = req.body;
  const raw = parsed === undefined && !req.readableEnded ? readRaw(req) : Promise.resolve(undefined);
  raw
    .then((text) => {
      res.status(200).json({ passed: true, method: req.method, body: parsed ?? null, raw: text ?? null });
    })
    .catch(next);
}

function build({ express }: ExpressFlavour, init: AppInit = {}) {
  const logger = recordingLogger();
  const hub = new SubscriptionHub({ logger });
  const checked: { uri: string; principal: string }[] = [];
  const middleware = mcpSubscriptions({
    hub,
    capabilities: { toolsListChanged: true, resourceSubscriptions: true },
    keepAliveMs: false,
    // Admits nothing: every listen is acknowledged, then completed at once, so supertest sees its end.
    canRead: (uri, { principal }) => {
      checked.push({ uri, principal });
      return false;
    },
    ...init.options,
  });
  const app = express();
  app.all('/mcp', ...(init.before ?? []), middleware, ...(init.after ?? []), hostHandler);
  // The host's error handler: errors from body parsers end up here.
  app.use((error: Error & { status?: number }, _req: Request, res: Response, _next: NextFunction) => {
    res.status(error.status ?? 500).json({ hostError: error.message });
  });
  return { app, hub, checked, logger };
}

function sseEvents(text: string): SseEvent[] {
  const events: SseEvent[] = [];
  new SseParser((event) => events.push(event)).feed(text);
  return events;
}

function postListen(app: ReturnType<typeof build>['app'], body: unknown, headers = listenHeaders()) {
  return request(app)
    .post('/mcp')
    .set(headers)
    .send(typeof body === 'string' ? body : JSON.stringify(body));
}

const authAs: RequestHandler = (req, _res, next) => {
  const user = req.get('x-user');
  if (user !== undefined)
    (req as Request & { auth?: unknown }).auth = {
      token: 't',
      clientId: `client-${user}`,
      scopes: [],
      extra: { sub: user },
    };
  next();
};

for (const flavour of expressFlavours) {
  describe(`${flavour.name}: listen errors over HTTP (spec §6)`, () => {
    test('each check answers its code and status with the request id, as JSON', async () => {
      const { app, hub } = build(flavour);
      const noMeta = listenBody('m', {}) as any;
      delete noMeta.params._meta;
      const rows: [unknown, Record<string, string>, number, number, unknown][] = [
        ['{"jsonrpc": "2.0", "id": 1,', listenHeaders(), -32700, 400, null],
        ['[]', listenHeaders(), -32600, 400, null],
        [noMeta, listenHeaders(), -32602, 400, 'm'],
        [listenBody('h', {}), listenHeaders({ 'mcp-protocol-version': '2025-11-25' }), -32020, 400, 'h'],
        [
          listenBody('v', {}, { 'io.modelcontextprotocol/protocolVersion': '2025-11-25' }),
          listenHeaders({ 'mcp-protocol-version': '2025-11-25' }),
          -32022,
          400,
          'v',
        ],
        [listenBody(5, { toolsListChanged: 1 }), listenHeaders(), -32602, 400, 5],
        [listenBody(6, { resourceSubscriptions: ['relative/uri'] }), listenHeaders(), -32602, 400, 6],
      ];
      for (const [body, headers, code, status, id] of rows) {
        const res = await postListen(app, body, headers);
        // The status, with the row's code and the body shown on failure.
        expect({ code, status: res.status, text: res.text }).toStrictEqual({ code, status, text: res.text });
        expect(res.headers['content-type'] ?? '').toMatch(/^application\/json/);
        const json = JSON.parse(res.text);
        expect(json.jsonrpc).toBe('2.0');
        expect(json.id).toBe(id);
        expect(json.error.code).toBe(code);
      }
      await hub.close();
    });

    test('a listen routed by its body alone (no Mcp-Method header) is ours, and -32020 for the missing header', async () => {
      const { app, hub } = build(flavour);
      const { 'mcp-method': _omit, ...headers } = listenHeaders();
      const res = await postListen(app, listenBody('nh', { toolsListChanged: true }), headers);
      expect(res.status).toBe(400);
      expect(JSON.parse(res.text).error.code).toBe(-32020);
      await hub.close();
    });

    test('a 50,000-URI request is refused with -32602 naming the limit', async () => {
      const { app, hub, checked } = build(flavour);
      const uris = Array.from({ length: 50_000 }, (_, i) => `note://u/${i}`);
      const res = await postListen(app, listenBody('big', { resourceSubscriptions: uris }));
      expect(res.status).toBe(400);
      const json = JSON.parse(res.text);
      expect(json.id).toBe('big');
      expect(json.error.code).toBe(-32602);
      expect(json.error.message).toMatch(/at most 1000/);
      expect(checked.length).toBe(0);
      await hub.close();
    });

    test('exactly 1000 URIs are accepted and each is checked once', async () => {
      const { app, hub, checked } = build(flavour);
      const uris = Array.from({ length: 1000 }, (_, i) => `note://u/${i}`);
      const res = await postListen(app, listenBody('k', { resourceSubscriptions: uris }));
      expect(res.status).toBe(200);
      expect(res.headers['content-type'] ?? '').toMatch(/^text\/event-stream/);
      expect(checked.length).toBe(1000);
      const events = sseEvents(res.text);
      expect(events[0]?.json.method).toBe('notifications/subscriptions/acknowledged');
      expect(events[1]?.json.result.resultType).toBe('complete');
      await hub.close();
    });

    test('an empty honoured filter: ack, then the terminal result, then the end of the response', async () => {
      const { app, hub } = build(flavour);
      const res = await postListen(
        app,
        listenBody('e', { promptsListChanged: true, resourceSubscriptions: ['note://x'] }),
      );
      expect(res.status).toBe(200);
      expect(res.headers['cache-control']).toBe('no-cache, no-transform');
      expect(res.headers['x-accel-buffering']).toBe('no');
      expect(res.headers['mcp-session-id']).toBe(undefined);
      expect(sseEvents(res.text).map((e) => e.json)).toStrictEqual([
        {
          jsonrpc: '2.0',
          method: 'notifications/subscriptions/acknowledged',
          params: { _meta: { 'io.modelcontextprotocol/subscriptionId': 'e' }, notifications: {} },
        },
        {
          jsonrpc: '2.0',
          id: 'e',
          result: { resultType: 'complete', _meta: { 'io.modelcontextprotocol/subscriptionId': 'e' } },
        },
      ]);
      await hub.close();
    });

    test('with express.json() before it, a parsed listen body is served the same way', async () => {
      const { app, hub } = build(flavour, { before: [flavour.express.json()] });
      const ok = await postListen(app, listenBody('p', { toolsListChanged: false }));
      expect(ok.status).toBe(200);
      expect(sseEvents(ok.text).length).toBe(2);
      const bad = await postListen(app, listenBody('p', { toolsListChanged: 'no' }));
      expect(bad.status).toBe(400);
      expect(JSON.parse(bad.text).error.code).toBe(-32602);
      await hub.close();
    });

    test('a body parser before it that did not match the request (a global express.urlencoded()) leaves listen working', async () => {
      const { app, hub } = build(flavour, { before: [flavour.express.urlencoded({ extended: false })] });
      const res = await postListen(app, listenBody('u', { resourceSubscriptions: ['note://x'] }));
      await hub.close();
      // The status, with the body shown on failure.
      expect({ status: res.status, text: res.text }).toStrictEqual({ status: 200, text: res.text });
      expect(sseEvents(res.text)[0]?.json.params._meta['io.modelcontextprotocol/subscriptionId']).toBe('u');
    });

    test('with express.text() before it, the text body is parsed by the middleware', async () => {
      const { app, hub } = build(flavour, { before: [flavour.express.text({ type: '*/*' })] });
      const ok = await postListen(app, listenBody('t', { resourceSubscriptions: ['note://x'] }));
      expect(ok.status).toBe(200);
      const bad = await postListen(app, '{"jsonrpc":');
      expect(bad.status).toBe(400);
      expect(JSON.parse(bad.text).error.code).toBe(-32700);
      await hub.close();
    });
  });

  describe(`${flavour.name}: every other request passes on untouched`, () => {
    const toolsList = { jsonrpc: '2.0', id: 3, method: 'tools/list', params: { _meta: { x: 1 } } };

    test('a request naming another method in Mcp-Method is read too (its body might name listen), then left on req.body', async () => {
      const { app, hub } = build(flavour);
      const res = await request(app)
        .post('/mcp')
        .set({ 'content-type': 'application/json', 'mcp-method': 'tools/list' })
        .send(JSON.stringify(toolsList));
      expect(res.status).toBe(200);
      expect(res.body).toStrictEqual({ passed: true, method: 'POST', body: toolsList, raw: null });
      await hub.close();
    });

    test('a JSON request without Mcp-Method that is not ours is read, then left on req.body', async () => {
      const { app, hub } = build(flavour);
      const res = await request(app)
        .post('/mcp')
        .set('content-type', 'application/json')
        .send(JSON.stringify(toolsList));
      expect(res.status).toBe(200);
      expect(res.body).toStrictEqual({ passed: true, method: 'POST', body: toolsList, raw: null });
      await hub.close();
    });

    test('a later express.json() keeps the body the middleware read', async () => {
      const { app, hub } = build(flavour, { after: [flavour.express.json()] });
      const res = await request(app)
        .post('/mcp')
        .set('content-type', 'application/json')
        .send(JSON.stringify(toolsList));
      expect(res.status).toBe(200);
      expect(res.body).toStrictEqual({ passed: true, method: 'POST', body: toolsList, raw: null });
      await hub.close();
    });

    test('with express.json() before it, the parsed body reaches the next handler as it was', async () => {
      const { app, hub } = build(flavour, { before: [flavour.express.json()] });
      const res = await request(app)
        .post('/mcp')
        .set({ 'content-type': 'application/json', 'mcp-method': 'tools/list' })
        .send(JSON.stringify(toolsList));
      expect(res.body).toStrictEqual({ passed: true, method: 'POST', body: toolsList, raw: null });
      const noHeader = await request(app)
        .post('/mcp')
        .set('content-type', 'application/json')
        .send(JSON.stringify(toolsList));
      expect(noHeader.body).toStrictEqual({ passed: true, method: 'POST', body: toolsList, raw: null });
      await hub.close();
    });

    test('a batch, a response and a notification of another method are passed on', async () => {
      const { app, hub } = build(flavour);
      for (const body of [
        [toolsList, { ...toolsList, id: 4 }],
        { jsonrpc: '2.0', id: 9, result: {} },
        { jsonrpc: '2.0', method: 'notifications/initialized' },
      ]) {
        const res = await request(app).post('/mcp').set('content-type', 'application/json').send(JSON.stringify(body));
        expect(res.body).toStrictEqual({ passed: true, method: 'POST', body, raw: null });
      }
      await hub.close();
    });

    test('a cancellation naming no stream of ours is passed on with its body', async () => {
      const { app, hub } = build(flavour);
      const cancel = { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'not-a-stream' } };
      const res = await request(app)
        .post('/mcp')
        .set({ 'content-type': 'application/json', 'mcp-method': 'notifications/cancelled' })
        .send(JSON.stringify(cancel));
      expect(res.body).toStrictEqual({ passed: true, method: 'POST', body: cancel, raw: null });
      await hub.close();
    });

    test('a body that is not JSON, and a GET, are passed on unread', async () => {
      const { app, hub } = build(flavour);
      const text = await request(app).post('/mcp').set('content-type', 'text/plain').send('hello');
      expect(text.body).toStrictEqual({ passed: true, method: 'POST', body: null, raw: 'hello' });
      const get = await request(app).get('/mcp');
      expect(get.body.passed).toBe(true);
      expect(get.body.method).toBe('GET');
      await hub.close();
    });

    test('malformed JSON without Mcp-Method reaches a later express.json() as it would without the middleware', async () => {
      const control = flavour.express();
      control.post('/mcp', flavour.express.json(), hostHandler);
      control.use((error: Error & { status?: number }, _req: Request, res: Response, _next: NextFunction) => {
        res.status(error.status ?? 500).json({ hostError: error.message });
      });
      const expected = await request(control).post('/mcp').set('content-type', 'application/json').send('{"jsonrpc":');
      expect(expected.status).toBe(400);

      const { app, hub } = build(flavour, { after: [flavour.express.json()] });
      const res = await request(app).post('/mcp').set('content-type', 'application/json').send('{"jsonrpc":');
      await hub.close();
      // The status, with the body shown on failure.
      expect({ status: res.status, body: JSON.stringify(res.body) }).toStrictEqual({
        status: expected.status,
        body: JSON.stringify(res.body),
      });
    });
  });

  describe(`${flavour.name}: principal`, () => {
    async function principalFor(init: AppInit, headers: Record<string, string> = {}): Promise<string | undefined> {
      const { app, hub, checked } = build(flavour, init);
      const res = await postListen(
        app,
        listenBody('w', { resourceSubscriptions: ['note://x'] }),
        listenHeaders(headers),
      );
      expect(res.status).toBe(200);
      await hub.close();
      return checked[0]?.principal;
    }
    const setting =
      (field: 'auth' | 'user', value: unknown): RequestHandler =>
      (req, _res, next) => {
        (req as unknown as Record<string, unknown>)[field] = value;
        next();
      };

    test('defaults to req.auth: extra.sub, then extra.principal; never the OAuth clientId', async () => {
      expect(await principalFor({ before: [authAs] }, { 'x-user': 'alice' })).toBe('alice');
      expect(
        await principalFor({
          before: [setting('auth', { clientId: 'c', extra: { principal: 'p' }, token: 't', scopes: [] })],
        }),
      ).toBe('p');
      // The client id names an app shared by all its users: a token that names no user is anonymous.
      expect(
        anonymousIdentity(await principalFor({ before: [setting('auth', { clientId: 'c', token: 't', scopes: [] })] })),
      ).toBe(true);
      // req.auth wins over req.user
      expect(
        await principalFor({
          before: [
            setting('auth', { clientId: 'c', token: 't', extra: { sub: 's' }, scopes: [] }),
            setting('user', 'u'),
          ],
        }),
      ).toBe('s');
    });

    test('else req.user: a string, or its id, sub or username', async () => {
      expect(await principalFor({ before: [setting('user', 'u')] })).toBe('u');
      expect(await principalFor({ before: [setting('user', { id: 'i', sub: 's' })] })).toBe('i');
      expect(await principalFor({ before: [setting('user', { sub: 's', username: 'n' })] })).toBe('s');
      expect(await principalFor({ before: [setting('user', { username: 'n' })] })).toBe('n');
    });

    test('an unauthenticated caller is anonymous, with an identity per request; a principal option replaces the default', async () => {
      const first = await principalFor({});
      expect(anonymousIdentity(first)).toBe(true);
      expect(await principalFor({})).not.toBe(first);
      expect(
        await principalFor(
          { before: [authAs], options: { principal: (req) => `tenant:${req.get('x-tenant')}` } },
          {
            'x-user': 'alice',
            'x-tenant': 't1',
          },
        ),
      ).toBe('tenant:t1');
      expect(anonymousIdentity(await principalFor({ options: { principal: () => undefined } }))).toBe(true);
      expect(anonymousIdentity(await principalFor({ options: { principal: () => '' } }))).toBe(true);
    });

    test('checks receive the Express request itself', async () => {
      let seen: unknown;
      const mark: RequestHandler = (req, _res, next) => {
        (req as Request & { marker?: string }).marker = 'host auth state';
        next();
      };
      const { app, hub } = build(flavour, {
        before: [mark],
        options: {
          canRead: (_uri, { request: req }) => {
            seen = (req as Request & { marker?: string }).marker;
            return false;
          },
        },
      });
      await postListen(app, listenBody(1, { resourceSubscriptions: ['note://x'] }));
      expect(seen).toBe('host auth state');
      await hub.close();
    });
  });

  describe(`${flavour.name}: body limit`, () => {
    test('a body over maxBodyBytes is 413 with a JSON-RPC error naming the limit', async () => {
      const { app, hub } = build(flavour, { options: { maxBodyBytes: 1024 } });
      const body = listenBody('x', {
        resourceSubscriptions: Array.from({ length: 100 }, (_, i) => `note://padding/${i}`),
      });
      expect(JSON.stringify(body).length).toBeGreaterThan(1024);
      const res = await postListen(app, body);
      expect(res.status).toBe(413);
      const json = JSON.parse(res.text);
      expect(json.error.code).toBe(-32600);
      expect(json.error.message).toMatch(/1024/);
      const small = await postListen(app, listenBody('y', { resourceSubscriptions: ['note://x'] }));
      expect(small.status).toBe(200);
      await hub.close();
    });

    test('a chunked body that grows past maxBodyBytes is 413 too', async () => {
      const { app, hub } = build(flavour, { options: { maxBodyBytes: 1024 } });
      const server = await listenOn(app);
      try {
        const status = await new Promise<number>((resolve, reject) => {
          const req = http.request(server.url, { method: 'POST', headers: listenHeaders(), agent: false }, (res) => {
            res.resume();
            resolve(res.statusCode ?? 0);
          });
          req.on('error', reject);
          req.write('{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"padding":"');
          req.write('x'.repeat(2048));
          req.end('"}}');
        });
        expect(status).toBe(413);
      } finally {
        await server.close();
        await hub.close();
      }
    });
  });

  describe(`${flavour.name}: options`, () => {
    const optionError = (options: unknown): Error =>
      optionsErrorOf(() => mcpSubscriptions(options as McpSubscriptionsOptions));

    test('mistakes throw at construction, naming the field', async () => {
      const hub = new SubscriptionHub({ logger: recordingLogger() });
      const base = { hub, capabilities: { toolsListChanged: true } };
      expect(optionError({ capabilities: {} }).message).toMatch(/`hub`/);
      expect(optionError({ hub }).message).toMatch(/`capabilities`/);
      expect(optionError({ ...base, capabilities: { resourceSubscriptions: true } }).message).toMatch(/`canRead`/);
      expect(optionError({ ...base, principal: 'alice' }).message).toBe(
        'mcp-subscriptions: Expected `principal` to be a function, got `alice` (string)',
      );
      for (const value of [0, -1, 1.5, '4mb', Number.NaN]) {
        expect(optionError({ ...base, maxBodyBytes: value }).message).toMatch(
          /`maxBodyBytes` to be a positive integer/,
        );
      }
      expect(optionError({ ...base, keepAliveMs: 0 }).message).toMatch(/`keepAliveMs`/);
      const middleware = mcpSubscriptions(base);
      expect(typeof middleware).toBe('function');
      expect(middleware.handler.options.hub).toBe(hub);
      await hub.close();
    });
  });
}
