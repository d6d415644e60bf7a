/**
 * The NestJS module end to end, over real HTTP on loopback with a real SSE reader: the listen route
 * behind the app's guards, per-URI decisions by the host's own read guard, pass-through to what serves
 * the rest of MCP (an echoing controller, the official SDK's handler), `notifications/cancelled`,
 * bodies with and without Nest's body parser, a global prefix, the rxjs face of the hub, and shutdown.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { afterEach, describe, expect, it } from '@jest/globals';
import { Inject, Injectable } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import express from 'express';
import { from, lastValueFrom, take, toArray } from 'rxjs';
import { ErrorCode, SubscriptionHub, type SubscriptionEvent } from 'mcp-subscriptions';
import { fromHub, publishTo, type McpCheckContext } from 'mcp-subscriptions/nest';
import { expectToBe } from '../helpers/assert.ts';
import { recordingLogger } from '../helpers/fake-response.ts';
import { bearer, ReadGuard, startNestApp, throttleGuard, type NestTestApp } from '../helpers/nest-apps.ts';
import { mcpRequest, REPO_ROOT } from '../helpers/sample-app.ts';
import { listen, listenBody, listenHeaders, post, type SseStream } from '../helpers/sse.ts';

const ACK = 'notifications/subscriptions/acknowledged';

const apps: NestTestApp[] = [];
const streams: SseStream[] = [];

afterEach(async () => {
  for (const stream of streams.splice(0)) stream.close();
  await Promise.all(apps.splice(0).map((app) => app.close()));
});

async function start(...args: Parameters<typeof startNestApp>): Promise<NestTestApp> {
  const app = await startNestApp(...args);
  apps.push(app);
  return app;
}

async function open(
  app: NestTestApp,
  token: string,
  id: string | number,
  notifications: Record<string, unknown>,
): Promise<{ stream: SseStream; honored: any }> {
  const stream = await listen(app.url, id, notifications, bearer(token));
  streams.push(stream);
  expectToBe(stream.status, 200, stream.text);
  const ack = (await stream.event(1)).json;
  expect(ack.method).toBe(ACK);
  return { stream, honored: ack.params.notifications };
}

/** A JSON POST to the MCP path, answered with JSON. */
async function postJson(url: string, body: unknown, headers: Record<string, string>) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
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

