/**
 * The NestJS module on Nest's Fastify platform, end to end over real HTTP on loopback with a real SSE
 * reader: the same listen as on Express (guards deciding each URI, the listen request's own guards,
 * pass-through to the host's MCP route, cancellation, shutdown), without the duplicate route Fastify
 * would refuse, and the start-up failures that keep listen from being served unchecked.
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import { Controller, Module, Post, Res, type INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { ErrorCode } from 'mcp-subscriptions';
import { McpSubscriptionsModule } from 'mcp-subscriptions/nest';
import { expectToBe } from '../helpers/assert.ts';
import { sendHugeBody } from '../helpers/huge-body.ts';
import { bearer, NEST_STARTED, recordingLogger, startNestApp, type NestTestApp } from '../helpers/nest-apps.ts';
import { cancelBody, listen, listenBody, listenHeaders, post, type SseStream } from '../helpers/sse.ts';

const ACK = 'notifications/subscriptions/acknowledged';

const apps: NestTestApp[] = [];
const streams: SseStream[] = [];
const closers: (() => Promise<unknown>)[] = [];

afterEach(async () => {
  for (const stream of streams.splice(0)) stream.close();
  await Promise.all([...apps.splice(0).map((app) => app.close()), ...closers.splice(0).map((close) => close())]);
});

async function start(init: Parameters<typeof startNestApp>[0] = {}): Promise<NestTestApp> {
  const app = await startNestApp({ adapter: new FastifyAdapter(), ...init });
  apps.push(app);
  return app;
}

async function open(app: NestTestApp, token: string, id: string | number, notifications: Record<string, unknown>) {
  const stream = await listen(app.url, id, notifications, bearer(token));
  streams.push(stream);
  expectToBe(stream.status, 200, stream.text);
  const ack = (await stream.event(1)).json;
  expect(ack.method).toBe(ACK);
  return { stream, honored: ack.params.notifications };
}

async function postJson(url: string, body: unknown, headers: Record<string, string>) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}

const TOOLS_LIST = { jsonrpc: '2.0', id: 3, method: 'tools/list', params: {} };

describe('NestJS module on Fastify: listen in front of the host route', () => {
  it('listen is served behind the global guard and decided per URI by the read guard; the rest reaches the host route', async () => {
    const app = await start();
    const denied = await post(app.url, listenBody('nobody', { toolsListChanged: true }), listenHeaders());
    streams.push(denied);
    await denied.end();
    expect(denied.status).toBe(401);
    expect(denied.headers['www-authenticate']).toBe('Bearer');

    const asked = [
      'note://alice/mine',
      'note://bob/theirs',
      'note://shared/promise',
      'note://stream/alice',
      'note://false/x',
    ];
    const { stream, honored } = await open(app, 'alice-token', 'per-uri', {
      toolsListChanged: true,
      resourceSubscriptions: asked,
    });
    expect(honored).toStrictEqual({
      toolsListChanged: true,
      resourceSubscriptions: ['note://alice/mine', 'note://shared/promise', 'note://stream/alice'],
    });
    const reads = app.guardCalls.filter((call) => call.method === 'resources/read');
    expect(reads.map((call) => call.uri)).toStrictEqual(asked);
    for (const call of reads) {
      expect(call).toMatchObject({
        guard: 'ReadGuard',
        id: 'per-uri',
        user: 'alice',
        mcpMethod: 'resources/read',
        className: 'McpSubscriptionsReadContext',
      });
    }
    app.hub.resourceUpdated('note://alice/mine');
    expect((await stream.event(2)).json.params.uri).toBe('note://alice/mine');

    const passed = await postJson(app.url, TOOLS_LIST, { ...bearer('alice-token'), 'mcp-method': 'tools/list' });
    expect(passed).toMatchObject({ status: 200, json: { host: true, httpMethod: 'POST', body: TOOLS_LIST } });
    const got = await fetch(app.url, { headers: bearer('alice-token') });
    expect(await got.json()).toStrictEqual({ host: true, httpMethod: 'GET', body: null });
  });

  it("readGuards: 'route-and-global' runs the global guards for each URI through Nest's pipeline, on Fastify's request", async () => {
    const app = await start({ module: { readGuards: 'route-and-global' } });
    const asked = ['note://alice/a', 'note://bob/b'];
    const { honored } = await open(app, 'alice-token', 'global-reads', { resourceSubscriptions: asked });
    expect(honored).toStrictEqual({ resourceSubscriptions: ['note://alice/a'] });
    const reads = app.guardCalls.filter((call) => call.method === 'resources/read');
    expect(reads.map((call) => [call.guard, call.uri, call.user])).toStrictEqual(
      asked.flatMap((uri) => [
        ['BearerGuard', uri, 'alice'],
        ['ReadGuard', uri, 'alice'],
      ]),
    );
  });

  it('a body naming listen under another Mcp-Method header is refused, never passed on', async () => {
    const app = await start();
    const smuggled = await postJson(app.url, listenBody('smuggled', { toolsListChanged: true }), {
      ...bearer('alice-token'),
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2026-07-28',
      'mcp-method': 'tools/list',
    });
    expect(smuggled.status).toBe(400);
    expect(smuggled.json?.error?.code).toBe(-32020);
    expect(smuggled.json?.host).toBeUndefined();
  });

  it("notifications/cancelled closes the caller's own stream with 202; another caller's goes on to the host", async () => {
    const app = await start();
    const { stream } = await open(app, 'alice-token', 'to-cancel', { toolsListChanged: true });
    const cancel = (token: string) =>
      postJson(app.url, cancelBody('to-cancel'), { ...bearer(token), 'mcp-method': 'notifications/cancelled' });
    expect((await cancel('bob-token')).json?.host).toBe(true);
    const fromAlice = await cancel('alice-token');
    expect(fromAlice.status).toBe(202);
    await stream.end();
    expect(stream.events.every((event) => event.json?.result === undefined)).toBe(true);
  });

  it('behind the official SDK handler: listen is ours, tools/list the SDK’s', async () => {
    const app = await start({ host: 'sdk' });
    const { honored } = await open(app, 'bob-token', 'sdk', {
      resourceSubscriptions: ['note://bob/a', 'note://alice/b'],
    });
    expect(honored).toStrictEqual({ resourceSubscriptions: ['note://bob/a'] });
    const res = await fetch(app.url, {
      method: 'POST',
      headers: { ...listenHeaders(bearer('bob-token')), 'mcp-method': 'tools/list' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 7,
        method: 'tools/list',
        params: { _meta: listenBody(0, {}).params._meta },
      }),
    });
    expect(res.status).toBe(200);
    expect(await res.text()).toMatch(/"name":"ping"/);
  });

  it('with no host route on the path, the listen route serves alone and anything else there is 404', async () => {
    const app = await start({ host: 'none', prefix: 'api' });
    const { honored } = await open(app, 'alice-token', 'alone', { toolsListChanged: true });
    expect(honored).toStrictEqual({ toolsListChanged: true });
    const other = await postJson(app.url, TOOLS_LIST, bearer('alice-token'));
    expect(other.status).toBe(404);
  });

  it('a global prefix and a host route in a module imported after the module: both are found', async () => {
    @Controller('mcp')
    class LateMcpController {
      @Post()
      handle(@Res() reply: { send(body: unknown): unknown }): unknown {
        return reply.send({ late: true });
      }
    }
    @Module({ controllers: [LateMcpController] })
    class LateModule {}
    const app = await start({ prefix: 'api', imports: [LateModule], host: 'none' });
    const { honored } = await open(app, 'alice-token', 'late', { toolsListChanged: true });
    expect(honored).toStrictEqual({ toolsListChanged: true });
    const passed = await postJson(app.url, TOOLS_LIST, bearer('alice-token'));
    expect(passed.json).toStrictEqual({ late: true });
  });

  it('app.close() ends every open stream with the terminal result', async () => {
    const app = await start();
    const { stream } = await open(app, 'alice-token', 'bye', { toolsListChanged: true });
    await app.close();
    await stream.end();
    expect(stream.events.at(-1)?.json?.result?.resultType).toBe('complete');
  });

  it('a listen body over Fastify’s bodyLimit gets Fastify’s 413 before any guard or listen', async () => {
    const app = await start({ adapter: new FastifyAdapter({ bodyLimit: 1024 }) });
    const big = listenBody('big', {
      resourceSubscriptions: Array.from({ length: 100 }, (_, i) => `note://alice/${i}`),
    });
    const res = await postJson(app.url, big, listenHeaders(bearer('alice-token')));
    expect(res.status).toBe(413);
    expect(app.guardCalls).toStrictEqual([]);
    expect(app.hub.stats().openStreams).toBe(0);
    // A client still sending a huge body gets the 413 too: the connection is half-closed after it, not reset.
    const { response } = await sendHugeBody(app.url, 'content-length', bearer('alice-token'));
    expect(response.split('\r\n')[0]).toBe('HTTP/1.1 413 Payload Too Large');
  });
});

/**
 * `Test.createTestingModule()` with the module and a host controller on its path (answering
 * `{ host: true }`), made a Fastify app by `createNestApplication(new FastifyAdapter())`; closed after the test.
 */
