/**
 * Mount order fails closed, with the official SDK's real handler (`createMcpHandler` with the hub as
 * its bus, served through `toNodeHandler`), on Express 5, Express 4 and Nest, over loopback:
 *
 * - the SDK's handler in front of ours (Express: a route of its own before ours; Nest: mounted on the
 *   HTTP adapter, before every Nest route) serves listen itself; the hub, as its bus, refuses it, so
 *   nothing about bob's note reaches alice (read in the raw bytes), and the app says so once;
 * - in the right order (Express: ours in front on the same route; Nest: the host's MCP controller
 *   registered first), alice's acknowledgement holds her own note only, and a body naming listen under
 *   another (or a repeated) `Mcp-Method` is refused by us, -32020, never reaching the SDK;
 * - auth that runs after ours leaves every listen without a principal: said once, as a warning.
 */
import 'reflect-metadata';
import { afterEach, describe, expect, test } from '@jest/globals';
import type { ServerResponse } from 'node:http';
import { All, Controller, Inject, Module, Req, Res, UseGuards } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { toNodeHandler } from '@modelcontextprotocol/node';
import { createMcpHandler, McpServer } from '@modelcontextprotocol/server';
import type { RequestHandler } from 'express';
import { SubscriptionHub, toServerCapabilities } from 'mcp-subscriptions';
import { mcpSubscriptions } from 'mcp-subscriptions/express';
import { McpSubscriptionsModule } from 'mcp-subscriptions/nest';
import { authFromUserHeader, expressFlavours, listenOn, type ExpressFlavour } from '../helpers/express-apps.ts';
import { recordingLogger } from '../helpers/fake-response.ts';
import {
  BASE_OPTIONS,
  bearer,
  BearerGuard,
  GuardLogModule,
  ReadGuard,
  SdkHandler,
  startNestApp,
  warningsLogger,
} from '../helpers/nest-apps.ts';
import { rawPost } from '../helpers/raw-http.ts';
import { listenBody, listenHeaders, post, type SseStream } from '../helpers/sse.ts';

const OFFER = { toolsListChanged: true, resourceSubscriptions: true } as const;
const ASKED = { toolsListChanged: true, resourceSubscriptions: ['note://alice/todo', 'note://bob/secret'] };
const UNCHECKED_LOG = /MCP SDK's own handler.*never checked.*mcpSubscriptions\(\) in front of the SDK handler/;
const ANONYMOUS_LOG =
  /no principal, and the read check \(`canRead`\) refused every URI.*auth that runs after the listen middleware/;

/** The read rule: a note is readable by its owner only. */
const canRead = (uri: string, { principal }: { readonly principal: string }): boolean =>
  uri.startsWith(`note://${principal}/`);

/** The SDK's handler with `hub` as its bus, as the quick starts build it; `seen` lists what reached it. */
function sdkHandler(hub: SubscriptionHub) {
  const mcp = createMcpHandler(
    () => new McpServer({ name: 'host', version: '1.0.0' }, { capabilities: toServerCapabilities(OFFER) }),
    { bus: hub, legacy: 'reject' },
  );
  const node = toNodeHandler(mcp);
  const seen: unknown[] = [];
  const handler: RequestHandler = (req, res, next) => {
    seen.push(req.headers['mcp-method']);
    node(req, res, req.body).catch(next);
  };
  return { handler, seen, close: () => mcp.close() };
}

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** Reads an answer until it ends or its first event arrives (a leaked acknowledgement shows then). */
async function firstWords(stream: SseStream): Promise<SseStream> {
  cleanups.push(() => stream.close());
  await stream.until(() => stream.ended || stream.events.length > 0, 'the end or a first event');
  return stream;
}

/** Reads a whole (refused or empty) answer. */
async function answer(stream: SseStream): Promise<SseStream> {
  cleanups.push(() => stream.close());
  await stream.end();
  return stream;
}

function aliceListens(url: string, id: string, headers: Record<string, string> = {}): Promise<SseStream> {
  return post(url, listenBody(id, ASKED), listenHeaders({ 'x-user': 'alice', ...headers }));
}

/** The requests whose body names listen while `Mcp-Method` names another method, or repeats. */
async function mismatches(url: string, extra: Record<string, string>): Promise<SseStream[]> {
  const body = Buffer.from(JSON.stringify(listenBody('m', ASKED)));
  const base = Object.entries(listenHeaders(extra)).filter(([name]) => name !== 'mcp-method');
  const twice = (first: string, second: string) =>
    rawPost(url, {
      headers: [...base, ['Mcp-Method', first], ['Mcp-Method', second]],
      body,
      framing: 'content-length',
    });
  return Promise.all([
    post(url, listenBody('m', ASKED), listenHeaders({ ...extra, 'mcp-method': 'tools/call' })),
    post(
      url,
      listenBody('m', ASKED),
      listenHeaders({ ...extra, 'mcp-method': 'subscriptions/listen, subscriptions/listen' }),
    ),
    twice('subscriptions/listen', 'subscriptions/listen'),
    twice('tools/call', 'subscriptions/listen'),
    // Header listen, body another method: refused before this change already.
    post(
      url,
      { jsonrpc: '2.0', id: 'm', method: 'tools/list', params: listenBody('m', {}).params },
      listenHeaders(extra),
    ),
  ]);
}