describe('NestJS module: the listen route behind the app guards', () => {
  it('an unauthenticated listen gets exactly the 401 the rest of the app gives', async () => {
    const app = await start();
    const listenAttempt = await post(app.url, listenBody('nobody', { toolsListChanged: true }), listenHeaders());
    streams.push(listenAttempt);
    await listenAttempt.end();
    const other = await postJson(app.url, { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }, {});
    expect(listenAttempt.status).toBe(401);
    expect(listenAttempt.headers['www-authenticate']).toBe('Bearer');
    expect(JSON.parse(listenAttempt.text)).toStrictEqual(other.json);
    expect(other.status).toBe(401);
    expect(other.headers.get('www-authenticate')).toBe('Bearer');
    expect(app.hub.stats().opened).toBe(0);
  });

  it("each URI is decided by the host's read guard, presented a resources/read by the same caller", async () => {
    const logger = recordingLogger();
    const app = await start({ module: { hub: { logger } } });
    const asked = [
      'note://alice/mine',
      'note://bob/theirs',
      'note://shared/promise',
      'note://stream/alice',
      'note://stream/bob',
      'note://false/x',
      'note://boom/x',
    ];
    const { honored } = await open(app, 'alice-token', 'per-uri', { resourceSubscriptions: asked });
    expect(honored).toStrictEqual({
      resourceSubscriptions: ['note://alice/mine', 'note://shared/promise', 'note://stream/alice'],
    });
    const reads = app.guardCalls.filter((call) => call.method === 'resources/read');
    // Every URI went through the read guard of the MCP route (`guards`); the global guard ran once, on
    // the listen request itself (readGuards: 'route', the default).
    for (const uri of asked) {
      // With the URI, so that a failure names it.
      expect({ uri, guards: reads.filter((call) => call.uri === uri).map((call) => call.guard) }).toStrictEqual({
        uri,
        guards: ['ReadGuard'],
      });
    }
    expect(app.guardCalls.filter((call) => call.guard === 'BearerGuard').map((call) => call.method)).toStrictEqual([
      'subscriptions/listen',
    ]);
    for (const call of reads) {
      // The probe carries the listen request id.
      expect(call.id).toBe('per-uri');
      expect(call.mcpMethod).toBe('resources/read');
      expect(call.mcpName).toBe(call.uri);
      expect(call.authorization).toBe('Bearer alice-token');
      expect(call.className).toBe('McpSubscriptionsReadContext');
      expect(call.handlerName).toBe('resourcesRead');
      // The read guard sees the authenticated caller.
      if (call.guard === 'ReadGuard') expect(call.user).toBe('alice');
    }
    // A refusal (HttpException or false) is silent; a guard that throws anything else is a failure, logged.
    // toHaveLength prints the warnings on failure, as the old message did.
    expect(logger.warns).toHaveLength(1);
    expect(String(logger.warns[0]?.[0])).toMatch(/canRead failed/);
  });

  it("readGuards: 'route-and-global' runs the global guards first for each URI, then the read guard", async () => {
    const app = await start({ module: { readGuards: 'route-and-global' } });
    const asked = ['note://alice/a', 'note://bob/b', 'note://alice/c'];
    const { honored } = await open(app, 'alice-token', 'global-reads', { resourceSubscriptions: asked });
    expect(honored).toStrictEqual({ resourceSubscriptions: ['note://alice/a', 'note://alice/c'] });
    const reads = app.guardCalls.filter((call) => call.method === 'resources/read');
    expect(reads.map((call) => [call.guard, call.uri])).toStrictEqual(
      asked.flatMap((uri) => [
        ['BearerGuard', uri],
        ['ReadGuard', uri],
      ]),
    );
  });

  it('a global rate-limit guard counts one listen once by default: it neither spends the budget per URI nor drops URIs', async () => {
    const app = await start({ providers: [{ provide: APP_GUARD, useClass: throttleGuard(2) }] });
    const asked = ['note://alice/a', 'note://alice/b', 'note://alice/c', 'note://alice/d'];
    const { honored } = await open(app, 'alice-token', 'throttled', { resourceSubscriptions: asked });
    expect(honored).toStrictEqual({ resourceSubscriptions: asked });
    expect(app.guardCalls.filter((call) => call.guard === 'ThrottleGuard').map((call) => call.method)).toStrictEqual([
      'subscriptions/listen',
    ]);
    // The second request is still within the budget: the first one spent one request, not five.
    const second = await open(app, 'alice-token', 'throttled-2', { resourceSubscriptions: ['note://alice/a'] });
    expect(second.honored).toStrictEqual({ resourceSubscriptions: ['note://alice/a'] });
  });

  it("with readGuards: 'route-and-global' a rate-limit guard counts each URI, and its 429 leaves the rest out (documented)", async () => {
    const app = await start({
      module: { readGuards: 'route-and-global' },
      providers: [{ provide: APP_GUARD, useClass: throttleGuard(3) }],
    });
    const asked = ['note://alice/a', 'note://alice/b', 'note://alice/c', 'note://alice/d'];
    const { honored } = await open(app, 'alice-token', 'throttled', { resourceSubscriptions: asked });
    // The listen request spent one, the first two URIs the other two; the 429s are silent refusals.
    expect(honored).toStrictEqual({ resourceSubscriptions: ['note://alice/a', 'note://alice/b'] });
    expect(app.guardCalls.filter((call) => call.guard === 'ThrottleGuard')).toHaveLength(5);
  });

  it('the same request as bob gets bob’s URIs: the probe is per caller', async () => {
    const app = await start();
    const { honored } = await open(app, 'bob-token', 'bob', {
      resourceSubscriptions: ['note://alice/mine', 'note://bob/theirs', 'note://stream/bob'],
    });
    expect(honored).toStrictEqual({ resourceSubscriptions: ['note://bob/theirs', 'note://stream/bob'] });
  });

  it('the principal is `req.auth` or `req.user` by default, or what the `principal` option says', async () => {
    const byDefault = await start();
    await open(byDefault, 'alice-token', 'who', { toolsListChanged: true });
    expect(byDefault.hub.openByPrincipal()).toStrictEqual({ alice: 1 });
    const custom = await start({
      module: { principal: (req) => `tenant-a:${String((req.user as { id?: unknown } | undefined)?.id)}` },
    });
    await open(custom, 'bob-token', 'who', { toolsListChanged: true });
    expect(custom.hub.openByPrincipal()).toStrictEqual({ 'tenant-a:bob': 1 });
  });

  it('the listen route comes first even though the host MCP controller is registered before it', async () => {
    const app = await start();
    const { stream } = await open(app, 'alice-token', 'first', { toolsListChanged: true });
    expect(app.hub.stats().openStreams).toBe(1);
    app.hub.toolsListChanged();
    expect((await stream.event(2)).json.method).toBe('notifications/tools/list_changed');
    const passed = await postJson(
      app.url,
      { jsonrpc: '2.0', id: 3, method: 'tools/list', params: {} },
      { ...bearer('alice-token'), 'mcp-method': 'tools/list' },
    );
    expect(passed.status).toBe(200);
    expect(passed.json).toStrictEqual({
      host: true,
      httpMethod: 'POST',
      body: { jsonrpc: '2.0', id: 3, method: 'tools/list', params: {} },
    });
  });

  it('GET on the MCP path is the host route’s alone', async () => {
    const app = await start();
    const res = await fetch(app.url, { headers: bearer('alice-token') });
    expect(await res.json()).toStrictEqual({ host: true, httpMethod: 'GET', body: null });
  });

  it('a global prefix applies to the listen route as to every controller', async () => {
    const app = await start({ prefix: 'api' });
    expect(app.url).toMatch(/\/api\/mcp$/);
    const { honored } = await open(app, 'alice-token', 'prefixed', { toolsListChanged: true });
    expect(honored).toStrictEqual({ toolsListChanged: true });
  });
});

