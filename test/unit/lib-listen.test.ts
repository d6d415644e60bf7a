/**
 * One listen request end to end through the engine's public face, `createListenHandler`, on a fake
 * response: exact bytes on the wire, pre-stream errors with their HTTP status, capability narrowing,
 * the per-URI checks (sync, async, bounded concurrency, failures), capacity and option validation.
 */
import diagnostics from 'node:diagnostics_channel';
import { afterEach, describe, expect, jest, test } from '@jest/globals';
import {
  defineCapabilities,
  DiagnosticsChannel,
  ErrorCode,
  MemoryBus,
  SubscriptionHub,
  toServerCapabilities,
  type CheckContext,
  type ListenHandlerOptions,
  type SubscriptionCapabilities,
} from 'mcp-subscriptions';
import { anonymousPrincipal } from '../../lib/principal.ts';
import { createListenHandler, hubEngine, resolveListenOptions } from '../../lib/internal.ts';
import { EVERY_CAPABILITY } from '../helpers/capabilities.ts';
import { FakeResponse, recordingLogger, settle, settleUntil } from '../helpers/fake-response.ts';
import { followingBus } from '../helpers/following-bus.ts';
import { expectOptionsError, optionsErrorOf } from '../helpers/options.ts';
import { listenBody, listenHeaders } from '../helpers/sse.ts';

const TASKS = 'io.modelcontextprotocol/tasks';
const ALL: SubscriptionCapabilities = EVERY_CAPABILITY;

interface Setup {
  hub: SubscriptionHub;
  logger: ReturnType<typeof recordingLogger>;
  handler: ReturnType<typeof createListenHandler>;
  /** Serves one request and returns its response once `handle()` resolved. */
  serve: (
    body: unknown,
    init?: { principal?: string; headers?: Record<string, string>; request?: unknown },
  ) => Promise<FakeResponse>;
}

function setup(
  options: Partial<ListenHandlerOptions> = {},
  hubOptions: ConstructorParameters<typeof SubscriptionHub>[0] = {},
): Setup {
  const logger = recordingLogger();
  const hub = new SubscriptionHub({ logger, ...hubOptions });
  const handler = createListenHandler({
    hub,
    capabilities: ALL,
    canRead: () => true,
    canAccessTask: () => true,
    keepAliveMs: false,
    ...options,
  });
  return {
    hub,
    logger,
    handler,
    async serve(body, init = {}) {
      const res = new FakeResponse();
      await handler.handle(
        {
          body,
          headers: init.headers ?? listenHeaders(),
          principal: init.principal ?? 'alice',
          request: init.request ?? {},
        },
        res,
      );
      return res;
    },
  };
}

/** Cleanups a test registers (diagnostics unsubscribes): run after it, pass or fail. */
const cleanups: Array<() => unknown> = [];
afterEach(() => {
  jest.useRealTimers();
  for (const cleanup of cleanups.splice(0)) cleanup();
});

/**
 * Fake setTimeout and clearTimeout only (the engine's check timeouts); everything else (Date, nextTick, setImmediate, microtasks, intervals...) stays real.
 */
function fakeSetTimeoutOnly(): void {
  jest.useFakeTimers({
    doNotFake: [
      'Date',
      'hrtime',
      'nextTick',
      'performance',
      'queueMicrotask',
      'requestAnimationFrame',
      'cancelAnimationFrame',
      'requestIdleCallback',
      'cancelIdleCallback',
      'setImmediate',
      'clearImmediate',
      'setInterval',
      'clearInterval',
      'Temporal',
    ],
  });
}

/**
 * Whether `promise` settled within `turns` turns of the event loop (setImmediate is never faked): a
 * bounded wait with an answer to assert, where `await promise` would only end by jest's timeout.
 */
async function settledWithin(promise: Promise<unknown>, turns = 100): Promise<boolean> {
  let settled = false;
  const done = (): void => {
    settled = true;
  };
  promise.then(done, done);
  for (let i = 0; i < turns && !settled; i++) await settle();
  return settled;
}

const taskMeta = { 'io.modelcontextprotocol/clientCapabilities': { extensions: { [TASKS]: {} } } };

function ackOf(res: FakeResponse): any {
  const first = res.messages()[0];
  expect(first?.method).toBe('notifications/subscriptions/acknowledged');
  return first.params.notifications;
}