async function expectRefusedByUs(streams: SseStream[]): Promise<void> {
  for (const stream of streams) {
    await answer(stream);
    expect({ status: stream.status, error: JSON.parse(stream.text).error }).toStrictEqual({
      status: 400,
      error: { code: -32020, message: expect.stringMatching(/^Header mismatch: the Mcp-Method header/) },
    });
    expect(stream.text).not.toContain('note://bob');
  }
}

describe.each(expressFlavours)('$name', (flavour: ExpressFlavour) => {
  async function serve(order: 'sdk-first' | 'ours-first' | 'auth-after') {
    const logger = recordingLogger();
    const hub = new SubscriptionHub({ logger });
    const sdk = sdkHandler(hub);
    const listen = mcpSubscriptions({ hub, capabilities: OFFER, canRead, keepAliveMs: false });
    const app = flavour.express();
    if (order === 'sdk-first') app.post('/mcp', authFromUserHeader, sdk.handler);
    if (order === 'auth-after') app.post('/mcp', listen, authFromUserHeader, sdk.handler);
    else app.post('/mcp', authFromUserHeader, listen, sdk.handler);
    const server = await listenOn(app);
    cleanups.push(
      () => server.close(),
      () => sdk.close(),
      () => hub.close(),
    );
    return { url: server.url, hub, logger, sdk };
  }

  test("the SDK's handler on a route before ours: its listen is refused, bob's note never leaves, said once", async () => {
    const { url, hub, logger, sdk } = await serve('sdk-first');
    for (const id of ['a', 'b', 'c']) {
      const refused = await firstWords(await aliceListens(url, id));
      // The SDK served it (the request reached it), and answered 500: its acknowledgement was discarded.
      expect(refused.text).not.toContain('note://bob');
      expect(refused.text).not.toContain('acknowledged');
      expect(refused.status).toBe(500);
    }
    expect(sdk.seen.length).toBe(3);
    expect(hub.stats().uncheckedListens).toBe(3);
    expect(hub.stats().opened).toBe(0);
    expect(logger.errors.map(([message]) => message)).toStrictEqual([expect.stringMatching(UNCHECKED_LOG)]);
  });

  test("ours in front of the SDK's: alice's acknowledgement holds her note only; a listen under another Mcp-Method is refused by us", async () => {
    const { url, hub, logger, sdk } = await serve('ours-first');
    const stream = await aliceListens(url, 'ok');
    cleanups.push(() => stream.close());
    expect((await stream.event(1)).json.params.notifications).toStrictEqual({
      toolsListChanged: true,
      resourceSubscriptions: ['note://alice/todo'],
    });
    hub.resourceUpdated('note://bob/secret');
    hub.resourceUpdated('note://alice/todo');
    expect((await stream.event(2)).json.params.uri).toBe('note://alice/todo');
    expect(stream.text).not.toContain('note://bob');

    await expectRefusedByUs(await mismatches(url, { 'x-user': 'alice' }));
    // A header that names listen at all makes the request ours, whatever its Content-Type.
    const notJson = await answer(
      await post(
        url,
        listenBody('t', ASKED),
        listenHeaders({
          'x-user': 'alice',
          'content-type': 'text/plain',
          'mcp-method': 'tools/call, subscriptions/listen',
        }),
      ),
    );
    expect({ status: notJson.status, code: JSON.parse(notJson.text).error.code }).toStrictEqual({
      status: 415,
      code: -32600,
    });
    // None of them reached the SDK's handler; a request that is not listen still does.
    expect(sdk.seen).toStrictEqual([]);
    const toolsList = await answer(
      await post(
        url,
        { jsonrpc: '2.0', id: 1, method: 'tools/list', params: listenBody(1, {}).params },
        {
          ...listenHeaders({ 'x-user': 'alice', 'mcp-method': 'tools/list' }),
        },
      ),
    );
    expect(toolsList.status).toBe(200);
    expect(sdk.seen).toStrictEqual(['tools/list']);
    expect(logger.errors).toStrictEqual([]);
    expect(logger.warns).toStrictEqual([]);
  });

  test('auth after ours: every listen is anonymous, and that is said once with the likely cause', async () => {
    const { url, logger, sdk } = await serve('auth-after');
    for (const id of ['a', 'b', 'c']) {
      const stream = await aliceListens(url, id);
      cleanups.push(() => stream.close());
      // Unchanged: acknowledged with what an anonymous caller may have (no note).
      expect((await stream.event(1)).json.params.notifications).toStrictEqual({ toolsListChanged: true });
      expect(stream.text).not.toContain('note://bob');
    }
    expect(sdk.seen).toStrictEqual([]);
    expect(logger.warns.map(([message]) => message)).toStrictEqual([expect.stringMatching(ANONYMOUS_LOG)]);
  });
});

