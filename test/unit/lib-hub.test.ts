/**
 * SubscriptionHub: fan-out through its indexes, publish validation and reports, per-stream bounded
 * queues with one coalescing entry per key, the bus, listeners, limits and shutdown.
 * Streams are opened on fake responses whose write() result and 'drain' the tests control.
 */
import { describe, expect, test } from '@jest/globals';
import { fc, test as propTest } from '@fast-check/jest';
import { createMcpHandler, McpServer, type ServerEventBus } from '@modelcontextprotocol/server';
import {
  ErrorCode,
  MemoryBus,
  SubscriptionHub,
  type BusListener,
  type NotificationFilter,
  type SubscriptionBus,
  type SubscriptionEvent,
  type TaskState,
} from 'mcp-subscriptions';
import {
  createListenHandler,
  hubEngine,
  refusalHeaders,
  refusalStatus,
  type ListenStream,
  type ProtocolError,
  type Reservation,
} from '../../lib/internal.ts';
import { anonymousPrincipal } from '../../lib/principal.ts';
import { StreamQueue } from '../../lib/stream-queue.ts';
import {
  ACK_MARKER,
  FakeResponse,
  openFollowing,
  openStream,
  recordingLogger,
  report,
  RESULT_MARKER,
  settle,
  subscriptionIdOf,
  ThrowingResponse,
} from '../helpers/fake-response.ts';
import { followingBus } from '../helpers/following-bus.ts';
import { thrown } from '../helpers/assert.ts';
import { expectOptionsError, optionsErrorOf } from '../helpers/options.ts';
import { listenBody, listenHeaders } from '../helpers/sse.ts';

function newHub(options: ConstructorParameters<typeof SubscriptionHub>[0] = {}) {
  const logger = recordingLogger();
  return { hub: new SubscriptionHub({ logger, ...options }), logger };
}

function task(taskId: string, status: TaskState['status'], extra: Record<string, unknown> = {}): TaskState {
  return {
    taskId,
    status,
    createdAt: '2026-07-28T10:00:00Z',
    lastUpdatedAt: '2026-07-28T10:05:00Z',
    ttlMs: 60_000,
    ...extra,
  };
}

/** Methods (and URIs, task ids) of the notifications a fake received, ignoring markers. */
function delivered(res: FakeResponse): string[] {
  return res.messages().map((m) => {
    if (m.params?.uri !== undefined) return `${m.method} ${m.params.uri}`;
    if (m.params?.taskId !== undefined) return `${m.method} ${m.params.taskId} ${m.params.status}`;
    return m.method;
  });
}

describe('fan-out', () => {
  test('each list change reaches exactly the streams that asked for it, tagged with their own id', async () => {
    const { hub } = newHub();
    const tools = new FakeResponse();
    const prompts = new FakeResponse();
    const both = new FakeResponse();
    openStream(hub, tools, { id: 'a', filter: { toolsListChanged: true } });
    openStream(hub, prompts, { id: 7, filter: { promptsListChanged: true } });
    openStream(hub, both, {
      id: '',
      filter: { toolsListChanged: true, promptsListChanged: true, resourcesListChanged: true },
    });

    expect(hub.toolsListChanged()).toStrictEqual(report({ matched: 2, written: 2 }));
    expect(hub.promptsListChanged()).toStrictEqual(report({ matched: 2, written: 2 }));
    expect(hub.resourcesListChanged()).toStrictEqual(report({ matched: 1, written: 1 }));
    await settle(); // a tick's events reach a stream as one write, at the end of the tick

    expect(delivered(tools)).toStrictEqual(['notifications/tools/list_changed']);
    expect(delivered(prompts)).toStrictEqual(['notifications/prompts/list_changed']);
    expect(delivered(both)).toStrictEqual([
      'notifications/tools/list_changed',
      'notifications/prompts/list_changed',
      'notifications/resources/list_changed',
    ]);
    expect(tools.messages().map(subscriptionIdOf)).toStrictEqual(['a']);
    expect(prompts.messages().map(subscriptionIdOf)).toStrictEqual([7]);
    expect(both.messages().map(subscriptionIdOf)).toStrictEqual(['', '', '']);
    await hub.close();
  });

  test('a resource update reaches only the streams subscribed to that URI', async () => {
    const { hub } = newHub();
    const a = new FakeResponse();
    const b = new FakeResponse();
    openStream(hub, a, { id: 'a', filter: { resourceSubscriptions: ['note://x', 'note://shared'] } });
    openStream(hub, b, { id: 'b', filter: { resourceSubscriptions: ['note://y', 'note://shared'] } });
    expect(hub.stats().listening.resourceUris).toBe(3);

    expect(hub.resourceUpdated('note://x')).toStrictEqual(report({ matched: 1, written: 1 }));
    expect(hub.resourceUpdated('note://shared')).toStrictEqual(report({ matched: 2, written: 2 }));
    expect(hub.resourceUpdated('note://nobody')).toStrictEqual(report({}));
    // A list change is not a resource update.
    expect(hub.toolsListChanged()).toStrictEqual(report({}));
    await settle(); // a tick's events reach a stream as one write, at the end of the tick

    expect(delivered(a)).toStrictEqual([
      'notifications/resources/updated note://x',
      'notifications/resources/updated note://shared',
    ]);
    expect(delivered(b)).toStrictEqual(['notifications/resources/updated note://shared']);
    await hub.close();
  });

  test('the URI index forgets a URI when its last stream closes', async () => {
    const { hub } = newHub();
    const a = new FakeResponse();
    const b = new FakeResponse();
    openStream(hub, a, { id: 'a', filter: { resourceSubscriptions: ['note://x', 'note://shared'] } });
    openStream(hub, b, { id: 'b', filter: { resourceSubscriptions: ['note://shared'] } });
    a.clientClose();
    expect(hub.stats().listening.resourceUris).toBe(1);
    expect(hub.resourceUpdated('note://x')).toStrictEqual(report({}));
    expect(hub.resourceUpdated('note://shared')).toStrictEqual(report({ matched: 1, written: 1 }));
    b.clientClose();
    expect(hub.stats().listening).toStrictEqual({
      toolsListChanged: 0,
      promptsListChanged: 0,
      resourcesListChanged: 0,
      resourceUris: 0,
      taskIds: 0,
    });
    await hub.close();
  });

  test('a URI held by one stream, then three, then one again: each event reaches exactly its holders', async () => {
    const { hub } = newHub();
    const [a, b, c] = [new FakeResponse(), new FakeResponse(), new FakeResponse()];
    const uri = 'note://x';
    openStream(hub, a, { id: 'a', filter: { resourceSubscriptions: [uri] } });
    expect(hub.resourceUpdated(uri)).toStrictEqual(report({ matched: 1, written: 1 }));
    await settle();
    openStream(hub, b, { id: 'b', filter: { resourceSubscriptions: [uri] } });
    openStream(hub, c, { id: 'c', filter: { resourceSubscriptions: [uri] } });
    expect(hub.resourceUpdated(uri)).toStrictEqual(report({ matched: 3, written: 3 }));
    await settle();
    b.clientClose();
    expect(hub.resourceUpdated(uri)).toStrictEqual(report({ matched: 2, written: 2 }));
    await settle();
    a.clientClose();
    expect(hub.resourceUpdated(uri)).toStrictEqual(report({ matched: 1, written: 1 }));
    await settle();
    // The one left holds it again by itself; a new holder joins it.
    const d = new FakeResponse();
    openStream(hub, d, { id: 'd', filter: { resourceSubscriptions: [uri] } });
    expect(hub.resourceUpdated(uri)).toStrictEqual(report({ matched: 2, written: 2 }));
    await settle();
    expect([a, b, c, d].map((res) => delivered(res).length)).toStrictEqual([3, 1, 4, 1]);
    expect(hub.stats().listening.resourceUris).toBe(1);
    await hub.close();
    expect(hub.stats().listening.resourceUris).toBe(0);
  });

  test('a task status reaches only streams listening for that id whose principal owns the task', async () => {
    const { hub } = newHub();
    const alice = new FakeResponse();
    const bob = new FakeResponse();
    const aliceOther = new FakeResponse();
    openStream(hub, alice, { principal: 'alice', id: 1, filter: { taskIds: ['t1'] } });
    openStream(hub, bob, { principal: 'bob', id: 1, filter: { taskIds: ['t1'] } });
    openStream(hub, aliceOther, { principal: 'alice', id: 2, filter: { taskIds: ['t2'] } });

    const state = task('t1', 'completed', { statusMessage: 'done', result: { content: [] } });
    expect(hub.taskStatus(state, 'alice')).toStrictEqual(report({ matched: 1, written: 1 }));
    await settle(); // a tick's events reach a stream as one write, at the end of the tick
    expect(bob.messages().length).toBe(0);
    expect(aliceOther.messages().length).toBe(0);
    const [message] = alice.messages();
    expect(message.method).toBe('notifications/tasks');
    expect(message.params).toStrictEqual({ ...state, _meta: { 'io.modelcontextprotocol/subscriptionId': 1 } });
    await hub.close();
  });

  test('the official SDK event shapes are accepted; fields beyond the event are not sent', async () => {
    const { hub } = newHub();
    const res = new FakeResponse();
    openStream(hub, res, {
      filter: {
        toolsListChanged: true,
        promptsListChanged: true,
        resourcesListChanged: true,
        resourceSubscriptions: ['note://a'],
      },
    });
    const sdkEvents = [
      { kind: 'tools_list_changed' },
      { kind: 'prompts_list_changed' },
      { kind: 'resources_list_changed' },
      { kind: 'resource_updated', uri: 'note://a', secret: 'not for the wire' },
    ] as SubscriptionEvent[];
    for (const event of sdkEvents) expect(hub.publish(event).written).toBe(1);
    await settle(); // a tick's events reach a stream as one write, at the end of the tick
    expect(delivered(res)).toStrictEqual([
      'notifications/tools/list_changed',
      'notifications/prompts/list_changed',
      'notifications/resources/list_changed',
      'notifications/resources/updated note://a',
    ]);
    expect(res.text.includes('secret')).toBe(false);
    expect(res.messages()[3].params).toStrictEqual({
      uri: 'note://a',
      _meta: { 'io.modelcontextprotocol/subscriptionId': 'sub-1' },
    });
    await hub.close();
  });
});