function deferred<T>() {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

describe('exact bytes on the wire', () => {
  test('ack, list change, resource update and terminal result, as spec §2–§4 write them', async () => {
    const { hub, serve } = setup({ capabilities: { toolsListChanged: true, resourceSubscriptions: true } });
    const res = await serve(
      listenBody('listen-1', { toolsListChanged: true, resourceSubscriptions: ['note://alice/todo'] }),
    );
    expect(res.text).toBe(
      'event: message\n' +
        'data: {"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"listen-1"},"notifications":{"toolsListChanged":true,"resourceSubscriptions":["note://alice/todo"]}}}\n' +
        '\n',
    );
    const ackLength = res.text.length;
    hub.toolsListChanged();
    hub.resourceUpdated('note://alice/todo');
    await hub.close();
    expect(res.text.slice(ackLength)).toBe(
      'event: message\n' +
        'data: {"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"listen-1"}}}\n' +
        '\n' +
        'event: message\n' +
        'data: {"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"note://alice/todo","_meta":{"io.modelcontextprotocol/subscriptionId":"listen-1"}}}\n' +
        '\n' +
        'event: message\n' +
        'data: {"jsonrpc":"2.0","id":"listen-1","result":{"resultType":"complete","_meta":{"io.modelcontextprotocol/subscriptionId":"listen-1"}}}\n' +
        '\n',
    );
    expect(res.writableEnded).toBe(true);
  });

  test('numeric 0 and empty-string ids are used verbatim in every frame', async () => {
    for (const [id, json] of [
      [0, '0'],
      ['', '""'],
      ['a"b\\c', '"a\\"b\\\\c"'],
    ] as const) {
      const { hub, serve } = setup({ capabilities: { promptsListChanged: true } });
      const res = await serve(listenBody(id, { promptsListChanged: true }));
      hub.promptsListChanged();
      await hub.close();
      expect(res.text).toBe(
        `event: message\ndata: {"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":${json}},"notifications":{"promptsListChanged":true}}}\n\n` +
          `event: message\ndata: {"jsonrpc":"2.0","method":"notifications/prompts/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":${json}}}}\n\n` +
          `event: message\ndata: {"jsonrpc":"2.0","id":${json},"result":{"resultType":"complete","_meta":{"io.modelcontextprotocol/subscriptionId":${json}}}}\n\n`,
      );
    }
  });

  test('the terminal result carries serverInfo when configured', async () => {
    const { hub, serve } = setup({
      capabilities: { toolsListChanged: true },
      serverInfo: { name: 'notes', version: '1.2.3' },
    });
    const res = await serve(listenBody(9, { toolsListChanged: true }));
    await hub.close();
    const last =
      'event: message\ndata: {"jsonrpc":"2.0","id":9,"result":{"resultType":"complete","_meta":{"io.modelcontextprotocol/subscriptionId":9,"io.modelcontextprotocol/serverInfo":{"name":"notes","version":"1.2.3"}}}}\n\n';
    // res.text ends with `last` (a failure shows res.text)
    expect([res.text, res.text.endsWith(last)]).toStrictEqual([res.text, true]);
  });

  test('a task notification carries the full state on one data line, line breaks escaped', async () => {
    const { hub, serve } = setup({ capabilities: { tasks: true } });
    const res = await serve(listenBody('t', { taskIds: ['task-1'] }, taskMeta));
    const state = {
      taskId: 'task-1',
      status: 'failed' as const,
      statusMessage: 'line one\nline two\r\nline three\u2028end',
      createdAt: '2026-07-28T10:00:00Z',
      lastUpdatedAt: '2026-07-28T10:01:00Z',
      ttlMs: null,
      pollIntervalMs: 500,
      error: { code: -32603, message: 'boom' },
    };
    hub.taskStatus(state, 'alice');
    await settle(); // a tick's events reach a stream as one write, at the end of the tick
    const frames = res.text.split('\n\n');
    const frame = frames[1]!;
    // one event line and one data line (a failure prints the frame's lines)
    expect(frame.split('\n')).toHaveLength(2);
    expect(
      frame.startsWith('event: message\ndata: {"jsonrpc":"2.0","method":"notifications/tasks","params":{'),
    ).toBeTruthy();
    const message = JSON.parse(frame.slice('event: message\ndata: '.length));
    expect(message).toStrictEqual({
      jsonrpc: '2.0',
      method: 'notifications/tasks',
      params: { ...state, _meta: { 'io.modelcontextprotocol/subscriptionId': 't' } },
    });
    await hub.close();
  });
});

describe('errors before the stream opens', () => {
  async function error(setupResult: Setup, body: unknown, headers = listenHeaders()) {
    const res = await setupResult.serve(body, { headers });
    expect(res.headers?.['Content-Type']).toBe('application/json');
    expect(res.writableEnded).toBe(true);
    return { status: res.statusCode, body: JSON.parse(res.text), headers: res.headers ?? {} };
  }

  test('each row of the spec §6 table gets its code, HTTP status and the request id', async () => {
    const s = setup({ capabilities: ALL });
    const noMeta = listenBody('m', {}) as any;
    delete noMeta.params._meta;
    const rows: [unknown, Record<string, string>, number, number, unknown][] = [
      [[listenBody(1, {})], listenHeaders(), -32600, 400, null],
      [noMeta, listenHeaders(), -32602, 400, 'm'],
      [listenBody('h', {}), listenHeaders({ 'mcp-protocol-version': '2025-11-25' }), -32020, 400, 'h'],
      [
        listenBody('v', {}, { 'io.modelcontextprotocol/protocolVersion': '2025-11-25' }),
        listenHeaders({ 'mcp-protocol-version': '2025-11-25' }),
        -32022,
        400,
        'v',
      ],
      [listenBody('x', { taskIds: ['t'] }), listenHeaders(), -32021, 400, 'x'],
      [listenBody('n', { toolsListChanged: 'yes' }), listenHeaders(), -32602, 400, 'n'],
      [
        listenBody(0, { resourceSubscriptions: Array.from({ length: 1001 }, (_, i) => `a:${i}`) }),
        listenHeaders(),
        -32602,
        400,
        0,
      ],
    ];
    for (const [body, headers, code, status, id] of rows) {
      const got = await error(s, body, headers);
      // got.body shows in a failure: it tells which row went wrong
      expect([got.status, got.body]).toStrictEqual([status, got.body]);
      expect(got.body.jsonrpc).toBe('2.0');
      expect(got.body.id).toBe(id);
      expect(got.body.error.code).toBe(code);
      expect(typeof got.body.error.message).toBe('string');
    }
    expect(s.hub.stats().pendingStreams).toBe(0);
    expect(s.hub.stats().opened).toBe(0);
    await s.hub.close();
  });

  test('a body the adapter could not parse is -32700 with a null id', async () => {
    const s = setup();
    const res = new FakeResponse();
    await s.handler.handle(
      { rawBody: Buffer.from('{"jsonrpc":'), headers: listenHeaders(), principal: 'a', request: {} },
      res,
    );
    expect(res.statusCode).toBe(400);
    expect(JSON.parse(res.text)).toStrictEqual({
      jsonrpc: '2.0',
      id: null,
      error: { code: -32700, message: JSON.parse(res.text).error.message },
    });
    await s.hub.close();
  });

  test('a rawBody string or Buffer that is valid JSON is served like a parsed body', async () => {
    const s = setup({ capabilities: { toolsListChanged: true } });
    for (const rawBody of [
      JSON.stringify(listenBody('s', { toolsListChanged: true })),
      Buffer.from(JSON.stringify(listenBody('b', { toolsListChanged: true }))),
    ]) {
      const res = new FakeResponse();
      await s.handler.handle({ rawBody, headers: listenHeaders(), principal: 'a', request: {} }, res);
      expect(res.statusCode).toBe(200);
      expect(ackOf(res)).toStrictEqual({ toolsListChanged: true });
    }
    await s.hub.close();
  });

  test('the data of -32022 and -32021 is what the spec prescribes', async () => {
    const s = setup();
    const version = await error(
      s,
      listenBody('v', {}, { 'io.modelcontextprotocol/protocolVersion': '2025-11-25' }),
      listenHeaders({ 'mcp-protocol-version': '2025-11-25' }),
    );
    expect(version.body.error.data).toStrictEqual({ supported: ['2026-07-28'], requested: '2025-11-25' });
    const tasks = await error(s, listenBody('x', { taskIds: ['t'] }));
    expect(tasks.body.error.data).toStrictEqual({ requiredCapabilities: { extensions: { [TASKS]: {} } } });
    await s.hub.close();
  });

  test('a Content-Type that is not JSON is 415, an Accept without text/event-stream is 406', async () => {
    const s = setup({ capabilities: { toolsListChanged: true } });
    const media = await error(
      s,
      listenBody('c', { toolsListChanged: true }),
      listenHeaders({ 'content-type': 'text/plain' }),
    );
    expect(media.status).toBe(415);
    expect(media.body.error.code).toBe(-32600);
    expect(media.body.id).toBe('c');
    const accept = await error(
      s,
      listenBody('a', { toolsListChanged: true }),
      listenHeaders({ accept: 'application/json' }),
    );
    expect(accept.status).toBe(406);
    expect(accept.body.error.code).toBe(-32600);
    for (const ok of ['text/event-stream', 'application/json;q=0.9, text/event-stream;q=1', '*/*']) {
      const res = await s.serve(listenBody('ok', { toolsListChanged: true }), {
        headers: listenHeaders({ accept: ok }),
      });
      expect([ok, res.statusCode]).toStrictEqual([ok, 200]); // the Accept value shows in a failure
    }
    await s.hub.close();
  });

  test('the README lists Content-Type (415) before "body is not JSON" (-32700)', async () => {
    const s = setup();
    const res = new FakeResponse();
    await s.handler.handle(
      { rawBody: 'not json', headers: listenHeaders({ 'content-type': 'text/plain' }), principal: 'a', request: {} },
      res,
    );
    await s.hub.close();
    expect(res.statusCode).toBe(415);
  });

  test('capacity exhausted: 503, Retry-After, -32603 "Subscription limit reached", the id; a freed slot is reusable at once', async () => {
    const s = setup({ capabilities: { toolsListChanged: true } }, { maxSubscriptions: 1, retryAfterSeconds: 3 });
    const first = await s.serve(listenBody('one', { toolsListChanged: true }));
    expect(first.statusCode).toBe(200);
    const refused = await error(s, listenBody('two', { toolsListChanged: true }));
    expect(refused.status).toBe(503);
    expect(refused.headers['Retry-After']).toBe('3');
    expect(refused.body).toStrictEqual({
      jsonrpc: '2.0',
      id: 'two',
      error: { code: -32603, message: 'Subscription limit reached' },
    });
    first.clientClose();
    const third = await s.serve(listenBody('three', { toolsListChanged: true }));
    expect(third.statusCode).toBe(200);
    await s.hub.close();
  });

  test('a request still being authorized holds its slot', async () => {
    const gate = deferred<boolean>();
    const s = setup(
      { capabilities: { resourceSubscriptions: true }, canRead: (uri) => (uri === 'note://a' ? gate.promise : true) },
      { maxSubscriptionsPerPrincipal: 1 },
    );
    const res = new FakeResponse();
    const pending = s.handler.handle(
      {
        body: listenBody('p', { resourceSubscriptions: ['note://a'] }),
        headers: listenHeaders(),
        principal: 'alice',
        request: {},
      },
      res,
    );
    await settleUntil(() => s.hub.stats().pendingStreams === 1, 'the reservation');
    const refused = await error(s, listenBody('q', { resourceSubscriptions: ['note://a'] }));
    expect(refused.status).toBe(503);
    const other = await s.serve(listenBody('r', { resourceSubscriptions: ['note://b'] }), { principal: 'bob' });
    expect(other.statusCode).toBe(200);
    gate.resolve(true);
    await pending;
    expect(res.statusCode).toBe(200);
    expect(s.hub.stats().openStreams).toBe(2);
    await s.hub.close();
  });
});

describe('capability narrowing (spec §2)', () => {
  test('a flag is kept only if asked true and offered; false is never echoed', async () => {
    const s = setup({
      capabilities: { toolsListChanged: true, promptsListChanged: false, resourcesListChanged: true },
    });
    const res = await s.serve(
      listenBody(1, { toolsListChanged: true, promptsListChanged: true, resourcesListChanged: false }),
    );
    expect(ackOf(res)).toStrictEqual({ toolsListChanged: true });
    await s.hub.close();
  });

  test('unknown fields are not honoured and omitted', async () => {
    const s = setup({ capabilities: { toolsListChanged: true } });
    const res = await s.serve(listenBody(1, { toolsListChanged: true, futureListChanged: true, elicitations: ['x'] }));
    expect(ackOf(res)).toStrictEqual({ toolsListChanged: true });
    await s.hub.close();
  });

  test('without resourceSubscriptions offered, URIs are omitted and no check runs', async () => {
    const calls: string[] = [];
    const s = setup({ capabilities: { toolsListChanged: true }, canRead: (uri) => calls.push(uri) > 0 });
    const res = await s.serve(listenBody(1, { toolsListChanged: true, resourceSubscriptions: ['note://a'] }));
    expect(ackOf(res)).toStrictEqual({ toolsListChanged: true });
    expect(calls).toStrictEqual([]);
    await s.hub.close();
  });

  test('URIs pass the read check then the subscribe hook; duplicates collapse; request order is kept', async () => {
    const order: string[] = [];
    const s = setup({
      capabilities: { resourceSubscriptions: true },
      canRead: (uri, { principal }) => {
        order.push(`read ${uri}`);
        return uri.startsWith(`note://${principal}/`);
      },
      handleSubscribeResource: (uri) => {
        order.push(`hook ${uri}`);
        return !uri.endsWith('/unwatchable');
      },
    });
    const res = await s.serve(
      listenBody(1, {
        resourceSubscriptions: [
          'note://alice/b',
          'note://bob/secret',
          'note://alice/a',
          'note://alice/b',
          'note://alice/unwatchable',
        ],
      }),
    );
    expect(ackOf(res)).toStrictEqual({ resourceSubscriptions: ['note://alice/b', 'note://alice/a'] });
    // Each distinct URI is checked once; the hook sees only readable URIs, each after its read check.
    expect(order.filter((c) => c.startsWith('read')).sort()).toStrictEqual([
      'read note://alice/a',
      'read note://alice/b',
      'read note://alice/unwatchable',
      'read note://bob/secret',
    ]);
    expect(order.filter((c) => c.startsWith('hook')).sort()).toStrictEqual([
      'hook note://alice/a',
      'hook note://alice/b',
      'hook note://alice/unwatchable',
    ]);
    for (const uri of ['note://alice/a', 'note://alice/b', 'note://alice/unwatchable']) {
      expect(order.indexOf(`read ${uri}`)).toBeLessThan(order.indexOf(`hook ${uri}`));
    }
    expect(s.hub.resourceUpdated('note://bob/secret')).toStrictEqual({
      matched: 0,
      written: 0,
      queued: 0,
      coalesced: 0,
    });
    expect(s.hub.resourceUpdated('note://alice/a').written).toBe(1);
    await s.hub.close();
  });

  test('a refused URI looks exactly like one never asked for', async () => {
    const canRead = (uri: string) => uri !== 'note://bob/secret';
    const asked = setup({ capabilities: { toolsListChanged: true, resourceSubscriptions: true }, canRead });
    const notAsked = setup({ capabilities: { toolsListChanged: true, resourceSubscriptions: true }, canRead });
    const a = await asked.serve(
      listenBody('L', { toolsListChanged: true, resourceSubscriptions: ['note://alice/x', 'note://bob/secret'] }),
    );
    const b = await notAsked.serve(
      listenBody('L', { toolsListChanged: true, resourceSubscriptions: ['note://alice/x'] }),
    );
    expect(a.text).toBe(b.text);
    expect(a.headers).toStrictEqual(b.headers);
    await asked.hub.close();
    await notAsked.hub.close();
    expect(a.text).toBe(b.text);
  });

  test('when every URI is refused the field is omitted, and an otherwise empty filter is completed at once', async () => {
    const s = setup({ capabilities: { resourceSubscriptions: true, toolsListChanged: true }, canRead: () => false });
    const res = await s.serve(
      listenBody('e', { resourceSubscriptions: ['note://a', 'note://b'], toolsListChanged: false }),
    );
    expect(res.text).toBe(
      'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"e"},"notifications":{}}}\n\n' +
        'event: message\ndata: {"jsonrpc":"2.0","id":"e","result":{"resultType":"complete","_meta":{"io.modelcontextprotocol/subscriptionId":"e"}}}\n\n',
    );
    expect(res.writableEnded).toBe(true);
    expect(s.hub.stats().openStreams).toBe(0);
    expect(s.hub.stats().pendingStreams).toBe(0);
    await s.hub.close();
  });

  test('taskIds: kept only for tasks the caller may access; duplicates collapse; unknown and foreign look the same', async () => {
    const owned = new Map([
      ['t1', 'alice'],
      ['t2', 'bob'],
    ]);
    const s = setup({
      capabilities: { tasks: true },
      canAccessTask: (id, { principal }) => owned.get(id) === principal,
    });
    const res = await s.serve(listenBody(1, { taskIds: ['t2', 't1', 'missing', 't1'] }, taskMeta));
    expect(ackOf(res)).toStrictEqual({ taskIds: ['t1'] });
    await s.hub.close();
  });

  test('the checks get the principal and the framework request', async () => {
    const seen: CheckContext[] = [];
    const request = { marker: 'express req' };
    const s = setup({
      capabilities: { resourceSubscriptions: true, tasks: true },
      canRead: (_uri, context) => seen.push(context) > 0,
      canAccessTask: (_id, context) => seen.push(context) > 0,
    });
    await s.serve(listenBody(1, { resourceSubscriptions: ['note://a'], taskIds: ['t'] }, taskMeta), {
      principal: 'carol',
      request,
    });
    expect(seen.length).toBe(2);
    for (const context of seen) {
      expect(context.principal).toBe('carol');
      expect(context.request).toBe(request);
    }
    await s.hub.close();
  });
});

describe('per-URI checks', () => {
  test('sync and async checks mix; only exactly true admits', async () => {
    const verdicts: Record<string, unknown> = {
      'note://sync-true': true,
      'note://async-true': Promise.resolve(true),
      'note://thenable-true': { then: (resolve: (v: boolean) => void) => resolve(true) },
      'note://sync-yes': 'yes',
      'note://sync-one': 1,
      'note://async-string': Promise.resolve('true'),
      'note://async-false': Promise.resolve(false),
      'note://object': {},
      'note://undefined': undefined,
    };
    const s = setup({ capabilities: { resourceSubscriptions: true }, canRead: (uri) => verdicts[uri] as boolean });
    const res = await s.serve(listenBody(1, { resourceSubscriptions: Object.keys(verdicts) }));
    expect(ackOf(res)).toStrictEqual({
      resourceSubscriptions: ['note://sync-true', 'note://async-true', 'note://thenable-true'],
    });
    await s.hub.close();
  });

  test('a check that throws, rejects or times out drops its URI silently and is logged without the URI', async () => {
    fakeSetTimeoutOnly();
    const failures: unknown[] = [];
    const onCheckError = (message: unknown) => failures.push(message);
    diagnostics.subscribe(DiagnosticsChannel.CheckError, onCheckError);
    cleanups.push(() => diagnostics.unsubscribe(DiagnosticsChannel.CheckError, onCheckError));

    const listenLogger = recordingLogger();
    const s = setup({
      capabilities: { resourceSubscriptions: true },
      authorizeTimeoutMs: 1000,
      logger: listenLogger,
      canRead: (uri) => {
        // Host errors quote the URI, as real ones do: the log must not pass them on.
        if (uri === 'note://secret/throws') throw new Error(`database down reading ${uri}`);
        if (uri === 'note://secret/rejects') return Promise.reject(new Error(`database down reading ${uri}`));
        if (uri === 'note://secret/hangs') return new Promise<boolean>(() => {});
        if (uri === 'note://secret/async-read-then-hook-throws') return Promise.resolve(true);
        return true;
      },
      handleSubscribeResource: (uri) => {
        if (uri === 'note://secret/hook-throws' || uri === 'note://secret/async-read-then-hook-throws') {
          throw Object.assign(new Error(`watcher down for ${uri}`), { code: 'EWATCH' });
        }
        return true;
      },
    });
    const res = new FakeResponse();
    const uris = [
      'note://ok/1',
      'note://secret/throws',
      'note://secret/rejects',
      'note://secret/hangs',
      'note://secret/hook-throws',
      'note://secret/async-read-then-hook-throws',
      'note://ok/2',
    ];
    const handled = s.handler.handle(
      { body: listenBody(1, { resourceSubscriptions: uris }), headers: listenHeaders(), principal: 'a', request: {} },
      res,
    );
    await settleUntil(() => listenLogger.warns.length === 4, 'the four immediate failures to be logged');
    expect(res.headersSent).toBe(false);
    jest.advanceTimersByTime(1000);
    expect(await settledWithin(handled)).toBe(true); // the hanging check's timeout ended the wait

    expect(ackOf(res)).toStrictEqual({ resourceSubscriptions: ['note://ok/1', 'note://ok/2'] });
    expect(res.text.includes('secret')).toBe(false);
    expect(res.text.includes('down')).toBe(false);
    expect(listenLogger.warns.length).toBe(5);
    expect(s.logger.warns.length).toBe(0); // the listen logger replaces the hub logger
    // Errors serialized with their message and stack, as a logger prints them.
    const logged = JSON.stringify(listenLogger.warns, (_key, value: unknown) =>
      value instanceof Error ? `${value.name}: ${value.message}\n${value.stack ?? ''}` : value,
    );
    expect(logged).not.toContain('note://'); // a failure shows what was logged
    expect(logged).not.toContain('down');
    expect(logged).toMatch(/canRead/);
    expect(logged).toMatch(/handleSubscribeResource/);
    expect(logged).toContain('EWATCH');
    expect(logged).toContain('ERR_MCP_SUBSCRIPTIONS_CHECK_TIMEOUT');
    expect(failures.map((f) => (f as { stage: string }).stage).sort()).toStrictEqual([
      'canRead',
      'canRead',
      'canRead',
      'handleSubscribeResource',
      'handleSubscribeResource',
    ]);
    await s.hub.close();
  });

  test('authorizeTimeoutMs and authorizeDeadlineMs false let a slow check take its time', async () => {
    fakeSetTimeoutOnly();
    const gate = deferred<boolean>();
    const s = setup({
      capabilities: { resourceSubscriptions: true },
      authorizeTimeoutMs: false,
      authorizeDeadlineMs: false,
      canRead: () => gate.promise,
    });
    const res = new FakeResponse();
    const handled = s.handler.handle(
      {
        body: listenBody(1, { resourceSubscriptions: ['note://slow'] }),
        headers: listenHeaders(),
        principal: 'a',
        request: {},
      },
      res,
    );
    await settle();
    jest.advanceTimersByTime(24 * 3600 * 1000);
    await settle();
    expect(res.headersSent).toBe(false);
    gate.resolve(true);
    await handled;
    expect(ackOf(res)).toStrictEqual({ resourceSubscriptions: ['note://slow'] });
    expect(s.logger.warns.length).toBe(0);
    await s.hub.close();
  });

  test('at most authorizeConcurrency URIs are in flight, and the result keeps request order', async () => {
    const pending = new Map<string, ReturnType<typeof deferred<boolean>>>();
    let inFlight = 0;
    let maxInFlight = 0;
    const s = setup({
      capabilities: { resourceSubscriptions: true },
      authorizeConcurrency: 3,
      canRead: async (uri) => {
        inFlight++;
        maxInFlight = Math.max(maxInFlight, inFlight);
        const gate = deferred<boolean>();
        pending.set(uri, gate);
        try {
          return await gate.promise;
        } finally {
          inFlight--;
        }
      },
    });
    const uris = Array.from({ length: 10 }, (_, i) => `note://n/${i}`);
    const res = new FakeResponse();
    const handled = s.handler.handle(
      { body: listenBody(1, { resourceSubscriptions: uris }), headers: listenHeaders(), principal: 'a', request: {} },
      res,
    );
    // Release them newest first, so completion order differs from request order.
    let released = 0;
    while (released < uris.length) {
      await settleUntil(() => pending.size > 0, 'a check in flight');
      const newest = [...pending.keys()].at(-1)!;
      const gate = pending.get(newest)!;
      pending.delete(newest);
      gate.resolve(Number(newest.split('/').at(-1)) % 2 === 0);
      released++;
    }
    await handled;
    expect(maxInFlight).toBe(3);
    expect(ackOf(res)).toStrictEqual({
      resourceSubscriptions: ['note://n/0', 'note://n/2', 'note://n/4', 'note://n/6', 'note://n/8'],
    });
    await s.hub.close();
  });

  test('a client that leaves during authorization: no new checks start, its slot is released, nothing is written', async () => {
    const gates: ReturnType<typeof deferred<boolean>>[] = [];
    const s = setup(
      {
        capabilities: { resourceSubscriptions: true },
        authorizeConcurrency: 2,
        canRead: (uri) => {
          if (uri === 'note://x') return true;
          const gate = deferred<boolean>();
          gates.push(gate);
          return gate.promise;
        },
      },
      { maxSubscriptions: 1 },
    );
    const res = new FakeResponse();
    const uris = Array.from({ length: 10 }, (_, i) => `note://n/${i}`);
    const handled = s.handler.handle(
      { body: listenBody(1, { resourceSubscriptions: uris }), headers: listenHeaders(), principal: 'a', request: {} },
      res,
    );
    await settleUntil(() => gates.length === 2, 'two checks in flight');
    res.clientClose();
    for (const gate of gates) gate.resolve(true);
    await handled;
    expect(gates.length).toBe(2); // no check started after the client left
    expect(res.headersSent).toBe(false);
    expect(res.chunks).toStrictEqual([]);
    expect(s.hub.stats().pendingStreams).toBe(0);
    expect(s.hub.stats().openStreams).toBe(0);
    const next = await s.serve(listenBody(2, { resourceSubscriptions: ['note://x'] }));
    await settle();
    expect(next.statusCode).toBe(200);
    await s.hub.close();
  });
});

describe('failures while opening', () => {
  test('a response that cannot be opened gives its per-principal slot back', async () => {
    const s = setup({ capabilities: { toolsListChanged: true } }, { maxSubscriptionsPerPrincipal: 1 });
    // Some middleware of the host already sent headers: writeHead throws ERR_HTTP_HEADERS_SENT.
    const broken = new FakeResponse();
    broken.headersSent = true;
    await s.handler.handle(
      { body: listenBody(1, { toolsListChanged: true }), headers: listenHeaders(), principal: 'alice', request: {} },
      broken,
    );
    expect(s.logger.errors.length).toBe(1); // the failure is logged
    expect(broken.destroyed).toBe(true);
    expect(s.hub.stats().openStreams).toBe(0);
    const next = await s.serve(listenBody(2, { toolsListChanged: true }), { principal: 'alice' });
    await s.hub.close();
    expect(next.statusCode).toBe(200); // alice has no open stream, so she must not be refused
  });

  test('a listen still being authorized when the hub closes does not open a stream that nobody will end', async () => {
    const gate = deferred<boolean>();
    const s = setup({ capabilities: { resourceSubscriptions: true }, canRead: () => gate.promise });
    const res = new FakeResponse();
    const handled = s.handler.handle(
      {
        body: listenBody(1, { resourceSubscriptions: ['note://a'] }),
        headers: listenHeaders(),
        principal: 'a',
        request: {},
      },
      res,
    );
    await settleUntil(() => s.hub.stats().pendingStreams === 1, 'the reservation');
    await s.hub.close();
    gate.resolve(true);
    await handled;
    await settle();
    const leftOpen = !res.writableEnded && !res.destroyed;
    if (leftOpen) res.clientClose();
    expect(leftOpen).toBe(false); // the response must end (503, or ack then result)
    expect(s.hub.stats().openStreams).toBe(0);
  });
});

describe('the capability declaration', () => {
  test('toServerCapabilities() advertises exactly what is offered', () => {
    expect(toServerCapabilities({})).toStrictEqual({});
    expect(toServerCapabilities({ toolsListChanged: true, promptsListChanged: false })).toStrictEqual({
      tools: { listChanged: true },
    });
    expect(toServerCapabilities({ resourcesListChanged: true })).toStrictEqual({ resources: { listChanged: true } });
    expect(toServerCapabilities({ resourceSubscriptions: true })).toStrictEqual({ resources: { subscribe: true } });
    expect(toServerCapabilities(ALL)).toStrictEqual({
      tools: { listChanged: true },
      prompts: { listChanged: true },
      resources: { listChanged: true, subscribe: true },
      extensions: { [TASKS]: {} },
    });
  });

  test('defineCapabilities() freezes a complete declaration and rejects typos and non-booleans', () => {
    const caps = defineCapabilities({ toolsListChanged: true });
    expect(Object.isFrozen(caps)).toBe(true);
    expect(caps).toStrictEqual({
      toolsListChanged: true,
      promptsListChanged: false,
      resourcesListChanged: false,
      resourceSubscriptions: false,
      tasks: false,
    });
    expect(() => defineCapabilities({ toolListChanged: true } as never)).toThrow(/toolListChanged/);
    expect(() => defineCapabilities({ tasks: 'yes' } as never)).toThrow(/capabilities\.tasks/);
  });
});

describe('listen options', () => {
  const optionError = (options: unknown): Error => optionsErrorOf(() => createListenHandler(options as never));

  test('each mistake throws at construction, naming the field', async () => {
    const hub = new SubscriptionHub({ logger: recordingLogger() });
    const base = { hub, capabilities: { toolsListChanged: true } };
    expect(optionError(undefined).message).toMatch(/options/);
    expect(optionError({ capabilities: {} }).message).toMatch(/`hub`/);
    expect(optionError({ hub: {}, capabilities: {} }).message).toMatch(/`hub`/);
    expect(optionError({ hub }).message).toMatch(/`capabilities`/);
    expect(optionError({ ...base, capabilities: { toolListChanged: true } }).message).toMatch(/toolListChanged/);
    expect(optionError({ ...base, capabilities: { toolsListChanged: 'yes' } }).message).toMatch(
      /capabilities\.toolsListChanged/,
    );
    expect(optionError({ ...base, capabilities: { resourceSubscriptions: true } }).message).toMatch(/`canRead`/);
    expect(optionError({ ...base, capabilities: { tasks: true } }).message).toMatch(/`canAccessTask`/);
    expect(optionError({ ...base, canRead: 'yes' }).message).toMatch(/`canRead`/);
    expect(optionError({ ...base, handleSubscribeResource: true }).message).toMatch(/`handleSubscribeResource`/);
    expect(optionError({ ...base, canAccessTask: 1 }).message).toMatch(/`canAccessTask`/);
    expect(optionError({ ...base, keepAliveMs: -5 }).message).toBe(
      'mcp-subscriptions: Expected `keepAliveMs` to be a positive integer, or `false` to turn it off, got `-5` (number)',
    );
    for (const field of ['keepAliveMs', 'maxFilterEntries', 'authorizeConcurrency', 'authorizeTimeoutMs']) {
      for (const value of [0, -1, 2.5, '100', Number.NaN, true]) {
        // the message names the field, and quotes the value: a failure shows which field and value
        expect(optionError({ ...base, [field]: value }).message).toContain(`\`${field}\``);
      }
    }
    expect(optionError({ ...base, maxFilterEntries: false }).message).toMatch(/`maxFilterEntries`/);
    expect(optionError({ ...base, authorizeConcurrency: false }).message).toMatch(/`authorizeConcurrency`/);
    expect(optionError({ ...base, protocolVersions: [] }).message).toMatch(/`protocolVersions`/);
    expect(optionError({ ...base, protocolVersions: [2026] }).message).toMatch(/`protocolVersions`/);
    expect(optionError({ ...base, serverInfo: 'notes' }).message).toMatch(/`serverInfo`/);
    await hub.close();
  });

  test('durations beyond what Node timers hold (2^31 - 1 ms) are refused at construction, naming the field', async () => {
    const hub = new SubscriptionHub({ logger: recordingLogger() });
    const base = { hub, capabilities: { toolsListChanged: true } };
    const max = 2 ** 31 - 1;
    for (const field of ['keepAliveMs', 'authorizeTimeoutMs'] as const) {
      expect(optionError({ ...base, [field]: max + 1 }).message).toMatch(
        new RegExp(`\`${field}\` to be at most ${max}`),
      );
      expect(resolveListenOptions({ ...base, [field]: max })[field]).toBe(max);
    }
    // the duration check's own code, and a message naming the field
    expect(() => new SubscriptionHub({ completeTimeoutMs: max + 1 })).toThrow(
      expect.objectContaining({
        code: ErrorCode.DurationTooLong,
        message: expect.stringMatching(/`completeTimeoutMs`/),
      }),
    );
    const edge = new SubscriptionHub({ completeTimeoutMs: max, logger: recordingLogger() });
    expect(edge.options.completeTimeoutMs).toBe(max);
    await edge.close();
    await hub.close();
  });

  test('defaults are applied to a frozen result without touching the input', async () => {
    const hub = new SubscriptionHub({ logger: recordingLogger() });
    const input = { hub, capabilities: { toolsListChanged: true } };
    const resolved = resolveListenOptions(input);
    expect(Object.keys(input)).toStrictEqual(['hub', 'capabilities']);
    expect(Object.isFrozen(resolved)).toBe(true);
    expect(resolved.keepAliveMs).toBe(15_000);
    expect(resolved.maxFilterEntries).toBe(1000);
    expect(resolved.authorizeConcurrency).toBe(16);
    expect(resolved.authorizeTimeoutMs).toBe(5000);
    expect(resolved.protocolVersions).toStrictEqual(['2026-07-28']);
    expect(resolved.logger).toBe(hub.options.logger);
    expect(resolveListenOptions({ ...input, keepAliveMs: false, authorizeTimeoutMs: false }).keepAliveMs).toBe(false);
    await hub.close();
  });
});

describe('bounded authorization: a deadline per listen, a signal per check, a bound per engine', () => {
  function start(s: Setup, uris: string[], principal = 'alice') {
    const res = new FakeResponse();
    const handled = s.handler.handle(
      {
        body: listenBody(principal, { resourceSubscriptions: uris }),
        headers: listenHeaders(),
        principal,
        request: {},
      },
      res,
    );
    return { res, handled };
  }

  test('authorizeDeadlineMs: the listen opens with what passed; the checks in flight are told by their signal', async () => {
    fakeSetTimeoutOnly();
    const signals = new Map<string, AbortSignal>();
    const s = setup({
      capabilities: { resourceSubscriptions: true },
      authorizeTimeoutMs: false,
      authorizeDeadlineMs: 1000,
      authorizeConcurrency: 2,
      canRead: (uri, { signal }) => {
        signals.set(uri, signal);
        // The fast ones answer at once; the slow ones never do.
        return uri.startsWith('note://fast/') ? true : new Promise<boolean>(() => {});
      },
    });
    const uris = ['note://fast/1', 'note://slow/1', 'note://fast/2', 'note://slow/2', 'note://fast/3'];
    const { res, handled } = start(s, uris);
    await settle();
    expect(res.headersSent).toBe(false);
    // Both workers wait on a slow check: fast/3 has not started.
    expect([...signals.keys()]).toStrictEqual(uris.slice(0, 4));
    jest.advanceTimersByTime(999);
    await settle();
    expect(res.headersSent).toBe(false);
    jest.advanceTimersByTime(1);
    // The deadline, not a check, ends the wait: asserted within a bounded number of turns, so that a
    // deadline that never fires fails here rather than by jest's timeout.
    expect(await settledWithin(handled)).toBe(true);
    expect(res.statusCode).toBe(200);
    expect(ackOf(res)).toStrictEqual({ resourceSubscriptions: ['note://fast/1', 'note://fast/2'] });
    for (const uri of ['note://slow/1', 'note://slow/2']) {
      const signal = signals.get(uri)!;
      expect(signal.aborted).toBe(true);
      expect((signal.reason as { code?: unknown }).code).toBe(ErrorCode.AuthorizeDeadline);
    }
    expect(signals.has('note://fast/3')).toBe(false);
    expect(s.logger.warns.map(([message]) => message)).toStrictEqual([
      expect.stringMatching(/authorizeDeadlineMs \(1000 ms\)/),
    ]);
    expect(JSON.stringify(s.logger.warns)).not.toContain('note://');
    await s.hub.close();
  });

  test('a check that times out is aborted with a CheckTimeoutError; the other checks keep their signal', async () => {
    fakeSetTimeoutOnly();
    const signals = new Map<string, AbortSignal>();
    const slow = deferred<boolean>();
    const s = setup({
      capabilities: { resourceSubscriptions: true },
      authorizeTimeoutMs: 100,
      canRead: (uri, { signal }) => {
        signals.set(uri, signal);
        if (uri === 'note://hangs') return new Promise<boolean>(() => {});
        return slow.promise;
      },
    });
    const { res, handled } = start(s, ['note://hangs', 'note://slow']);
    await settle();
    const hangs = signals.get('note://hangs')!;
    const other = signals.get('note://slow')!;
    expect(hangs).not.toBe(other);
    expect(hangs.aborted).toBe(false);
    jest.advanceTimersByTime(50);
    slow.resolve(true);
    await settle();
    expect(res.headersSent).toBe(false); // still waiting on the check that hangs
    jest.advanceTimersByTime(50);
    expect(await settledWithin(handled)).toBe(true); // its timeout ended the wait
    expect(hangs.aborted).toBe(true);
    expect((hangs.reason as { code?: unknown }).code).toBe(ErrorCode.CheckTimeout);
    expect(other.aborted).toBe(false);
    expect(ackOf(res)).toStrictEqual({ resourceSubscriptions: ['note://slow'] });
    await s.hub.close();
  });

  test('sync checks share one context: no allocation per item', async () => {
    const contexts = new Set<CheckContext>();
    const s = setup({
      capabilities: { resourceSubscriptions: true },
      canRead: (_uri, context) => {
        contexts.add(context);
        return true;
      },
      handleSubscribeResource: (_uri, context) => {
        contexts.add(context);
        return true;
      },
    });
    const uris = Array.from({ length: 200 }, (_, i) => `note://sync/${i}`);
    const res = await s.serve(listenBody(1, { resourceSubscriptions: uris }));
    expect(ackOf(res).resourceSubscriptions).toHaveLength(200);
    expect(contexts.size).toBe(1);
    const [context] = [...contexts];
    expect(context!.signal).toBe(context!.signal);
    expect(context!.signal.aborted).toBe(false);
    expect(context!.principal).toBe('alice');
    await s.hub.close();
  });

  test('checks that all answer synchronously open the stream with no promise, timer or listener of their own', async () => {
    fakeSetTimeoutOnly();
    const s = setup({
      capabilities: { resourceSubscriptions: true, tasks: true },
      authorizeDeadlineMs: 1000,
      canRead: (uri) => !uri.endsWith('/no'),
      canAccessTask: () => true,
    });
    const res = new FakeResponse();
    const closeListeners: number[] = [];
    const on = res.on.bind(res);
    res.on = ((event: string, listener: () => void) => {
      if (event === 'close') closeListeners.push(res.listenerCount('close'));
      return on(event as 'close', listener);
    }) as typeof res.on;
    const handled = s.handler.handle(
      {
        body: listenBody(
          1,
          { resourceSubscriptions: ['note://a', 'note://b/no', 'note://c'], taskIds: ['t1'] },
          taskMeta,
        ),
        headers: listenHeaders(),
        principal: 'alice',
        request: {},
      },
      res,
    );
    // The ack is on the wire before handle() yields: no check went asynchronous.
    expect(ackOf(res)).toStrictEqual({ resourceSubscriptions: ['note://a', 'note://c'], taskIds: ['t1'] });
    expect(jest.getTimerCount()).toBe(0); // no deadline timer was ever set
    expect(closeListeners).toStrictEqual([0]); // only the stream's own 'close' listener
    await handled;
    await s.hub.close();
  });

  test('from the first check that answers with a promise on, the rest runs concurrently; request order is kept', async () => {
    const started: string[] = [];
    const later: (() => void)[] = [];
    const s = setup({
      capabilities: { resourceSubscriptions: true },
      authorizeConcurrency: 2,
      canRead: (uri) => {
        started.push(uri);
        if (!uri.includes('/slow/')) return !uri.endsWith('/no');
        return new Promise<boolean>((resolve) => later.push(() => resolve(!uri.endsWith('/no'))));
      },
    });
    const uris = [
      'note://1',
      'note://2/no',
      'note://slow/3',
      'note://4',
      'note://slow/5/no',
      'note://slow/6',
      'note://7',
    ];
    const res = new FakeResponse();
    const handled = s.handler.handle(
      {
        body: listenBody(1, { resourceSubscriptions: uris }),
        headers: listenHeaders(),
        principal: 'alice',
        request: {},
      },
      res,
    );
    await settle();
    // 1 and 2 synchronously; slow/3 waits; a second worker takes 4, then slow/5 and waits.
    expect(started).toStrictEqual(uris.slice(0, 5));
    expect(res.headersSent).toBe(false);
    while (later.length > 0) {
      later.shift()!();
      await settle();
    }
    await handled;
    expect(started).toStrictEqual(uris);
    expect(ackOf(res)).toStrictEqual({
      resourceSubscriptions: ['note://1', 'note://slow/3', 'note://4', 'note://slow/6', 'note://7'],
    });
    await s.hub.close();
  });

  test('maxChecksInFlight bounds the checks in flight over every listen of the engine', async () => {
    const pending: ReturnType<typeof deferred<boolean>>[] = [];
    let inFlight = 0;
    let maxInFlight = 0;
    const s = setup({
      capabilities: { resourceSubscriptions: true },
      authorizeConcurrency: 16,
      maxChecksInFlight: 3,
      canRead: () => {
        const gate = deferred<boolean>();
        pending.push(gate);
        inFlight++;
        maxInFlight = Math.max(maxInFlight, inFlight);
        return gate.promise.finally(() => inFlight--);
      },
    });
    const first = start(
      s,
      Array.from({ length: 5 }, (_, i) => `note://a/${i}`),
      'alice',
    );
    const second = start(
      s,
      Array.from({ length: 5 }, (_, i) => `note://b/${i}`),
      'bob',
    );
    await settle();
    expect(pending.length).toBe(3);
    // Answer every check as it comes: never more than 3 at once.
    for (let answered = 0; answered < 10; answered++) {
      await settleUntil(() => pending.length > answered, `check #${answered + 1} to start`);
      pending[answered]!.resolve(true);
      await settle();
    }
    await Promise.all([first.handled, second.handled]);
    expect(maxInFlight).toBe(3);
    expect(ackOf(first.res).resourceSubscriptions).toHaveLength(5);
    expect(ackOf(second.res).resourceSubscriptions).toHaveLength(5);
    await s.hub.close();
  });

  test('authorizeDeadlineMs and maxChecksInFlight are validated', () => {
    const hub = new SubscriptionHub({ logger: recordingLogger() });
    const base = { hub, capabilities: { toolsListChanged: true } };
    for (const [options, code] of [
      [{ ...base, authorizeDeadlineMs: 0 }, ErrorCode.NotPositiveInteger],
      [{ ...base, authorizeDeadlineMs: 2 ** 31 }, ErrorCode.DurationTooLong],
      [{ ...base, authorizeDeadlineMs: '10s' }, ErrorCode.NotPositiveInteger],
      [{ ...base, maxChecksInFlight: 0 }, ErrorCode.NotPositiveInteger],
      [{ ...base, maxChecksInFlight: false }, ErrorCode.NotPositiveInteger],
    ] as const) {
      let caught: unknown;
      try {
        createListenHandler(options as unknown as ListenHandlerOptions);
      } catch (error) {
        caught = error;
      }
      expectOptionsError(caught);
      expect((caught as { code: string }).code).toBe(code);
    }
    const defaults = resolveListenOptions({ ...base });
    expect(defaults.authorizeDeadlineMs).toBe(10_000);
    expect(defaults.maxChecksInFlight).toBe(256);
    expect(resolveListenOptions({ ...base, authorizeDeadlineMs: false }).authorizeDeadlineMs).toBe(false);
  });
});

describe('a bus that routes by interest: follow before the ack, unfollow when the stream goes', () => {
  test('the acknowledgement waits for the bus; the bus is told exactly what was acknowledged', async () => {
    const { bus, calls, open } = followingBus();
    const s = setup({ canRead: (uri) => uri !== 'note://secret' }, { bus });
    const res = new FakeResponse();
    const handled = s.handler.handle(
      {
        body: listenBody(
          7,
          { toolsListChanged: true, resourceSubscriptions: ['note://a', 'note://secret'], taskIds: ['t-1'] },
          taskMeta,
        ),
        headers: listenHeaders(),
        principal: 'alice',
        request: {},
      },
      res,
    );
    expect(await settledWithin(handled, 20)).toBe(false);
    expect(res.messages()).toStrictEqual([]);
    expect(calls).toStrictEqual([
      {
        what: 'follow',
        interest: { principal: 'alice', lists: ['tools_list_changed'], uris: ['note://a'], taskIds: ['t-1'] },
      },
    ]);
    open();
    await handled;
    expect(ackOf(res)).toStrictEqual({ toolsListChanged: true, resourceSubscriptions: ['note://a'], taskIds: ['t-1'] });
    // The stream goes: the bus hears the same interest back, once.
    res.destroy();
    await settleUntil(() => s.hub.stats().openStreams === 0, 'the stream closed');
    expect(calls.map((call) => call.what)).toStrictEqual(['follow', 'unfollow']);
    expect(calls[1]!.interest).toStrictEqual(calls[0]!.interest);
  });

  test('a client that leaves while the bus subscribes gets nothing, and the slot and the interest are given back', async () => {
    const { bus, calls, cancelFollows, open } = followingBus();
    const s = setup({}, { bus });
    const res = new FakeResponse();
    const handled = s.handler.handle(
      {
        body: listenBody(1, { resourceSubscriptions: ['note://a'] }),
        headers: listenHeaders(),
        principal: 'alice',
        request: {},
      },
      res,
    );
    await settleUntil(() => calls.length === 1, 'the follow');
    res.destroy();
    open();
    await handled;
    expect(res.messages()).toStrictEqual([]);
    expect(calls.map((call) => call.what)).toStrictEqual(['follow', 'unfollow']);
    // While it waited, the listen followed its principal's cancellations (sent to any node), and let go once.
    expect(cancelFollows).toStrictEqual([
      { what: 'follow', interest: { principal: 'alice', lists: [], uris: [], taskIds: [] } },
      { what: 'unfollow', interest: { principal: 'alice', lists: [], uris: [], taskIds: [] } },
    ]);
    expect(s.hub.stats()).toMatchObject({ openStreams: 0, pendingStreams: 0 });
  });

  test('an anonymous caller follows no cancellations; an empty filter follows nothing', async () => {
    const { bus, calls, open } = followingBus();
    open();
    const s = setup({}, { bus });
    await s.serve(listenBody(1, { toolsListChanged: true }), { principal: anonymousPrincipal() });
    await s.serve(listenBody(2, {}), { principal: 'alice' });
    expect(calls).toStrictEqual([
      { what: 'follow', interest: { principal: undefined, lists: ['tools_list_changed'], uris: [], taskIds: [] } },
    ]);
  });
});

describe('notifications/cancelled before the stream opens', () => {
  /** `opened` is every stream open now plus every one closed, by whatever reason. */
  function expectCountsAddUp(hub: SubscriptionHub): void {
    const { opened, openStreams, closed } = hub.stats();
    const sum = Object.values(closed).reduce((a, b) => a + b, 0);
    expect({ opened, accountedFor: openStreams + sum }).toStrictEqual({ opened, accountedFor: opened });
  }

  /** A read check that waits for the test, one gate per call, and keeps the signal each call was given. */
  function gatedChecks() {
    const gates: { uri: string; gate: ReturnType<typeof deferred<boolean>>; signal: AbortSignal }[] = [];
    const canRead = (uri: string, context: CheckContext): Promise<boolean> => {
      const gate = deferred<boolean>();
      gates.push({ uri, gate, signal: context.signal });
      return gate.promise;
    };
    return { gates, canRead, passAll: () => gates.forEach(({ gate }) => gate.resolve(true)) };
  }

  function startListen(s: Setup, res: FakeResponse, id: string | number, principal = 'alice'): Promise<void> {
    return s.handler.handle(
      {
        body: listenBody(id, { resourceSubscriptions: ['note://a', 'note://b'] }),
        headers: listenHeaders(),
        principal,
        request: {},
      },
      res,
    );
  }

  const cancelOf = (id: string | number) => ({
    jsonrpc: '2.0',
    method: 'notifications/cancelled',
    params: { requestId: id, reason: 'done' },
  });

  test('a cancel while the checks run ends the listen: its checks are aborted, its slot is free at once, nothing is written', async () => {
    const checks = gatedChecks();
    const s = setup(
      { capabilities: { resourceSubscriptions: true }, canRead: checks.canRead, authorizeConcurrency: 1 },
      { maxSubscriptionsPerPrincipal: 1 },
    );
    const res = new FakeResponse();
    const handled = startListen(s, res, 'L');
    await settleUntil(() => checks.gates.length === 1, 'the first check');
    // Another principal's cancel, or one naming another id, matches nothing.
    expect(s.handler.cancel('bob', cancelOf('L'))).toBe(false);
    expect(s.handler.cancel('alice', cancelOf('other'))).toBe(false);
    expect(s.hub.stats().pendingStreams).toBe(1);

    expect(s.handler.cancel('alice', cancelOf('L'))).toBe(true);
    expect(checks.gates[0]!.signal.aborted).toBe(true);
    expect(res.destroyed).toBe(true);
    expect(res.headersSent).toBe(false);
    expect(s.hub.stats()).toMatchObject({ pendingStreams: 0, openStreams: 0, opened: 1, closed: { cancelled: 1 } });
    expectCountsAddUp(s.hub);
    // Alice's one slot is hers again before the abandoned check even settles (a listen of nothing
    // offered, acknowledged and completed at once, rather than refused with 503).
    const next = await s.serve(listenBody('M', { toolsListChanged: true }));
    expect(next.statusCode).toBe(200);

    checks.passAll();
    await handled;
    expect(checks.gates.length).toBe(1); // no check started after the cancel
    expect(res.chunks).toStrictEqual([]);
    expect(res.violations).toStrictEqual([]);
    expect(s.logger.errors).toStrictEqual([]);
    expect(s.hub.stats()).toMatchObject({ pendingStreams: 0, opened: 2, closed: { cancelled: 1, empty: 1 } });
    // A second cancel of the same id finds nothing.
    expect(s.handler.cancel('alice', cancelOf('L'))).toBe(false);
    expectCountsAddUp(s.hub);
    await s.hub.close();
  });

  test('a cancel while the bus subscribes ends the listen: its interest is given back once, and it never opens', async () => {
    const following = followingBus();
    const s = setup({ capabilities: { resourceSubscriptions: true } }, { bus: following.bus });
    const res = new FakeResponse();
    const handled = startListen(s, res, 7);
    await settleUntil(() => following.calls.length === 1, 'the follow');
    expect(s.handler.cancel('alice', cancelOf(7))).toBe(true);
    expect(following.calls.map((call) => call.what)).toStrictEqual(['follow', 'unfollow']);
    expect(following.calls[1]!.interest).toStrictEqual(following.calls[0]!.interest);
    expect(following.cancels).toStrictEqual([]); // matched here: not handed to the other nodes
    expect(s.hub.stats()).toMatchObject({ pendingStreams: 0, opened: 1, closed: { cancelled: 1 } });
    following.open();
    await handled;
    expect(res.chunks).toStrictEqual([]);
    expect(res.destroyed).toBe(true);
    expect(following.calls.length).toBe(2);
    expect(s.hub.stats()).toMatchObject({ pendingStreams: 0, openStreams: 0 });
    expectCountsAddUp(s.hub);
  });

  test('a cancel received by another node ends a listen still authorizing here', async () => {
    const checks = gatedChecks();
    const bus = new MemoryBus();
    const s = setup({ capabilities: { resourceSubscriptions: true }, canRead: checks.canRead }, { bus });
    const other = new SubscriptionHub({ bus, logger: recordingLogger() });
    const res = new FakeResponse();
    const handled = startListen(s, res, 'L');
    await settleUntil(() => checks.gates.length === 2, 'the checks');
    // The other node holds nothing of alice's: the cancel goes over the bus, and ends the listen here.
    expect(hubEngine(other).cancel('alice', 'L')).toBe(0);
    expect(checks.gates.every(({ signal }) => signal.aborted)).toBe(true);
    expect(s.hub.stats()).toMatchObject({ pendingStreams: 0, opened: 1, closed: { cancelled: 1 } });
    checks.passAll();
    await handled;
    expect(res.chunks).toStrictEqual([]);
    expect(res.destroyed).toBe(true);
    await Promise.all([s.hub.close(), other.close()]);
  });

  test('an anonymous caller cannot cancel a listen still authorizing, even by its own identity', async () => {
    const checks = gatedChecks();
    const s = setup({ capabilities: { resourceSubscriptions: true }, canRead: checks.canRead });
    const res = new FakeResponse();
    const principal = anonymousPrincipal();
    const handled = startListen(s, res, 'L', principal);
    await settleUntil(() => checks.gates.length === 2, 'the checks');
    expect(s.handler.cancel(principal, cancelOf('L'))).toBe(false);
    expect(hubEngine(s.hub).cancel(principal, 'L')).toBe(0);
    checks.passAll();
    await handled;
    expect(ackOf(res)).toStrictEqual({ resourceSubscriptions: ['note://a', 'note://b'] });
    expect(s.hub.stats()).toMatchObject({ openStreams: 1, closed: { cancelled: 0 } });
    await s.hub.close();
  });
});