describe('NestJS module: forRootAsync() with the extras that shape it', () => {
  it('path and guards put the listen route on that path, behind those guards, with the factory’s options', async () => {
    const app = await start({
      module: {
        async: {
          path: '/rpc',
          guards: [ReadGuard],
          useFactory: () => ({ capabilities: { resourceSubscriptions: true }, keepAliveMs: false }),
        },
      },
    });
    const rpcUrl = `${app.baseUrl}/rpc`;
    const stream = await listen(
      rpcUrl,
      'on-rpc',
      { resourceSubscriptions: ['note://alice/a', 'note://bob/b'] },
      bearer('alice-token'),
    );
    streams.push(stream);
    expectToBe(stream.status, 200, stream.text);
    const ack = (await stream.event(1)).json;
    // The read guard given as `guards` decided each URI.
    expect(ack.params.notifications).toStrictEqual({ resourceSubscriptions: ['note://alice/a'] });
    const reads = app.guardCalls.filter((call) => call.guard === 'ReadGuard' && call.method === 'resources/read');
    expect(reads.map((call) => [call.className, call.uri])).toStrictEqual([
      ['McpSubscriptionsReadContext', 'note://alice/a'],
      ['McpSubscriptionsReadContext', 'note://bob/b'],
    ]);
    // The factory's capabilities: tool list changes are not offered.
    const narrowed = await listen(rpcUrl, 'tools', { toolsListChanged: true }, bearer('alice-token'));
    streams.push(narrowed);
    expect((await narrowed.event(1)).json.params.notifications).toStrictEqual({});
    // On /mcp there is no listen route: the host's controller gets the request.
    const onMcp = await postJson(
      app.url,
      listenBody('on-mcp', { toolsListChanged: true }),
      listenHeaders(bearer('alice-token')),
    );
    expect(onMcp.json?.host).toBe(true);
    expect(app.hub.stats().opened).toBe(2);
  });
});