describe('publish validation', () => {
  test('invalid events throw an EventError naming the field, and reach no stream', async () => {
    const { hub } = newHub();
    const res = new FakeResponse();
    openStream(hub, res, { filter: { toolsListChanged: true, resourceSubscriptions: ['note://a'] } });
    const cases: [unknown, RegExp][] = [
      [{ kind: 'resource_updated', uri: 'a/relative/path' }, /uri/],
      [{ kind: 'resource_updated' }, /uri/],
      [{ kind: 'resource_updated', uri: 'note://a b' }, /uri/],
      [{ kind: 'tools_list_changed', uri: 'note://a' }, /uri/],
      [{ kind: 'resources_list_changed', uri: 'note://a' }, /uri/],
      [{ kind: 'something_else' }, /kind/],
      [null, /kind/],
      ['tools_list_changed', /kind/],
      [{ kind: 'task_status', task: { status: 'working' }, owner: 'alice' }, /taskId/],
      [{ kind: 'task_status', task: { taskId: 't', status: 'working' } }, /owner/],
      [{ kind: 'task_status', task: { taskId: 't' }, owner: 'alice' }, /status/],
    ];
    for (const [event, field] of cases) {
      const error = thrown(() => hub.publish(event as SubscriptionEvent));
      // hasErrorCode(error, code), with the event and the error shown on failure.
      expect({ event, error }).toMatchObject({ event, error: { code: ErrorCode.InvalidEvent } });
      expect((error as Error).message).toMatch(field);
    }
    expect(() => hub.resourceUpdated('relative')).toThrow(expect.objectContaining({ code: ErrorCode.InvalidEvent }));
    expect(res.messages()).toStrictEqual([]);
    expect(hub.stats().published).toBe(0);
    await hub.close();
  });

  test('a publish nobody listens for reports zeros', async () => {
    const { hub } = newHub();
    expect(hub.toolsListChanged()).toStrictEqual(report({}));
    expect(hub.resourceUpdated('note://a')).toStrictEqual(report({}));
    expect(hub.taskStatus(task('t', 'working'), 'alice')).toStrictEqual(report({}));
    await hub.close();
  });
});

describe('bounded queues and coalescing', () => {
  test('while the socket pushes back, events queue and go out in order on drain', async () => {
    const { hub } = newHub();
    const res = new FakeResponse();
    res.accept = false; // the ack itself fills the socket
    openStream(hub, res, { filter: { toolsListChanged: true, resourceSubscriptions: ['note://a', 'note://b'] } });
    expect(hub.resourceUpdated('note://a')).toStrictEqual(report({ matched: 1, queued: 1 }));
    expect(hub.toolsListChanged()).toStrictEqual(report({ matched: 1, queued: 1 }));
    expect(hub.resourceUpdated('note://b')).toStrictEqual(report({ matched: 1, queued: 1 }));
    expect(hub.stats().queued).toBe(3);
    expect(res.messages()).toStrictEqual([]);
    res.drain();
    expect(delivered(res)).toStrictEqual([
      'notifications/resources/updated note://a',
      'notifications/tools/list_changed',
      'notifications/resources/updated note://b',
    ]);
    expect(hub.stats().queued).toBe(0);
    expect(hub.toolsListChanged()).toStrictEqual(report({ matched: 1, written: 1 }));
    await hub.close();
  });

  test('a second identical event merges into the queued one; different URIs do not', async () => {
    const { hub } = newHub();
    const res = new FakeResponse();
    res.accept = false;
    openStream(hub, res, {
      filter: { toolsListChanged: true, promptsListChanged: true, resourceSubscriptions: ['note://a', 'note://b'] },
    });
    expect(hub.toolsListChanged()).toStrictEqual(report({ matched: 1, queued: 1 }));
    expect(hub.resourceUpdated('note://a')).toStrictEqual(report({ matched: 1, queued: 1 }));
    expect(hub.toolsListChanged()).toStrictEqual(report({ matched: 1, coalesced: 1 }));
    expect(hub.resourceUpdated('note://a')).toStrictEqual(report({ matched: 1, coalesced: 1 }));
    expect(hub.resourceUpdated('note://b')).toStrictEqual(report({ matched: 1, queued: 1 }));
    expect(hub.promptsListChanged()).toStrictEqual(report({ matched: 1, queued: 1 }));
    expect(hub.stats().queued).toBe(4);
    expect(hub.stats().coalesced).toBe(2);
    res.drain();
    expect(delivered(res)).toStrictEqual([
      'notifications/tools/list_changed',
      'notifications/resources/updated note://a',
      'notifications/resources/updated note://b',
      'notifications/prompts/list_changed',
    ]);
    await hub.close();
  });

  test('a queued task status is replaced, in place, by the newest state of that task', async () => {
    const { hub } = newHub();
    const res = new FakeResponse();
    res.accept = false;
    openStream(hub, res, { filter: { taskIds: ['t1', 't2'], toolsListChanged: true } });
    hub.taskStatus(task('t1', 'working', { statusMessage: 'step 1' }), 'alice');
    hub.toolsListChanged();
    hub.taskStatus(task('t2', 'working'), 'alice');
    expect(hub.taskStatus(task('t1', 'input_required'), 'alice')).toStrictEqual(report({ matched: 1, coalesced: 1 }));
    const final = task('t1', 'completed', { result: { content: [{ type: 'text', text: 'ok' }] } });
    expect(hub.taskStatus(final, 'alice')).toStrictEqual(report({ matched: 1, coalesced: 1 }));
    res.drain();
    expect(delivered(res)).toStrictEqual([
      'notifications/tasks t1 completed',
      'notifications/tools/list_changed',
      'notifications/tasks t2 working',
    ]);
    const first = res.messages()[0];
    expect(first.params).toStrictEqual({ ...final, _meta: { 'io.modelcontextprotocol/subscriptionId': 'sub-1' } });
    expect('statusMessage' in first.params).toBe(false);
    await hub.close();
  });

  test('a filter with many keys loses nothing: one entry per key, and after drain the latest update of every URI arrives', async () => {
    const { hub } = newHub();
    const res = new FakeResponse();
    res.accept = false;
    const uris = Array.from({ length: 2000 }, (_, i) => `note://n/${i}`);
    openStream(hub, res, { filter: { resourceSubscriptions: uris } });
    for (const uri of uris) expect(hub.resourceUpdated(uri)).toStrictEqual(report({ matched: 1, queued: 1 }));
    // A second round merges into the first, in place: still one entry per URI.
    for (const uri of uris) expect(hub.resourceUpdated(uri)).toStrictEqual(report({ matched: 1, coalesced: 1 }));
    expect(hub.stats()).toMatchObject({ queued: 2000, dropped: 0, openStreams: 1 });
    res.drain();
    expect(delivered(res)).toStrictEqual(uris.map((uri) => `notifications/resources/updated ${uri}`));
    expect(hub.stats()).toMatchObject({ queued: 0, dropped: 0, openStreams: 1 });
    await hub.close();
  });

  test("a list change or a task's final state queued first survives a flood of other keys", async () => {
    const { hub } = newHub();
    const res = new FakeResponse();
    res.accept = false;
    const uris = Array.from({ length: 50 }, (_, i) => `note://n/${i}`);
    openStream(hub, res, {
      filter: { toolsListChanged: true, resourcesListChanged: true, resourceSubscriptions: uris, taskIds: ['t1'] },
    });
    hub.toolsListChanged();
    hub.taskStatus(task('t1', 'completed', { result: { ok: true } }), 'alice');
    for (let round = 0; round < 3; round++) for (const uri of uris) hub.resourceUpdated(uri);
    hub.resourcesListChanged();
    expect(hub.stats().dropped).toBe(0);
    res.drain();
    expect(delivered(res)).toStrictEqual([
      'notifications/tools/list_changed',
      'notifications/tasks t1 completed',
      ...uris.map((uri) => `notifications/resources/updated ${uri}`),
      'notifications/resources/list_changed',
    ]);
    await hub.close();
  });

  test('a stream queues at most one event per key it follows, however many are published', async () => {
    const { hub } = newHub();
    const res = new FakeResponse();
    res.accept = false;
    openStream(hub, res, { filter: { toolsListChanged: true, resourceSubscriptions: ['note://a'] } });
    for (let i = 0; i < 500; i++) {
      hub.toolsListChanged();
      hub.resourceUpdated('note://a');
    }
    expect(hub.stats()).toMatchObject({ queued: 2, coalesced: 998, dropped: 0 });
    res.drain();
    expect(delivered(res)).toStrictEqual([
      'notifications/tools/list_changed',
      'notifications/resources/updated note://a',
    ]);
    await hub.close();
  });
});