async function testingAppWithHostRoute(): Promise<INestApplication> {
  @Controller('mcp')
  class HostController {
    @Post()
    handle(@Res() reply: { send(body: unknown): unknown }): unknown {
      return reply.send({ host: true });
    }
  }
  const moduleRef = await Test.createTestingModule({
    imports: [McpSubscriptionsModule.forRoot({ capabilities: { toolsListChanged: true }, keepAliveMs: false })],
    controllers: [HostController],
  }).compile();
  const app = moduleRef.createNestApplication(new FastifyAdapter(), { logger: false });
  closers.push(() => app.close());
  return app;
}

describe('NestJS module on Fastify: start-up', () => {
  it('Test.createTestingModule(), then createNestApplication(new FastifyAdapter()): the same placement', async () => {
    const app = await testingAppWithHostRoute();
    await app.listen(0, '127.0.0.1');
    const url = `${await app.getUrl()}/mcp`;
    const stream = await listen(url, 'testing', { toolsListChanged: true });
    streams.push(stream);
    expectToBe(stream.status, 200, stream.text);
    expect((await postJson(url, TOOLS_LIST, {})).json).toStrictEqual({ host: true });
  });

  // A route of its own on the Fastify instance (the SDK's handler mounted there, say) would serve listen past the
  // module; Nest's controller on the same path would be refused by Fastify itself. Either way the app must not
  // start, with our error naming the fix, before Nest says it started.
  const outside = (nest: { getHttpAdapter(): { getInstance(): any } }): void =>
    void nest
      .getHttpAdapter()
      .getInstance()
      .post('/mcp', () => ({ unchecked: true }));
  const OUTSIDE = /outside Nest's routes.*Serve MCP from a controller route/;

  it.each([
    ['beside a controller on the path', 'echo'],
    ['with no controller on the path', 'none'],
  ] as const)(
    'a POST route on the path registered on the Fastify instance before Nest’s routes, %s: our error, before Nest says it started',
    async (_case, host) => {
      const logger = recordingLogger();
      await expect(start({ host, configure: outside, appOptions: { logger } })).rejects.toMatchObject({
        code: ErrorCode.RouteNotPlaced,
        message: expect.stringMatching(OUTSIDE),
      });
      expect(logger.lines.filter((line) => /FST_ERR|already declared/.test(line))).toStrictEqual([]);
      expect(logger.lines.filter((line) => NEST_STARTED.test(line))).toStrictEqual([]);
      expect(logger.lines.filter((line) => line.startsWith('error:') && OUTSIDE.test(line))).toHaveLength(1);
    },
  );

  it('the same route on a Fastify instance handed to the adapter: our error, before Nest says it started', async () => {
    const adapter = new FastifyAdapter();
    outside({ getHttpAdapter: () => adapter });
    const logger = recordingLogger();
    await expect(start({ adapter, host: 'none', appOptions: { logger } })).rejects.toMatchObject({
      code: ErrorCode.RouteNotPlaced,
      message: expect.stringMatching(OUTSIDE),
    });
    expect(logger.lines.filter((line) => NEST_STARTED.test(line))).toStrictEqual([]);
  });

  it('a POST route on the path added after app.init() beside a controller on it: the call throws our error, not Fastify’s', async () => {
    const app = await testingAppWithHostRoute();
    await app.init();
    expect(() => outside(app)).toThrow(expect.objectContaining({ code: ErrorCode.RouteNotPlaced }));
    expect(() => outside(app)).toThrow(OUTSIDE);
  });
});