describe('NestJS module: in front of the official SDK handler', () => {
  it('listen is ours (narrowed by the guard); everything else is the SDK’s, through the same path', async () => {
    const app = await start({ host: 'sdk' });
    const discover = await mcpRequest(app.url, 'alice-token', 'server/discover');
    expectToBe(discover.status, 200, discover.text);
    expectToBe(discover.message?.result?.capabilities?.resources?.subscribe, true, discover.text);
    const tool = await mcpRequest(app.url, 'alice-token', 'tools/call', { name: 'ping', arguments: {} });
    expectToBe(tool.message?.result?.content?.[0]?.text, 'pong', tool.text);
    // The SDK's own listen would honour every URI; ours drops bob's.
    const { stream, honored } = await open(app, 'alice-token', 'sdk', {
      toolsListChanged: true,
      resourceSubscriptions: ['note://alice/a', 'note://bob/b'],
    });
    expect(honored).toStrictEqual({ toolsListChanged: true, resourceSubscriptions: ['note://alice/a'] });
    expect(app.hub.stats().opened).toBe(1);
    app.hub.resourceUpdated('note://alice/a');
    const update = (await stream.event(2)).json;
    expect(update.method).toBe('notifications/resources/updated');
    expect(update.params.uri).toBe('note://alice/a');
  });

  it('the start-up log says listen is served in front of the host route, after Nest maps the host route first', async () => {
    const lines: { level: string; message: string; context?: string }[] = [];
    const record =
      (level: string) =>
      (message: unknown, context?: unknown): void => {
        lines.push({ level, message: String(message), context: typeof context === 'string' ? context : undefined });
      };
    const logger = { log: record('log'), warn: record('warn'), error: record('error') };
    await start({ host: 'sdk', appOptions: { logger } });
    // Nest's router log names the host's route first (its module registers before ours); the module
    // then says where listen is really served.
    expect(lines.filter((line) => /Mapped \{\/mcp|subscriptions\/listen/.test(line.message))).toStrictEqual([
      { level: 'log', message: 'Mapped {/mcp, ALL} route', context: 'RouterExplorer' },
      { level: 'log', message: 'Mapped {/mcp, POST} route', context: 'RouterExplorer' },
      {
        level: 'log',
        message:
          'subscriptions/listen is served on POST /mcp: moved in front of 1 other controller route for that path, which serves everything else',
        context: 'McpSubscriptions',
      },
    ]);
  });

  it('the app fails to start on a platform other than Express and Fastify, before any route is registered', async () => {
    class OtherPlatform extends ExpressAdapter {
      readonly routes: string[] = [];
      override getType(): string {
        return 'koa';
      }
      override post(...args: unknown[]): unknown {
        this.routes.push(String(args[0]));
        return (super.post as (...a: unknown[]) => unknown)(...args);
      }
    }
    const platform = new OtherPlatform();
    const errors: string[] = [];
    const logger = { log: () => {}, warn: () => {}, error: (message: unknown) => void errors.push(String(message)) };
    await expect(start({ host: 'sdk', adapter: platform, appOptions: { logger } })).rejects.toMatchObject({
      code: ErrorCode.RouteNotPlaced,
      message: expect.stringMatching(/Expected the app to run on Nest's Express or Fastify platform .*got koa/),
    });
    // Before the platform was handed a route: nothing of the platform's own can fail first.
    expect(platform.routes).toStrictEqual([]);
    // Also in the app's own log, as an error.
    expect(errors.some((line) => /Expected the app to run on Nest's Express or Fastify platform/.test(line))).toBe(
      true,
    );
  });

  it('the app fails to start when the listen route is not in the Express router', async () => {
    // The router the module searches is not the one the routes went into.
    class ElsewhereRouted extends ExpressAdapter {
      private readonly other = express();
      override getInstance<T>(): T {
        return this.other as T;
      }
    }
    await expect(start({ host: 'sdk', adapter: new ElsewhereRouted() })).rejects.toMatchObject({
      code: ErrorCode.RouteNotPlaced,
      message: expect.stringMatching(/Expected the listen route \(POST \/mcp\) in the Express router/),
    });
  });

  it('a check that throws is logged by its name only: no URI, no message, no stack', async () => {
    const lines: { level: string; params: unknown[] }[] = [];
    const record =
      (level: string) =>
      (...params: unknown[]): void => {
        lines.push({ level, params });
      };
    const logger = { log: record('log'), warn: record('warn'), error: record('error') };
    const app = await start({
      appOptions: { logger },
      module: {
        canRead: () => {
          throw new Error('secret note://alice/x');
        },
      },
    });
    const { honored } = await open(app, 'alice-token', 'leaky', { resourceSubscriptions: ['note://alice/x'] });
    expect(honored).toStrictEqual({});
    const ours = lines.filter((line) => line.params.includes('McpSubscriptions') && line.level !== 'log');
    // One line, in the engine's words, ending with the error's name (and code, when it has one).
    expect(ours.map((line) => line.level)).toStrictEqual(['warn']);
    expect(ours[0]?.params).toStrictEqual([expect.stringMatching(/^canRead failed\b.*: Error$/), 'McpSubscriptions']);
    // The same at the error level (where Nest prints a second argument as a stack): a hub listener that throws.
    const unsubscribe = app.hub.subscribeAll(() => {
      throw new Error('secret note://alice/x');
    });
    app.hub.resourceUpdated('note://alice/y');
    unsubscribe();
    const errors = lines.filter((line) => line.params.includes('McpSubscriptions') && line.level === 'error');
    // No stack argument (Nest's logger passes its empty slot on as `undefined`).
    expect(errors.map((line) => line.params.filter((param) => param !== undefined))).toStrictEqual([
      ['an event listener threw: Error', 'McpSubscriptions'],
    ]);
    const everything = JSON.stringify(lines);
    expect(everything).not.toContain('note://alice/x');
    expect(everything).not.toContain('secret');
    expect(everything).not.toMatch(/\bat .*\.ts:\d+/);
  });

  it('an unreadable resources/read is refused by the very guard listen reused', async () => {
    const app = await start({ host: 'sdk' });
    const read = await mcpRequest(app.url, 'alice-token', 'resources/read', { uri: 'note://bob/b' });
    expectToBe(read.status, 403, read.text);
    expect(app.guardCalls.some((call) => call.guard === 'ReadGuard' && call.uri === 'note://bob/b')).toBeTruthy();
  });
});

describe('NestJS module: notifications/cancelled', () => {
  it("cancels the caller's own stream with 202; any other cancellation goes on to the host", async () => {
    const app = await start();
    const { stream } = await open(app, 'alice-token', 'to-cancel', { toolsListChanged: true });
    const cancel = (token: string) =>
      postJson(
        app.url,
        { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'to-cancel' } },
        { ...bearer(token), 'mcp-method': 'notifications/cancelled' },
      );
    const fromBob = await cancel('bob-token');
    // Not one of bob’s streams: passed on.
    expect(fromBob.json?.host).toBe(true);
    expect(app.hub.stats().openStreams).toBe(1);
    const fromAlice = await cancel('alice-token');
    expect(fromAlice.status).toBe(202);
    expect(fromAlice.text).toBe('');
    await stream.end();
    // A cancelled stream gets no result.
    expect(stream.events.every((event) => event.json?.result === undefined)).toBeTruthy();
  });
});

describe('NestJS module: request bodies', () => {
  it('without a body parser it reads listen bodies itself, and leaves other bodies for the next route', async () => {
    const app = await start({ appOptions: { bodyParser: false } });
    const { honored } = await open(app, 'alice-token', 'raw', { resourceSubscriptions: ['note://alice/x'] });
    expect(honored).toStrictEqual({ resourceSubscriptions: ['note://alice/x'] });
    const message = { jsonrpc: '2.0', id: 9, method: 'resources/read', params: { uri: 'note://alice/x' } };
    const passed = await postJson(app.url, message, { ...bearer('alice-token'), 'mcp-method': 'resources/read' });
    // The next route (and its guards) see the parsed body.
    expect(passed.json?.body).toStrictEqual(message);
    expect(app.guardCalls.some((call) => call.guard === 'ReadGuard' && call.uri === 'note://alice/x')).toBeTruthy();
  });

  it('without a body parser, an unauthenticated request with a broken body still gets the guard’s 401', async () => {
    const app = await start({ appOptions: { bodyParser: false } });
    const res = await postJson(app.url, '{"jsonrpc":', listenHeaders());
    expect(res.status).toBe(401);
  });

  it('a listen body that is not JSON gets -32700, HTTP 400', async () => {
    const app = await start({ appOptions: { bodyParser: false } });
    const res = await postJson(app.url, '{"jsonrpc":', listenHeaders(bearer('alice-token')));
    expect(res.status).toBe(400);
    expect(res.json?.error?.code).toBe(-32700);
  });

  it('behind Nest’s own body parser it uses the parsed body', async () => {
    const app = await start();
    const { honored } = await open(app, 'bob-token', 'parsed', { resourceSubscriptions: ['note://bob/y'] });
    expect(honored).toStrictEqual({ resourceSubscriptions: ['note://bob/y'] });
  });
});

@Injectable()
class NotesReadCheck {
  readonly asked: string[] = [];
  canRead(uri: string, { principal }: McpCheckContext): boolean {
    this.asked.push(`${principal} ${uri}`);
    return uri.endsWith('/ok');
  }
}

@Injectable()
class SchemeHook {
  handleSubscribeResource(uri: string): boolean {
    return !uri.startsWith('note://alice/unwatched');
  }
}

describe('NestJS module: hooks as providers', () => {
  it('a canRead provider replaces the guards for URIs; a subscribe hook provider runs after it', async () => {
    const app = await start({
      module: { canRead: { useExisting: NotesReadCheck }, handleSubscribeResource: { useExisting: SchemeHook } },
      providers: [NotesReadCheck, SchemeHook],
    });
    const { honored } = await open(app, 'alice-token', 'providers', {
      resourceSubscriptions: ['note://bob/ok', 'note://alice/no', 'note://alice/unwatched/ok', 'note://alice/ok'],
    });
    expect(honored).toStrictEqual({ resourceSubscriptions: ['note://bob/ok', 'note://alice/ok'] });
    // Guards not asked (toHaveLength prints the calls on failure).
    expect(app.guardCalls.filter((call) => call.method === 'resources/read')).toHaveLength(0);
    expect(app.app.get(NotesReadCheck).asked).toContain('alice note://bob/ok');
  });
});

@Injectable()
class Publisher {
  constructor(@Inject(SubscriptionHub) readonly hub: SubscriptionHub) {}
}

describe('NestJS module: rxjs', () => {
  it('fromHub() emits what is published; publishTo() publishes an Observable to the open streams', async () => {
    const app = await start({ providers: [Publisher] });
    const { hub } = app.app.get(Publisher);
    // The hub injected into a host service is the module’s.
    expect(hub).toBe(app.hub);
    const { stream } = await open(app, 'alice-token', 'rx', {
      toolsListChanged: true,
      resourceSubscriptions: ['note://alice/rx'],
    });
    const seen = lastValueFrom(fromHub(hub).pipe(take(2), toArray()));
    const source = from<SubscriptionEvent[]>([
      { kind: 'resource_updated', uri: 'note://alice/rx' },
      { kind: 'tools_list_changed' },
    ]);
    const reports = await lastValueFrom(source.pipe(publishTo(hub), toArray()));
    expect(reports.map((report) => report.written)).toStrictEqual([1, 1]);
    expect(await seen).toStrictEqual([
      { kind: 'resource_updated', uri: 'note://alice/rx' },
      { kind: 'tools_list_changed' },
    ]);
    await stream.until(() => stream.events.length >= 3, 'both events');
    expect(stream.events.slice(1).map((event) => event.json.method)).toStrictEqual([
      'notifications/resources/updated',
      'notifications/tools/list_changed',
    ]);
  });

  it('publishTo() errors the stream with the hub’s EventError for an invalid event', async () => {
    const app = await start();
    const bad = from<SubscriptionEvent[]>([{ kind: 'resource_updated', uri: 'relative/uri' }]);
    await expect(lastValueFrom(bad.pipe(publishTo(app.hub)))).rejects.toMatchObject({
      code: 'ERR_MCP_SUBSCRIPTIONS_INVALID_EVENT',
    });
  });
});

describe('NestJS module: shutdown', () => {
  it('app.close() ends every open stream with the terminal result before the server closes', async () => {
    const app = await start();
    const opened = [
      await open(app, 'alice-token', 'bye', { toolsListChanged: true }),
      await open(app, 'bob-token', 0, { resourceSubscriptions: ['note://bob/z'] }),
    ];
    await app.close();
    for (const [i, { stream }] of opened.entries()) {
      await stream.end();
      const last = stream.events.at(-1)?.json;
      expect(last?.id).toBe(i === 0 ? 'bye' : 0);
      expect(last?.result?.resultType).toBe('complete');
    }
  });

  it('app.close() does not hang on a client that stopped reading', async () => {
    const app = await start({ module: { hub: { completeTimeoutMs: 100 } } });
    const uris = Array.from({ length: 20 }, (_, i) => `note://alice/flood-${i}`);
    const stuckId = `stuck-${'x'.repeat(60_000)}`;
    const { stream: stuck } = await open(app, 'alice-token', stuckId, { resourceSubscriptions: uris });
    const { stream: healthy } = await open(app, 'bob-token', 'healthy', { toolsListChanged: true });
    stuck.pause();
    for (let round = 0; round < 50 && app.hub.stats().queued === 0; round++) {
      for (const uri of uris) app.hub.resourceUpdated(uri);
      await new Promise((resolve) => setImmediate(resolve));
    }
    // The stuck reader’s socket filled.
    expect(app.hub.stats().queued).toBeGreaterThan(0);
    await app.close();
    await healthy.end();
    expect(healthy.events.at(-1)?.json?.result?.resultType).toBe('complete');
  });

  it('with enableShutdownHooks(), SIGTERM ends every open stream with the terminal result before the process goes', async () => {
    const child = spawn(
      process.execPath,
      ['--conditions=mcp-subscriptions-source', '--import', 'tsx', 'test/helpers/nest-shutdown-app.ts'],
      {
        cwd: REPO_ROOT,
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
    try {
      let out = '';
      child.stdout.setEncoding('utf8');
      const url = await new Promise<string>((resolve, reject) => {
        child.stdout.on('data', (chunk: string) => {
          out += chunk;
          const match = /listening on (\S+)/.exec(out);
          if (match) resolve(match[1]!);
        });
        child.once('exit', () => reject(new Error(`the app exited before listening: ${out}`)));
      });
      const stream = await listen(url, 'signalled', { toolsListChanged: true }, bearer('alice-token'));
      streams.push(stream);
      await stream.event(1);
      child.kill('SIGTERM');
      await stream.end();
      const last = stream.events.at(-1)?.json;
      expect(last?.id).toBe('signalled');
      expect(last?.result?.resultType).toBe('complete');
      // Nest re-raises the signal once the app is closed: the process ends by it.
      const [, signal] = await exited;
      expect(signal).toBe('SIGTERM');
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
  });
});