describe('StreamQueue', () => {
  const frame = (name: string) => ({ head: `${name}:`, tail: ';' });

  test('one entry per key: a newer frame of a queued key replaces it in place', () => {
    const queue = new StreamQueue();
    expect(['a', 'b', 'c', 'b'].map((key) => queue.push(key, frame(`${key}${queue.size}`)))).toStrictEqual([
      'queued',
      'queued',
      'queued',
      'coalesced',
    ]);
    expect(queue.size).toBe(3);
    expect(queue.take(64, '1', Infinity)).toStrictEqual({ text: 'a0:1;b3:1;c2:1;', count: 3 });
  });

  test('take() stops at its frame limit, or once the text reaches its size, with one frame at least', () => {
    const queue = new StreamQueue();
    for (const key of ['a', 'b', 'c', 'd']) queue.push(key, frame(key));
    expect(queue.take(64, '1', 1)).toStrictEqual({ text: 'a:1;', count: 1 });
    expect(queue.take(64, '1', 5)).toStrictEqual({ text: 'b:1;c:1;', count: 2 });
    expect(queue.take(1, '1', Infinity)).toStrictEqual({ text: 'd:1;', count: 1 });
    expect(queue.size).toBe(0);
  });

  test('clear() forgets every entry and says how many there were', () => {
    const queue = new StreamQueue();
    for (const key of ['a', 'b', 'a']) queue.push(key, frame(key));
    expect(queue.clear()).toBe(2);
    expect(queue.size).toBe(0);
  });
});