describe('Nest', () => {
  test("the host's MCP controller registered first: the module serves listen; a listen under another Mcp-Method never reaches the SDK", async () => {
    const app = await startNestApp({ host: 'sdk' });
    cleanups.push(() => app.close());
    const stream = await post(app.url, listenBody('ok', ASKED), listenHeaders(bearer('alice-token')));
    cleanups.push(() => stream.close());
    expect((await stream.event(1)).json.params.notifications).toStrictEqual({
      toolsListChanged: true,
      resourceSubscriptions: ['note://alice/todo'],
    });
    // The SDK's route records each request once with its ReadGuard.
    const reachedSdk = () =>
      app.guardCalls.filter((call) => call.className === 'SdkMcpController' && call.guard === 'ReadGuard').length;
    expect(reachedSdk()).toBe(0);

    await expectRefusedByUs(await mismatches(app.url, bearer('alice-token')));
    expect(reachedSdk()).toBe(0);
    const toolsList = await answer(
      await post(
        app.url,
        { jsonrpc: '2.0', id: 1, method: 'tools/list', params: listenBody(1, {}).params },
        {
          ...listenHeaders({ ...bearer('alice-token'), 'mcp-method': 'tools/list' }),
        },
      ),
    );
    expect(toolsList.status).toBe(200);
    expect(reachedSdk()).toBe(1);
  });

  test("the SDK's handler mounted on the HTTP adapter, before Nest's routes: its listen is refused, said once", async () => {
    const logger = warningsLogger();
    let sdk: ReturnType<typeof sdkHandler> | undefined;
    const app = await startNestApp({
      host: 'none',
      appOptions: { logger },
      configure: (nest) => {
        sdk = sdkHandler(nest.get(SubscriptionHub));
        nest.getHttpAdapter().getInstance().post('/mcp', sdk.handler);
      },
    });
    cleanups.push(
      () => app.close(),
      () => sdk?.close(),
    );
    for (const id of ['a', 'b', 'c']) {
      const refused = await firstWords(
        await post(app.url, listenBody(id, ASKED), listenHeaders(bearer('alice-token'))),
      );
      expect(refused.text).not.toContain('note://bob');
      expect(refused.text).not.toContain('acknowledged');
      expect(refused.status).toBe(500);
    }
    expect(sdk?.seen.length).toBe(3);
    expect(app.hub.stats().uncheckedListens).toBe(3);
    expect(logger.lines.filter((line) => UNCHECKED_LOG.test(line))).toStrictEqual([expect.stringMatching(/^error: /)]);
  });

  test("auth only on the host's MCP controller (after the listen route): said once with the likely cause", async () => {
    @Controller('mcp')
    @UseGuards(BearerGuard)
    class AuthedMcpController {
      constructor(@Inject(SdkHandler) private readonly sdk: SdkHandler) {}

      @All()
      handle(@Req() req: { body?: unknown }, @Res() res: ServerResponse): Promise<void> {
        return this.sdk.node(req as never, res, req.body);
      }
    }
    @Module({
      imports: [GuardLogModule.register([]), McpSubscriptionsModule.forRoot({ ...BASE_OPTIONS, guards: [ReadGuard] })],
      controllers: [AuthedMcpController],
      providers: [SdkHandler],
    })
    class AppModule {}
    const logger = warningsLogger();
    const app = await NestFactory.create<NestExpressApplication>(AppModule, { logger, abortOnError: false });
    cleanups.push(
      () => app.close(),
      () => app.get(SdkHandler).close(),
    );
    await app.listen(0, '127.0.0.1');
    const url = `${await app.getUrl()}/mcp`;
    for (const id of ['a', 'b', 'c']) {
      const stream = await post(url, listenBody(id, ASKED), listenHeaders(bearer('alice-token')));
      cleanups.push(() => stream.close());
      expect((await stream.event(1)).json.params.notifications).toStrictEqual({ toolsListChanged: true });
      expect(stream.text).not.toContain('note://bob');
    }
    expect(logger.lines.filter((line) => ANONYMOUS_LOG.test(line))).toStrictEqual([expect.stringMatching(/^warn: /)]);
  });
});
