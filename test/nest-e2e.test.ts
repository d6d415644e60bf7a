/**
 * The NestJS module end to end, over real HTTP on loopback with a real SSE reader: the listen route
 * behind the app's guards, per-URI decisions by the host's own read guard, pass-through to what serves
 * the rest of MCP (an echoing controller, the official SDK's handler), `notifications/cancelled`,
 * bodies with and without Nest's body parser, a global prefix, the rxjs face of the hub, and shutdown.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { afterEach, describe, it } from 'node:test';
import { Inject, Injectable } from '@nestjs/common';
import { from, lastValueFrom, take, toArray } from 'rxjs';
import { SubscriptionHub, type SubscriptionEvent } from 'mcp-subscriptions';
import { fromHub, publishTo, type McpCheckContext } from 'mcp-subscriptions/nest';
import { recordingLogger } from './helpers/fake-response.ts';
import { bearer, startNestApp, type NestTestApp } from './helpers/nest-apps.ts';
import { mcpRequest, REPO_ROOT } from './helpers/sample-app.ts';
import { listen, listenBody, listenHeaders, post, type SseStream } from './helpers/sse.ts';

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
  assert.equal(stream.status, 200, stream.text);
  const ack = (await stream.event(1)).json;
  assert.equal(ack.method, ACK);
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
    assert.equal(listenAttempt.status, 401);
    assert.equal(listenAttempt.headers['www-authenticate'], 'Bearer');
    assert.deepEqual(JSON.parse(listenAttempt.text), other.json);
    assert.equal(other.status, 401);
    assert.equal(other.headers.get('www-authenticate'), 'Bearer');
    assert.equal(app.hub.stats().opened, 0);
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
    assert.deepEqual(honored, {
      resourceSubscriptions: ['note://alice/mine', 'note://shared/promise', 'note://stream/alice'],
    });
    const reads = app.guardCalls.filter((call) => call.method === 'resources/read');
    // Every URI went through the global guard and then the read guard, as on the MCP route.
    for (const uri of asked) {
      assert.deepEqual(
        reads.filter((call) => call.uri === uri).map((call) => call.guard),
        ['BearerGuard', 'ReadGuard'],
        uri,
      );
    }
    for (const call of reads) {
      assert.equal(call.id, 'per-uri', 'the probe carries the listen request id');
      assert.equal(call.mcpMethod, 'resources/read');
      assert.equal(call.mcpName, call.uri);
      assert.equal(call.authorization, 'Bearer alice-token');
      assert.equal(call.className, 'McpSubscriptionsReadContext');
      assert.equal(call.handlerName, 'resourcesRead');
      if (call.guard === 'ReadGuard') assert.equal(call.user, 'alice', 'the read guard sees the authenticated caller');
    }
    // A refusal (HttpException or false) is silent; a guard that throws anything else is a failure, logged.
    assert.equal(logger.warns.length, 1, JSON.stringify(logger.warns));
    assert.match(String(logger.warns[0]?.[0]), /canRead failed/);
  });

  it('the same request as bob gets bob’s URIs: the probe is per caller', async () => {
    const app = await start();
    const { honored } = await open(app, 'bob-token', 'bob', {
      resourceSubscriptions: ['note://alice/mine', 'note://bob/theirs', 'note://stream/bob'],
    });
    assert.deepEqual(honored, { resourceSubscriptions: ['note://bob/theirs', 'note://stream/bob'] });
  });

  it('the principal is `req.auth` or `req.user` by default, or what the `principal` option says', async () => {
    const byDefault = await start();
    await open(byDefault, 'alice-token', 'who', { toolsListChanged: true });
    assert.deepEqual(byDefault.hub.stats().openByPrincipal, { alice: 1 });
    const custom = await start({
      module: { principal: (req) => `tenant-a:${String((req.user as { id?: unknown } | undefined)?.id)}` },
    });
    await open(custom, 'bob-token', 'who', { toolsListChanged: true });
    assert.deepEqual(custom.hub.stats().openByPrincipal, { 'tenant-a:bob': 1 });
  });

  it('the listen route comes first even though the host MCP controller is registered before it', async () => {
    const app = await start();
    const { stream } = await open(app, 'alice-token', 'first', { toolsListChanged: true });
    assert.equal(app.hub.stats().openStreams, 1);
    app.hub.toolsListChanged();
    assert.equal((await stream.event(2)).json.method, 'notifications/tools/list_changed');
    const passed = await postJson(
      app.url,
      { jsonrpc: '2.0', id: 3, method: 'tools/list', params: {} },
      { ...bearer('alice-token'), 'mcp-method': 'tools/list' },
    );
    assert.equal(passed.status, 200);
    assert.deepEqual(passed.json, {
      host: true,
      httpMethod: 'POST',
      body: { jsonrpc: '2.0', id: 3, method: 'tools/list', params: {} },
    });
  });

  it('GET on the MCP path is the host route’s alone', async () => {
    const app = await start();
    const res = await fetch(app.url, { headers: bearer('alice-token') });
    assert.deepEqual(await res.json(), { host: true, httpMethod: 'GET', body: null });
  });

  it('a global prefix applies to the listen route as to every controller', async () => {
    const app = await start({ prefix: 'api' });
    assert.match(app.url, /\/api\/mcp$/);
    const { honored } = await open(app, 'alice-token', 'prefixed', { toolsListChanged: true });
    assert.deepEqual(honored, { toolsListChanged: true });
  });
});

describe('NestJS module: in front of the official SDK handler', () => {
  it('listen is ours (narrowed by the guard); everything else is the SDK’s, through the same path', async () => {
    const app = await start({ host: 'sdk' });
    const discover = await mcpRequest(app.url, 'alice-token', 'server/discover');
    assert.equal(discover.status, 200, discover.text);
    assert.equal(discover.message?.result?.capabilities?.resources?.subscribe, true, discover.text);
    const tool = await mcpRequest(app.url, 'alice-token', 'tools/call', { name: 'ping', arguments: {} });
    assert.equal(tool.message?.result?.content?.[0]?.text, 'pong', tool.text);
    // The SDK's own listen would honour every URI; ours drops bob's.
    const { stream, honored } = await open(app, 'alice-token', 'sdk', {
      toolsListChanged: true,
      resourceSubscriptions: ['note://alice/a', 'note://bob/b'],
    });
    assert.deepEqual(honored, { toolsListChanged: true, resourceSubscriptions: ['note://alice/a'] });
    assert.equal(app.hub.stats().opened, 1);
    app.hub.resourceUpdated('note://alice/a');
    const update = (await stream.event(2)).json;
    assert.equal(update.method, 'notifications/resources/updated');
    assert.equal(update.params.uri, 'note://alice/a');
  });

  it('an unreadable resources/read is refused by the very guard listen reused', async () => {
    const app = await start({ host: 'sdk' });
    const read = await mcpRequest(app.url, 'alice-token', 'resources/read', { uri: 'note://bob/b' });
    assert.equal(read.status, 403, read.text);
    assert.ok(app.guardCalls.some((call) => call.guard === 'ReadGuard' && call.uri === 'note://bob/b'));
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
    assert.equal(fromBob.json?.host, true, 'not one of bob’s streams: passed on');
    assert.equal(app.hub.stats().openStreams, 1);
    const fromAlice = await cancel('alice-token');
    assert.equal(fromAlice.status, 202);
    assert.equal(fromAlice.text, '');
    await stream.end();
    assert.ok(
      stream.events.every((event) => event.json?.result === undefined),
      'a cancelled stream gets no result',
    );
  });
});

describe('NestJS module: request bodies', () => {
  it('without a body parser it reads listen bodies itself, and leaves other bodies for the next route', async () => {
    const app = await start({ appOptions: { bodyParser: false } });
    const { honored } = await open(app, 'alice-token', 'raw', { resourceSubscriptions: ['note://alice/x'] });
    assert.deepEqual(honored, { resourceSubscriptions: ['note://alice/x'] });
    const message = { jsonrpc: '2.0', id: 9, method: 'resources/read', params: { uri: 'note://alice/x' } };
    const passed = await postJson(app.url, message, { ...bearer('alice-token'), 'mcp-method': 'resources/read' });
    assert.deepEqual(passed.json?.body, message, 'the next route (and its guards) see the parsed body');
    assert.ok(app.guardCalls.some((call) => call.guard === 'ReadGuard' && call.uri === 'note://alice/x'));
  });

  it('without a body parser, an unauthenticated request with a broken body still gets the guard’s 401', async () => {
    const app = await start({ appOptions: { bodyParser: false } });
    const res = await postJson(app.url, '{"jsonrpc":', listenHeaders());
    assert.equal(res.status, 401);
  });

  it('a listen body that is not JSON gets -32700, HTTP 400', async () => {
    const app = await start({ appOptions: { bodyParser: false } });
    const res = await postJson(app.url, '{"jsonrpc":', listenHeaders(bearer('alice-token')));
    assert.equal(res.status, 400);
    assert.equal(res.json?.error?.code, -32700);
  });

  it('behind Nest’s own body parser it uses the parsed body', async () => {
    const app = await start();
    const { honored } = await open(app, 'bob-token', 'parsed', { resourceSubscriptions: ['note://bob/y'] });
    assert.deepEqual(honored, { resourceSubscriptions: ['note://bob/y'] });
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
      module: { canRead: NotesReadCheck, handleSubscribeResource: SchemeHook },
      providers: [NotesReadCheck, SchemeHook],
    });
    const { honored } = await open(app, 'alice-token', 'providers', {
      resourceSubscriptions: ['note://bob/ok', 'note://alice/no', 'note://alice/unwatched/ok', 'note://alice/ok'],
    });
    assert.deepEqual(honored, { resourceSubscriptions: ['note://bob/ok', 'note://alice/ok'] });
    assert.equal(app.guardCalls.filter((call) => call.method === 'resources/read').length, 0, 'guards not asked');
    assert.ok(app.app.get(NotesReadCheck).asked.includes('alice note://bob/ok'));
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
    assert.equal(hub, app.hub, 'the hub injected into a host service is the module’s');
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
    assert.deepEqual(
      reports.map((report) => report.written),
      [1, 1],
    );
    assert.deepEqual(await seen, [
      { kind: 'resource_updated', uri: 'note://alice/rx' },
      { kind: 'tools_list_changed' },
    ]);
    await stream.until(() => stream.events.length >= 3, 'both events');
    assert.deepEqual(
      stream.events.slice(1).map((event) => event.json.method),
      ['notifications/resources/updated', 'notifications/tools/list_changed'],
    );
  });

  it('publishTo() errors the stream with the hub’s EventError for an invalid event', async () => {
    const app = await start();
    const bad = from<SubscriptionEvent[]>([{ kind: 'resource_updated', uri: 'relative/uri' }]);
    await assert.rejects(lastValueFrom(bad.pipe(publishTo(app.hub))), {
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
      assert.equal(last?.id, i === 0 ? 'bye' : 0);
      assert.equal(last?.result?.resultType, 'complete');
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
    assert.ok(app.hub.stats().queued > 0, 'the stuck reader’s socket filled');
    await app.close();
    await healthy.end();
    assert.equal(healthy.events.at(-1)?.json?.result?.resultType, 'complete');
  });

  it('with enableShutdownHooks(), SIGTERM ends every open stream with the terminal result before the process goes', async () => {
    const child = spawn(
      process.execPath,
      ['--conditions=source', '--import', 'tsx', 'test/helpers/nest-shutdown-app.ts'],
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
      assert.equal(last?.id, 'signalled');
      assert.equal(last?.result?.resultType, 'complete');
      // Nest re-raises the signal once the app is closed: the process ends by it.
      const [, signal] = await exited;
      assert.equal(signal, 'SIGTERM');
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
  });
});