describe('listeners and the bus', () => {
  test('subscribeAll() sees every event; unsubscribe is idempotent; a throwing listener is logged, not thrown', async () => {
    const { hub, logger } = newHub();
    const seen: SubscriptionEvent[] = [];
    const unsubscribe = hub.subscribeAll((event) => seen.push(event));
    const unsubscribeBad = hub.subscribeAll(() => {
      throw new Error('listener bug');
    });
    const res = new FakeResponse();
    openStream(hub, res, { filter: { toolsListChanged: true } });
    expect(hub.toolsListChanged()).toStrictEqual(report({ matched: 1, written: 1 }));
    hub.resourceUpdated('note://nobody');
    expect(seen).toStrictEqual([{ kind: 'tools_list_changed' }, { kind: 'resource_updated', uri: 'note://nobody' }]);
    expect(logger.errors.length).toBe(2);
    unsubscribe();
    unsubscribe();
    unsubscribeBad();
    hub.toolsListChanged();
    expect(seen.length).toBe(2);
    expect(logger.errors.length).toBe(2);
    await hub.close();
  });

  test("the hub is the SDK's ServerEventBus: handler.notify.* reaches our streams; the SDK's own listen is refused", async () => {
    const { hub, logger } = newHub();
    const bus: ServerEventBus = hub;
    const handler = createMcpHandler(() => new McpServer({ name: 'sdk', version: '1.0.0' }), { bus: hub });
    const res = new FakeResponse();
    openStream(hub, res, { filter: { toolsListChanged: true, resourceSubscriptions: ['note://a'] } });
    handler.notify.toolsChanged();
    handler.notify.resourceUpdated('note://a');
    await settle(); // a tick's events reach a stream as one write, at the end of the tick
    expect(delivered(res)).toStrictEqual([
      'notifications/tools/list_changed',
      'notifications/resources/updated note://a',
    ]);

    // The SDK subscribes only to serve a listen itself, past the middleware: refused every time, with
    // a code; logged once per hub, counted each time.
    const sdkSeen: unknown[] = [];
    for (let i = 0; i < 3; i++) {
      expect(thrown(() => bus.subscribe((event) => sdkSeen.push(event)))).toMatchObject({
        code: ErrorCode.UncheckedListen,
        message: expect.stringMatching(/^mcp-subscriptions: .*mount mcpSubscriptions\(\) in front of the SDK handler/i),
      });
    }
    expect(logger.errors.map(([message]) => message)).toStrictEqual([
      expect.stringMatching(/MCP SDK's own handler.*never checked.*stats\(\)\.uncheckedListens/),
    ]);
    expect(hub.stats().uncheckedListens).toBe(3);
    const allSeen: SubscriptionEvent[] = [];
    const stopAll = hub.subscribeAll((event) => allSeen.push(event));
    const task = { taskId: 't1', status: 'working' as const, createdAt: 'x', lastUpdatedAt: 'x', ttlMs: null };
    hub.taskStatus(task, 'alice');
    hub.promptsListChanged();
    expect(sdkSeen).toStrictEqual([]);
    expect(allSeen.map((event) => event.kind)).toStrictEqual(['task_status', 'prompts_list_changed']);
    stopAll();
    await handler.close();
    await hub.close();
  });

  test('an event published on one hub reaches the streams of the others on the bus, never echoed back', async () => {
    const bus = new MemoryBus();
    const { hub: a } = newHub({ bus });
    const { hub: b } = newHub({ bus });
    expect(bus.size).toBe(2);
    const onA = new FakeResponse();
    const onB = new FakeResponse();
    openStream(a, onA, { id: 'a', filter: { resourceSubscriptions: ['note://x'] } });
    openStream(b, onB, { id: 'b', filter: { resourceSubscriptions: ['note://x'] } });
    const seenByA: SubscriptionEvent[] = [];
    a.subscribeAll((event) => seenByA.push(event));

    expect(a.resourceUpdated('note://x')).toStrictEqual(report({ matched: 1, written: 1 }));
    await settle(); // a tick's events reach a stream as one write, at the end of the tick
    expect(delivered(onA)).toStrictEqual(['notifications/resources/updated note://x']);
    expect(delivered(onB)).toStrictEqual(['notifications/resources/updated note://x']);
    expect(seenByA.length).toBe(1);
    expect(b.stats().published).toBe(1);
    // A listener on the receiving hub sees events that arrived over the bus.
    const seenByB: SubscriptionEvent[] = [];
    const stop = b.subscribeAll((event) => seenByB.push(event));
    a.toolsListChanged();
    stop();
    expect(seenByB).toStrictEqual([{ kind: 'tools_list_changed' }]);

    await a.close();
    expect(bus.size).toBe(1);
    b.resourceUpdated('note://x');
    // a hub that left the bus hears nothing more
    expect(seenByA.length).toBe(2);
    await b.close();
    expect(bus.size).toBe(0);
  });
});

describe('limits and reservations', () => {
  function capacityError(fn: () => unknown): ProtocolError {
    const error = thrown(fn);
    expect(error).toMatchObject({ code: ErrorCode.Protocol }); // hasErrorCode(error, code), showing the error on failure
    return error as ProtocolError;
  }

  test('maxSubscriptions refuses with -32603 "Subscription limit reached", 503 and Retry-After; a freed slot is reusable at once', async () => {
    const { hub } = newHub({ maxSubscriptions: 2, retryAfterSeconds: 7 });
    const a = new FakeResponse();
    openStream(hub, a, { principal: 'p1', id: 'a' });
    openStream(hub, new FakeResponse(), { principal: 'p2', id: 'b' });
    const error = capacityError(() => hubEngine(hub).reserve('p3', 'c'));
    expect(error.rpcCode).toBe(-32603);
    expect(error.message).toBe('Subscription limit reached');
    expect(refusalStatus(error)).toBe(503);
    expect(refusalHeaders(error)).toStrictEqual({ 'Retry-After': '7' });
    expect(error.id).toBe('c');
    expect(hub.stats().refused).toBe(1);
    a.clientClose();
    openStream(hub, new FakeResponse(), { principal: 'p3', id: 'c' });
    expect(hub.stats().openStreams).toBe(2);
    await hub.close();
  });

  test('maxSubscriptionsPerPrincipal bounds one principal only', async () => {
    const { hub } = newHub({ maxSubscriptionsPerPrincipal: 1 });
    openStream(hub, new FakeResponse(), { principal: 'alice', id: 1 });
    const error = capacityError(() => hubEngine(hub).reserve('alice', 2));
    expect(error.rpcCode).toBe(-32603);
    expect(refusalStatus(error)).toBe(503);
    expect(refusalHeaders(error)['Retry-After']).toBe('1');
    openStream(hub, new FakeResponse(), { principal: 'bob', id: 1 });
    expect(hub.openByPrincipal()).toStrictEqual({ alice: 1, bob: 1 });
    // hub.cancel frees alice's slot synchronously.
    expect(hubEngine(hub).cancel('alice', 1)).toBe(1);
    openStream(hub, new FakeResponse(), { principal: 'alice', id: 2 });
    await hub.close();
  });

  test('by default one principal holds at most 32 streams; the 33rd is refused while others still open theirs', async () => {
    const { hub } = newHub();
    expect(hub.options.maxSubscriptionsPerPrincipal).toBe(32);
    for (let id = 1; id <= 32; id++) openStream(hub, new FakeResponse(), { principal: 'alice', id });
    const error = capacityError(() => hubEngine(hub).reserve('alice', 33));
    expect(error.message).toBe('Subscription limit reached');
    expect(refusalStatus(error)).toBe(503);
    expect(refusalHeaders(error)['Retry-After']).toBe('1');
    openStream(hub, new FakeResponse(), { principal: 'bob', id: 1 });
    expect(hub.stats().openStreams).toBe(33);
    await hub.close();
  });

  test('maxSubscriptionsPerPrincipal: false lets one principal take every slot of maxSubscriptions', async () => {
    const { hub } = newHub({ maxSubscriptionsPerPrincipal: false, maxSubscriptions: 40 });
    for (let id = 1; id <= 40; id++) openStream(hub, new FakeResponse(), { principal: 'alice', id });
    expect(capacityError(() => hubEngine(hub).reserve('bob', 1)).message).toBe('Subscription limit reached');
    expect(hub.stats().openStreams).toBe(40);
    await hub.close();
  });

  test('a reservation holds a slot until it opens or is released; release is idempotent', async () => {
    const { hub } = newHub({ maxSubscriptions: 1, maxSubscriptionsPerPrincipal: 1 });
    const reservation = hubEngine(hub).reserve('alice', 1);
    expect(hub.stats().pendingStreams).toBe(1);
    expect(capacityError(() => hubEngine(hub).reserve('bob', 2)).rpcCode).toBe(-32603);
    reservation.release();
    reservation.release();
    expect(hub.stats().pendingStreams).toBe(0);
    const again = hubEngine(hub).reserve('alice', 3);
    const stream = again.open(new FakeResponse(), {
      id: 3,
      filter: { toolsListChanged: true },
      keepAliveMs: false,
      ackFrame: ': a\n\n',
      resultFrame: () => ': r\n\n',
    });
    expect(stream.isOpen).toBe(true);
    expect(hub.stats().pendingStreams).toBe(0);
    expect(() =>
      again.open(new FakeResponse(), { id: 3, filter: {}, keepAliveMs: false, ackFrame: '', resultFrame: () => '' }),
    ).toThrow();
    // Releasing after opening must not give back the open stream's slot.
    again.release();
    expect(capacityError(() => hubEngine(hub).reserve('carol', 4)).rpcCode).toBe(-32603);
    await hub.close();
  });

  test('a stream with an empty filter is acknowledged, completed at once, and holds no slot', async () => {
    const { hub } = newHub({ maxSubscriptions: 1, maxSubscriptionsPerPrincipal: 1 });
    const res = new FakeResponse();
    const stream = openStream(hub, res, { filter: {} });
    expect(stream.isOpen).toBe(false);
    expect(res.writableEnded).toBe(true);
    expect(res.text).toBe(`: test-ack\n\n${RESULT_MARKER}`);
    const stats = hub.stats();
    expect(stats.openStreams).toBe(0);
    expect(stats.pendingStreams).toBe(0);
    expect(stats.closed.empty).toBe(1);
    openStream(hub, new FakeResponse(), { id: 'next' });
    await hub.close();
  });

  test('cancel() closes only the named stream of that principal, writing nothing more', async () => {
    const { hub } = newHub();
    const mine = new FakeResponse();
    const sameIdOtherPrincipal = new FakeResponse();
    const numericId = new FakeResponse();
    openStream(hub, mine, { principal: 'alice', id: '1' });
    openStream(hub, sameIdOtherPrincipal, { principal: 'bob', id: '1' });
    openStream(hub, numericId, { principal: 'alice', id: 1 });
    expect(hubEngine(hub).cancel('alice', 'nope')).toBe(0);
    expect(hubEngine(hub).cancel('carol', '1')).toBe(0);
    const before = mine.text;
    expect(hubEngine(hub).cancel('alice', '1')).toBe(1);
    expect(mine.destroyed).toBe(true);
    expect(mine.text).toBe(before);
    expect(sameIdOtherPrincipal.destroyed).toBe(false);
    // the string id "1" must not match the number 1
    expect(numericId.destroyed).toBe(false);
    expect(hubEngine(hub).cancel('alice', '1')).toBe(0);
    // Two streams of one principal under one id: a cancel closes both.
    const twin = [new FakeResponse(), new FakeResponse()];
    for (const res of twin) openStream(hub, res, { principal: 'carol', id: 'twin' });
    expect(hubEngine(hub).cancel('carol', 'twin')).toBe(2);
    expect(twin.map((res) => res.destroyed)).toStrictEqual([true, true]);
    const stats = hub.stats();
    expect(stats.openStreams).toBe(2);
    expect(stats.closed.cancelled).toBe(3);
    await settle();
    expect(mine.violations).toStrictEqual([]);
    await hub.close();
  });
});

describe('complete and close', () => {
  test('complete() ends every stream with its result; new streams may open afterwards', async () => {
    const { hub } = newHub();
    const a = new FakeResponse();
    const b = new FakeResponse();
    openStream(hub, a, { id: 'a' });
    openStream(hub, b, { id: 'b' });
    await hub.complete();
    for (const res of [a, b]) {
      expect(res.text.endsWith(RESULT_MARKER)).toBeTruthy();
      expect(res.writableEnded).toBe(true);
      expect(res.violations).toStrictEqual([]);
    }
    expect(hub.stats().closed.complete).toBe(2);
    const c = new FakeResponse();
    openStream(hub, c, { id: 'c' });
    expect(hub.toolsListChanged().written).toBe(1);
    await hub.close();
    expect(c.text.endsWith(RESULT_MARKER)).toBeTruthy();
  });

  test('complete() writes what is queued before the result', async () => {
    const { hub } = newHub();
    const res = new FakeResponse();
    res.accept = false;
    openStream(hub, res, { filter: { toolsListChanged: true, resourceSubscriptions: ['note://a'] } });
    hub.toolsListChanged();
    hub.resourceUpdated('note://a');
    const done = hub.complete();
    expect(res.writableEnded).toBe(false);
    res.drain();
    await done;
    expect(delivered(res)).toStrictEqual([
      'notifications/tools/list_changed',
      'notifications/resources/updated note://a',
    ]);
    expect(res.text.endsWith(RESULT_MARKER)).toBeTruthy();
    await hub.close();
  });

  test('close() ignores later events, refuses new streams with 503, is idempotent, and leaves the bus', async () => {
    const bus = new MemoryBus();
    const { hub } = newHub({ bus, retryAfterSeconds: 4 });
    const res = new FakeResponse();
    openStream(hub, res);
    await Promise.all([hub.close(), hub.close()]);
    await hub.close();
    expect(res.text.endsWith(RESULT_MARKER)).toBeTruthy();
    expect(bus.size).toBe(0);
    // Host code may still publish during shutdown: nothing is delivered and nothing throws.
    const seen: SubscriptionEvent[] = [];
    hub.subscribeAll((event) => seen.push(event));
    expect(hub.toolsListChanged()).toStrictEqual(report({}));
    expect(hub.resourceUpdated('note://a')).toStrictEqual(report({}));
    expect(seen).toStrictEqual([]);
    // An invalid event is still a programmer's mistake.
    expect(() => hub.resourceUpdated('relative')).toThrow(expect.objectContaining({ code: ErrorCode.InvalidEvent }));
    const error = thrown(() => hubEngine(hub).reserve('alice', 9)) as ProtocolError;
    expect(error.code).toBe(ErrorCode.Protocol);
    expect(error.rpcCode).toBe(-32603);
    expect(refusalStatus(error)).toBe(503);
    expect(refusalHeaders(error)['Retry-After']).toBe('4');
  });

  test('stats() is a snapshot of state and counters', async () => {
    const { hub } = newHub({ maxSubscriptions: 10 });
    openStream(hub, new FakeResponse(), {
      principal: 'alice',
      id: 1,
      filter: { toolsListChanged: true, taskIds: ['t'] },
    });
    openStream(hub, new FakeResponse(), { principal: 'alice', id: 2, filter: { promptsListChanged: true } });
    hub.toolsListChanged();
    const stats = hub.stats();
    expect(stats.openStreams).toBe(2);
    expect(stats.opened).toBe(2);
    expect(stats.principals).toBe(1);
    expect(stats.maxOpenPerPrincipal).toBe(2);
    expect(hub.openByPrincipal()).toStrictEqual({ alice: 2 });
    expect(stats.listening).toStrictEqual({
      toolsListChanged: 1,
      promptsListChanged: 1,
      resourcesListChanged: 0,
      resourceUris: 0,
      taskIds: 1,
    });
    expect(stats.published).toBe(1);
    expect(stats.written).toBe(1);
    expect(stats.maxSubscriptions).toBe(10);
    stats.listening.taskIds = 99;
    expect(hub.stats().listening.taskIds).toBe(1);
    // Stats are meant to be exposed: counts only, no principal's name.
    expect(JSON.stringify(hub.stats())).not.toContain('alice');
    await hub.close();
  });
});

describe('hub options', () => {
  const optionError = (options: unknown): Error => optionsErrorOf(() => new SubscriptionHub(options as never));

  test('a bad bound throws at construction in the p-queue manner, naming the field', () => {
    expect(optionError({ maxSubscriptions: -5 }).message).toBe(
      'mcp-subscriptions: Expected `maxSubscriptions` to be a positive integer, got `-5` (number)',
    );
    for (const field of [
      'maxSubscriptions',
      'completeTimeoutMs',
      'retryAfterSeconds',
      'maxSubscriptionsPerPrincipal',
      'stallTimeoutMs',
    ]) {
      for (const value of [0, -1, 1.5, '10', Number.NaN, Infinity, true]) {
        const message = optionError({ [field]: value }).message;
        expect(message).toContain(`\`${field}\``);
      }
    }
    expect(optionError({ maxSubscriptions: '10' }).message).toMatch(/got `10` \(string\)/);
    const tooLong = optionError({ stallTimeoutMs: 2 ** 31 });
    expect(tooLong).toMatchObject({ code: ErrorCode.DurationTooLong });
    expect(tooLong.message).toContain('`stallTimeoutMs`');
    // An option that `false` turns off says so: the fix a user may not know of.
    expect(optionError({ stallTimeoutMs: -1 })).toMatchObject({
      code: ErrorCode.NotPositiveInteger,
      message:
        'mcp-subscriptions: Expected `stallTimeoutMs` to be a positive integer, or `false` to turn it off, got `-1` (number)',
    });
    expect(tooLong.message).toContain('or `false` to turn it off');
    expect(optionError({ maxSubscriptionsPerPrincipal: 0 }).message).toContain('or `false` to turn it off');
    expect(optionError({ maxSubscriptions: 0 }).message).not.toContain('`false`');
  });

  test('the removed maxBuffer and overflow are refused, whatever their value, saying what replaced them', () => {
    for (const options of [{ maxBuffer: 100 }, { maxBuffer: -5 }, { overflow: 'drop-oldest' }, { overflow: 'x' }]) {
      const error = thrown(() => new SubscriptionHub(options as never));
      expectOptionsError(error);
      expect(error).toMatchObject({ code: ErrorCode.RemovedOption });
      expect((error as Error).message).toMatch(
        /^mcp-subscriptions: Option `(maxBuffer|overflow)` of new SubscriptionHub\(\) was removed: a stream's queue holds one entry per key its filter follows.*`stallTimeoutMs`.*; remove it$/,
      );
    }
  });

  test('bus and logger are checked too', () => {
    expect(optionError({ bus: {} }).message).toMatch(/`bus`/);
    expect(optionError({ logger: { warn() {} } }).message).toMatch(/`logger`/);
    expect(optionError('fast').message).toMatch(/options/);
  });

  test('defaults are applied to a frozen copy; the input is not touched', async () => {
    const input = { maxSubscriptions: 5, logger: recordingLogger() };
    const snapshot = { ...input };
    const hub = new SubscriptionHub(input);
    expect(input).toStrictEqual(snapshot);
    expect(Object.isFrozen(hub.options)).toBe(true);
    expect(hub.options.maxSubscriptions).toBe(5);
    expect(new SubscriptionHub({ logger: recordingLogger() }).options.maxSubscriptions).toBe(1024);
    expect(hub.options.maxSubscriptionsPerPrincipal).toBe(32);
    expect(hub.options.retryAfterSeconds).toBe(1);
    expect(hub.options.completeTimeoutMs).toBe(3000);
    expect(hub.options.stallTimeoutMs).toBe(60_000);
    expect(new SubscriptionHub({ stallTimeoutMs: false, logger: recordingLogger() }).options.stallTimeoutMs).toBe(
      false,
    );
    await hub.close();
  });
});

/**
 * Second, independent checks of guarantees each held up by one assertion before. Streams are opened
 * through the engine's handler, as an adapter opens them.
 */
describe('through the engine: the task index and coalescing, checked by what is delivered', () => {
  const TASKS_META = {
    'io.modelcontextprotocol/clientCapabilities': { extensions: { 'io.modelcontextprotocol/tasks': {} } },
  };

  /** Opens a listen of `principal` with id `id` on `res`; resolves once it is acknowledged. */
  async function listen(
    hub: SubscriptionHub,
    res: FakeResponse,
    id: string,
    notifications: Record<string, unknown>,
    principal = 'alice',
  ): Promise<void> {
    const handler = createListenHandler({
      hub,
      capabilities: { toolsListChanged: true, resourceSubscriptions: true, tasks: true },
      canRead: () => true,
      canAccessTask: () => true,
      keepAliveMs: false,
    });
    await handler.handle(
      { body: listenBody(id, notifications, TASKS_META), headers: listenHeaders(), principal, request: {} },
      res,
    );
  }

  const endings: Record<string, (hub: SubscriptionHub, res: FakeResponse) => Promise<void>> = {
    'hangs up': async (_hub, res) => {
      res.clientClose();
      await settle();
    },
    'is cancelled': async (hub) => {
      expect(hubEngine(hub).cancel('alice', 'first')).toBe(1);
      await settle();
    },
    'is completed': (hub) => hub.complete(),
  };

  for (const [ending, end] of Object.entries(endings)) {
    test(`a stream that ${ending} is no longer reached through the task index; a new holder is reached alone`, async () => {
      const { hub } = newHub();
      const first = new FakeResponse();
      await listen(hub, first, 'first', { taskIds: ['t1', 't2'] });
      expect(hub.taskStatus(task('t1', 'working'), 'alice')).toStrictEqual(report({ matched: 1, written: 1 }));
      await settle();
      await end(hub, first);
      const seenByFirst = first.text;
      // The index would still hand the event to the closed stream (counted as matched) if it kept it.
      expect(hub.taskStatus(task('t1', 'working'), 'alice')).toStrictEqual(report({}));
      expect(hub.taskStatus(task('t2', 'working'), 'alice')).toStrictEqual(report({}));
      const second = new FakeResponse();
      await listen(hub, second, 'second', { taskIds: ['t1'] });
      expect(hub.taskStatus(task('t1', 'completed'), 'alice')).toStrictEqual(report({ matched: 1, written: 1 }));
      await settle();
      expect(delivered(second).slice(1)).toStrictEqual(['notifications/tasks t1 completed']); // after the ack
      expect(first.text).toBe(seenByFirst);
      await hub.close();
    });
  }

  /** The task frames of a response, by task id: their position among all frames and their state. */
  function taskFrames(res: FakeResponse): { at: number; taskId: string; status: string; step?: unknown }[] {
    return res
      .messages()
      .slice(1) // the acknowledgement
      .flatMap((message, at) =>
        message.method === 'notifications/tasks'
          ? [{ at, taskId: message.params.taskId, status: message.params.status, step: message.params.step }]
          : [],
      );
  }

  test('a queue holding every key the stream follows (full) keeps the newest state of a task, in place', async () => {
    const { hub } = newHub();
    const res = new FakeResponse();
    res.accept = false; // the ack fills the socket: everything after it queues
    // More keys than any default bound, so that the queue is full once each key has one entry.
    const uris = Array.from({ length: 120 }, (_, i) => `note://n/${i}`);
    await listen(hub, res, 'full', { toolsListChanged: true, resourceSubscriptions: uris, taskIds: ['t1', 't2'] });
    hub.taskStatus(task('t1', 'working', { step: 1 }), 'alice');
    hub.toolsListChanged();
    for (const uri of uris) hub.resourceUpdated(uri);
    hub.taskStatus(task('t2', 'working', { step: 1 }), 'alice');
    expect(hub.stats().queued).toBe(uris.length + 3); // one entry per key followed: full
    // Newer states of both tasks arrive while the queue is full.
    expect(hub.taskStatus(task('t1', 'input_required', { step: 2 }), 'alice')).toStrictEqual(
      report({ matched: 1, coalesced: 1 }),
    );
    expect(hub.taskStatus(task('t1', 'completed', { step: 3 }), 'alice')).toStrictEqual(
      report({ matched: 1, coalesced: 1 }),
    );
    expect(hub.taskStatus(task('t2', 'failed', { step: 2 }), 'alice')).toStrictEqual(
      report({ matched: 1, coalesced: 1 }),
    );
    expect(hub.stats()).toMatchObject({ queued: uris.length + 3, dropped: 0 });
    res.drain();
    expect(taskFrames(res)).toStrictEqual([
      { at: 0, taskId: 't1', status: 'completed', step: 3 },
      { at: uris.length + 2, taskId: 't2', status: 'failed', step: 2 },
    ]);
    expect(res.messages()).toHaveLength(1 + uris.length + 3);
    await hub.close();
  });

  test('a queue with room left keeps the newest state of a task in place too, whatever else queued between', async () => {
    const { hub } = newHub();
    const res = new FakeResponse();
    res.accept = false;
    await listen(hub, res, 'room', { toolsListChanged: true, resourceSubscriptions: ['note://a'], taskIds: ['t1'] });
    hub.resourceUpdated('note://a');
    hub.taskStatus(task('t1', 'working', { step: 1 }), 'alice');
    hub.toolsListChanged();
    for (let step = 2; step <= 5; step++) hub.taskStatus(task('t1', 'working', { step }), 'alice');
    expect(hub.stats()).toMatchObject({ queued: 3, coalesced: 4, dropped: 0 });
    res.drain();
    expect(taskFrames(res)).toStrictEqual([{ at: 1, taskId: 't1', status: 'working', step: 5 }]);
    expect(delivered(res).slice(1)).toStrictEqual([
      'notifications/resources/updated note://a',
      'notifications/tasks t1 working',
      'notifications/tools/list_changed',
    ]);
    await hub.close();
  });
});

describe('lifecycle: each listen counted, freed and closed once', () => {
  const WRITE_THREW = /^writing to a listen stream threw/;

  /** `opened` is every stream open now plus every one closed, by whatever reason. */
  function expectCountsAddUp(hub: SubscriptionHub): void {
    const { opened, openStreams, closed } = hub.stats();
    const sum = Object.values(closed).reduce((a, b) => a + b, 0);
    expect({ opened, accountedFor: openStreams + sum }).toStrictEqual({ opened, accountedFor: opened });
  }

  test('an acknowledgement whose write throws leaves nothing registered: counted as failed, logged, its slot and bus interest given back once', async () => {
    const following = followingBus();
    following.open();
    const { hub, logger } = newHub({ bus: following.bus, maxSubscriptionsPerPrincipal: 1 });
    const filter: NotificationFilter = { toolsListChanged: true, resourceSubscriptions: ['note://a'] };
    const broken = new ThrowingResponse(true);
    const stream = await openFollowing(hub, broken, { principal: 'alice', id: 'L', filter });
    expect(stream.isOpen).toBe(false);
    expect(broken.destroyed).toBe(true);
    expect(broken.chunks).toStrictEqual([]);
    expect(hub.stats()).toMatchObject({
      openStreams: 0,
      pendingStreams: 0,
      opened: 1,
      closed: { failed: 1 },
      listening: { toolsListChanged: 0, resourceUris: 0 },
    });
    expectCountsAddUp(hub);
    expect(logger.errors.map(([message]) => message)).toStrictEqual([expect.stringMatching(WRITE_THREW)]);
    // The interest the bus was told of is given back, exactly once.
    expect(following.calls.map((call) => call.what)).toStrictEqual(['follow', 'unfollow']);
    expect(following.calls[1]!.interest).toStrictEqual(following.calls[0]!.interest);
    // Nothing of it is left to deliver to or to cancel; alice's one slot is hers again.
    expect(hub.toolsListChanged()).toStrictEqual(report({}));
    expect(hubEngine(hub).cancel('alice', 'L')).toBe(0);
    const next = new FakeResponse();
    openStream(hub, next, { principal: 'alice', id: 'M', filter });
    expect(hub.openByPrincipal()).toStrictEqual({ alice: 1 });
    // A second such failure is counted, not logged again.
    next.clientClose();
    await openFollowing(hub, new ThrowingResponse(true), { principal: 'alice', id: 'N', filter });
    expect(hub.stats().closed.failed).toBe(2);
    expect(logger.errors.length).toBe(1);
    expectCountsAddUp(hub);
    await hub.close();
  });

  test('32 listens whose acknowledgement threw do not lock their principal out', async () => {
    const { hub } = newHub();
    for (let id = 1; id <= 32; id++) openStream(hub, new ThrowingResponse(true), { principal: 'alice', id });
    for (let id = 33; id <= 64; id++) openStream(hub, new FakeResponse(), { principal: 'alice', id });
    expect(thrown(() => hubEngine(hub).reserve('alice', 65))).toMatchObject({ code: ErrorCode.Protocol });
    expect(hub.stats()).toMatchObject({ openStreams: 32, opened: 64, closed: { failed: 32 } });
    expectCountsAddUp(hub);
    await hub.close();
  });

  test('an empty filter whose acknowledgement throws is counted as failed, not as empty', async () => {
    const { hub, logger } = newHub({ maxSubscriptionsPerPrincipal: 1 });
    const stream = openStream(hub, new ThrowingResponse(true), { filter: {} });
    await settle();
    expect(stream.isOpen).toBe(false);
    expect(hub.stats()).toMatchObject({ opened: 1, closed: { failed: 1, empty: 0 }, pendingStreams: 0 });
    expect(logger.errors.length).toBe(1);
    expectCountsAddUp(hub);
    // An empty filter that acks is counted as empty, once.
    const res = new FakeResponse();
    openStream(hub, res, { filter: {} });
    await settle();
    expect(res.text).toBe(ACK_MARKER + RESULT_MARKER);
    expect(hub.stats()).toMatchObject({ opened: 2, closed: { failed: 1, empty: 1 } });
    expectCountsAddUp(hub);
    await hub.close();
  });

  test('a response whose headers cannot be written opens nothing: not counted as opened, and the reservation gives its slot back', async () => {
    const following = followingBus();
    following.open();
    const { hub } = newHub({ bus: following.bus, maxSubscriptionsPerPrincipal: 1 });
    const sent = new FakeResponse();
    sent.headersSent = true; // host middleware answered already: writeHead throws ERR_HTTP_HEADERS_SENT
    const reservation = hubEngine(hub).reserve('alice', 'L');
    await reservation.follow({ toolsListChanged: true });
    const error = thrown(() =>
      reservation.open(sent, {
        id: 'L',
        filter: { toolsListChanged: true },
        keepAliveMs: false,
        ackFrame: ACK_MARKER,
        resultFrame: () => RESULT_MARKER,
      }),
    );
    expect(error.code).toBe('ERR_HTTP_HEADERS_SENT');
    expect(hub.stats()).toMatchObject({ opened: 0, openStreams: 0, pendingStreams: 1 });
    reservation.release();
    reservation.release();
    expect(hub.stats().pendingStreams).toBe(0);
    expect(following.calls.map((call) => call.what)).toStrictEqual(['follow', 'unfollow']);
    openStream(hub, new FakeResponse(), { principal: 'alice', id: 'M' });
    expectCountsAddUp(hub);
    await hub.close();
  });
});

describe('lifecycle, as a property: random opens, failed acks, cancels before open and closes', () => {
  const MAX = 8;
  const PER_PRINCIPAL = 3;
  /** One anonymous identity for the run: the hub lists no waiting listen of it, so no cancel finds one. */
  const ANONYMOUS = anonymousPrincipal();
  const principalArb = fc.constantFrom('alice', 'bob', ANONYMOUS);
  const idArb = fc.integer({ min: 0, max: 2 });
  /** How an open goes: acknowledged, its ack's write throws, an empty filter (either way), headers already sent. */
  const kindArb = fc.constantFrom('ok', 'ackThrows', 'empty', 'emptyAckThrows', 'headersSent');
  type Kind = 'ok' | 'ackThrows' | 'empty' | 'emptyAckThrows' | 'headersSent';
  const opArb = fc.oneof(
    fc.record({ op: fc.constant('open' as const), principal: principalArb, id: idArb, kind: kindArb }),
    fc.record({ op: fc.constant('wait' as const), principal: principalArb, id: idArb }),
    fc.record({ op: fc.constant('openWaiting' as const), at: fc.nat(), kind: kindArb }),
    fc.record({ op: fc.constant('releaseWaiting' as const), at: fc.nat() }),
    fc.record({ op: fc.constant('cancel' as const), principal: principalArb, id: idArb, viaBus: fc.boolean() }),
    fc.record({ op: fc.constant('hangUp' as const), at: fc.nat() }),
    fc.record({ op: fc.constant('writeThrows' as const), at: fc.nat() }),
    fc.record({ op: fc.constant('complete' as const) }),
  );

  interface Listen {
    readonly principal: string;
    readonly id: number;
    readonly res: ThrowingResponse;
    reservation: Reservation | undefined;
    stream: ListenStream | undefined;
    /** Times the hub called the listen's onCancelled. */
    cancelled: number;
    released: boolean;
  }

  /** Held and waiting: reserved, not opened, released nor cancelled. */
  const isWaiting = (l: Listen): boolean =>
    l.reservation !== undefined && l.stream === undefined && !l.released && l.cancelled === 0;
  const isOpen = (l: Listen): boolean => l.stream?.isOpen === true;
  const quota = (principal: string): string => (principal === ANONYMOUS ? 'anonymous' : principal);

  function filterOf(kind: Kind, principal: string, id: number): NotificationFilter {
    return kind === 'empty' || kind === 'emptyAckThrows'
      ? {}
      : { toolsListChanged: true, resourceSubscriptions: [`note://${quota(principal)}/${id}`] };
  }

  propTest.prop([fc.array(opArb, { maxLength: 40 })], { numRuns: 150 })(
    'opened = openStreams + sum(closed) at every step; slots, per-principal counts and bus interest all come back',
    async (ops) => {
      const following = followingBus();
      following.open();
      const { hub } = newHub({
        bus: following.bus,
        maxSubscriptions: MAX,
        maxSubscriptionsPerPrincipal: PER_PRINCIPAL,
      });
      const engine = hubEngine(hub);
      const listens: Listen[] = [];
      const holding = (principal?: string): number =>
        listens.filter(
          (l) => (principal === undefined || quota(l.principal) === quota(principal)) && (isOpen(l) || isWaiting(l)),
        ).length;

      /** Reserves as the model expects: refused exactly when the hub or the principal is full. */
      const reserve = (principal: string, id: number): Listen | undefined => {
        const full = holding() >= MAX || holding(principal) >= PER_PRINCIPAL;
        let reservation: Reservation;
        try {
          reservation = engine.reserve(principal, id);
        } catch (error) {
          expect({ refused: (error as { code?: string }).code, full }).toStrictEqual({
            refused: ErrorCode.Protocol,
            full: true,
          });
          return undefined;
        }
        expect(full).toBe(false);
        const listen: Listen = {
          principal,
          id,
          res: new ThrowingResponse(),
          reservation,
          stream: undefined,
          cancelled: 0,
          released: false,
        };
        listens.push(listen);
        return listen;
      };

      /** Opens a held reservation as the listen engine does: follow, then open; a failed open is released. */
      const open = (listen: Listen, kind: Kind): void => {
        const filter = filterOf(kind, listen.principal, listen.id);
        void listen.reservation!.follow(filter);
        if (kind === 'ackThrows' || kind === 'emptyAckThrows') listen.res.armed = true;
        if (kind === 'headersSent') listen.res.headersSent = true;
        try {
          listen.stream = listen.reservation!.open(listen.res, {
            id: listen.id,
            filter,
            keepAliveMs: false,
            ackFrame: ACK_MARKER,
            resultFrame: () => RESULT_MARKER,
          });
        } catch (error) {
          expect((error as { code?: string }).code).toBe('ERR_HTTP_HEADERS_SENT');
          listen.reservation!.release();
          listen.released = true;
        }
      };

      const pick = <T>(list: T[], at: number): T | undefined => list[at % Math.max(1, list.length)];

      for (const op of ops) {
        switch (op.op) {
          case 'open': {
            const listen = reserve(op.principal, op.id);
            if (listen !== undefined) open(listen, op.kind);
            break;
          }
          case 'wait': {
            const listen = reserve(op.principal, op.id);
            listen?.reservation!.cancellable(() => void listen.cancelled++);
            break;
          }
          case 'openWaiting': {
            const listen = pick(listens.filter(isWaiting), op.at);
            if (listen !== undefined) open(listen, op.kind);
            break;
          }
          case 'releaseWaiting': {
            const listen = pick(listens.filter(isWaiting), op.at);
            if (listen !== undefined) {
              listen.reservation!.release();
              listen.released = true;
            }
            break;
          }
          case 'cancel': {
            const named = (l: Listen): boolean => l.principal === op.principal && l.id === op.id;
            const expected = listens.filter(
              (l) => named(l) && (isOpen(l) || (isWaiting(l) && op.principal !== ANONYMOUS)),
            ).length;
            const waiting = listens.filter((l) => named(l) && isWaiting(l));
            if (op.viaBus) following.listener().cancel(op.principal, op.id);
            else expect(engine.cancel(op.principal, op.id)).toBe(expected);
            for (const l of waiting) expect(l.cancelled).toBe(op.principal === ANONYMOUS ? 0 : 1);
            break;
          }
          case 'hangUp':
            pick(listens.filter(isOpen), op.at)?.res.clientClose();
            break;
          case 'writeThrows': {
            const listen = pick(listens.filter(isOpen), op.at);
            if (listen !== undefined) {
              listen.res.armed = true;
              hub.toolsListChanged();
            }
            break;
          }
          case 'complete':
            void hub.complete();
            break;
        }
        await settle();
        const stats = hub.stats();
        const closed = Object.values(stats.closed).reduce((a, b) => a + b, 0);
        expect({ opened: stats.opened, accountedFor: stats.openStreams + closed }).toStrictEqual({
          opened: stats.opened,
          accountedFor: stats.opened,
        });
        expect({ open: stats.openStreams, pending: stats.pendingStreams }).toStrictEqual({
          open: listens.filter(isOpen).length,
          pending: listens.filter(isWaiting).length,
        });
        for (const l of listens) expect(l.cancelled).toBeLessThanOrEqual(1);
      }

      // Everything ends: hang-ups and releases.
      for (const l of listens) {
        if (isOpen(l)) l.res.clientClose();
        if (isWaiting(l)) {
          l.reservation!.release();
          l.released = true;
        }
      }
      await settle();
      const stats = hub.stats();
      expect(stats).toMatchObject({ openStreams: 0, pendingStreams: 0 });
      expect(Object.values(stats.closed).reduce((a, b) => a + b, 0)).toBe(stats.opened);
      expect(hub.openByPrincipal()).toStrictEqual({});
      for (const l of listens) expect(l.res.violations).toStrictEqual([]);
      // Every interest the bus was told of was given back, once.
      const told = (what: 'follow' | 'unfollow'): string[] =>
        following.calls
          .filter((call) => call.what === what)
          .map((call) => JSON.stringify(call.interest))
          .sort();
      expect(told('unfollow')).toStrictEqual(told('follow'));
      // Every principal's count is back to zero: each may hold its whole quota again.
      for (const principal of ['alice', 'bob', ANONYMOUS]) {
        const held = Array.from({ length: PER_PRINCIPAL }, (_, i) => engine.reserve(principal, 100 + i));
        expect(thrown(() => engine.reserve(principal, 200))).toMatchObject({ code: ErrorCode.Protocol });
        for (const reservation of held) reservation.release();
      }
      await hub.close();
    },
  );
});

describe("a bus's resync: what a gap may have hidden, told once per stream and key", () => {
  /** A bus of one member whose resync the test calls, as a bus does once a lost subscription is back. */
  function resyncingHub() {
    let listener: BusListener | undefined;
    const bus: SubscriptionBus = {
      join: (joined) => {
        listener = joined;
        return { publish: () => {}, cancel: () => {}, leave: () => {} };
      },
    };
    const hub = new SubscriptionHub({ bus, logger: recordingLogger() });
    return { hub, resync: (keys: Parameters<NonNullable<BusListener['resync']>>[0]) => listener!.resync!(keys) };
  }
  const updatesOf = (res: FakeResponse): string[] =>
    res
      .messages()
      .filter((message: { method?: string }) => message.method !== 'notifications/subscriptions/acknowledged')
      .map((message: { method: string; params?: { uri?: string } }) => message.params?.uri ?? message.method);

  test("each stream following a key gets the key's own notification, once; a task's stream ends gracefully", async () => {
    const { hub, resync } = resyncingHub();
    const [uris, lists, task, other] = [new FakeResponse(), new FakeResponse(), new FakeResponse(), new FakeResponse()];
    await openFollowing(hub, uris, { id: 1, filter: { resourceSubscriptions: ['note://a', 'note://b'] } });
    await openFollowing(hub, lists, { id: 2, filter: { toolsListChanged: true, promptsListChanged: true } });
    await openFollowing(hub, task, { id: 3, filter: { taskIds: ['t1'], resourceSubscriptions: ['note://a'] } });
    await openFollowing(hub, other, { id: 4, filter: { resourceSubscriptions: ['note://c'] } });
    resync({ lists: ['tools_list_changed'], uris: ['note://a'], taskIds: ['t1'] });
    await settle();
    expect(updatesOf(uris)).toStrictEqual(['note://a']);
    expect(updatesOf(lists)).toStrictEqual(['notifications/tools/list_changed']);
    expect(updatesOf(other)).toStrictEqual([]);
    // The task's stream: told of the URI, then its terminal result, so that its client listens again.
    expect(updatesOf(task)).toStrictEqual(['note://a']);
    expect(task.text.endsWith(RESULT_MARKER)).toBe(true);
    expect(hub.stats()).toMatchObject({ resynced: 3, openStreams: 3, closed: { resync: 1 } });
    // 'all': every key of every stream, once each.
    resync('all');
    await settle();
    expect(updatesOf(uris)).toStrictEqual(['note://a', 'note://a', 'note://b']);
    expect(updatesOf(lists).sort()).toStrictEqual([
      'notifications/prompts/list_changed',
      'notifications/tools/list_changed',
      'notifications/tools/list_changed',
    ]);
    expect(updatesOf(other)).toStrictEqual(['note://c']);
    // A resync is for streams only: the hub's listeners and its published count never see it.
    expect(hub.stats().published).toBe(0);
  });
});
