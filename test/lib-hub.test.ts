/**
 * SubscriptionHub: fan-out through its indexes, publish validation and reports, per-stream bounded
 * queues with coalescing and the three overflow policies, the bus, listeners, limits and shutdown.
 * Streams are opened on fake responses whose write() result and 'drain' the tests control.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { createMcpHandler, McpServer, type ServerEventBus } from '@modelcontextprotocol/server';
import {
  ErrorCode,
  hasErrorCode,
  MemoryBus,
  SubscriptionHub,
  type PublishReport,
  type ProtocolError,
  type SubscriptionEvent,
  type TaskState,
} from 'mcp-subscriptions';
import {
  FakeResponse,
  openStream,
  recordingLogger,
  RESULT_MARKER,
  settle,
  subscriptionIdOf,
} from './helpers/fake-response.ts';

function newHub(options: ConstructorParameters<typeof SubscriptionHub>[0] = {}) {
  const logger = recordingLogger();
  return { hub: new SubscriptionHub({ logger, ...options }), logger };
}

function report(partial: Partial<PublishReport>): PublishReport {
  return { matched: 0, written: 0, queued: 0, coalesced: 0, dropped: 0, closed: 0, ...partial };
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

function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  assert.fail('expected a throw');
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

    assert.deepEqual(hub.toolsListChanged(), report({ matched: 2, written: 2 }));
    assert.deepEqual(hub.promptsListChanged(), report({ matched: 2, written: 2 }));
    assert.deepEqual(hub.resourcesListChanged(), report({ matched: 1, written: 1 }));
    await settle(); // a tick's events reach a stream as one write, at the end of the tick

    assert.deepEqual(delivered(tools), ['notifications/tools/list_changed']);
    assert.deepEqual(delivered(prompts), ['notifications/prompts/list_changed']);
    assert.deepEqual(delivered(both), [
      'notifications/tools/list_changed',
      'notifications/prompts/list_changed',
      'notifications/resources/list_changed',
    ]);
    assert.deepEqual(tools.messages().map(subscriptionIdOf), ['a']);
    assert.deepEqual(prompts.messages().map(subscriptionIdOf), [7]);
    assert.deepEqual(both.messages().map(subscriptionIdOf), ['', '', '']);
    await hub.close();
  });

  test('a resource update reaches only the streams subscribed to that URI', async () => {
    const { hub } = newHub();
    const a = new FakeResponse();
    const b = new FakeResponse();
    openStream(hub, a, { id: 'a', filter: { resourceSubscriptions: ['note://x', 'note://shared'] } });
    openStream(hub, b, { id: 'b', filter: { resourceSubscriptions: ['note://y', 'note://shared'] } });
    assert.equal(hub.stats().listening.resourceUris, 3);

    assert.deepEqual(hub.resourceUpdated('note://x'), report({ matched: 1, written: 1 }));
    assert.deepEqual(hub.resourceUpdated('note://shared'), report({ matched: 2, written: 2 }));
    assert.deepEqual(hub.resourceUpdated('note://nobody'), report({}));
    // A list change is not a resource update.
    assert.deepEqual(hub.toolsListChanged(), report({}));
    await settle(); // a tick's events reach a stream as one write, at the end of the tick

    assert.deepEqual(delivered(a), [
      'notifications/resources/updated note://x',
      'notifications/resources/updated note://shared',
    ]);
    assert.deepEqual(delivered(b), ['notifications/resources/updated note://shared']);
    await hub.close();
  });

  test('the URI index forgets a URI when its last stream closes', async () => {
    const { hub } = newHub();
    const a = new FakeResponse();
    const b = new FakeResponse();
    openStream(hub, a, { id: 'a', filter: { resourceSubscriptions: ['note://x', 'note://shared'] } });
    openStream(hub, b, { id: 'b', filter: { resourceSubscriptions: ['note://shared'] } });
    a.clientClose();
    assert.equal(hub.stats().listening.resourceUris, 1);
    assert.deepEqual(hub.resourceUpdated('note://x'), report({}));
    assert.deepEqual(hub.resourceUpdated('note://shared'), report({ matched: 1, written: 1 }));
    b.clientClose();
    assert.deepEqual(hub.stats().listening, {
      toolsListChanged: 0,
      promptsListChanged: 0,
      resourcesListChanged: 0,
      resourceUris: 0,
      taskIds: 0,
    });
    await hub.close();
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
    assert.deepEqual(hub.taskStatus(state, 'alice'), report({ matched: 1, written: 1 }));
    await settle(); // a tick's events reach a stream as one write, at the end of the tick
    assert.equal(bob.messages().length, 0);
    assert.equal(aliceOther.messages().length, 0);
    const [message] = alice.messages();
    assert.equal(message.method, 'notifications/tasks');
    assert.deepEqual(message.params, { ...state, _meta: { 'io.modelcontextprotocol/subscriptionId': 1 } });
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
    for (const event of sdkEvents) assert.equal(hub.publish(event).written, 1);
    await settle(); // a tick's events reach a stream as one write, at the end of the tick
    assert.deepEqual(delivered(res), [
      'notifications/tools/list_changed',
      'notifications/prompts/list_changed',
      'notifications/resources/list_changed',
      'notifications/resources/updated note://a',
    ]);
    assert.equal(res.text.includes('secret'), false);
    assert.deepEqual(res.messages()[3].params, {
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
      assert.ok(hasErrorCode(error, ErrorCode.InvalidEvent), `${JSON.stringify(event)}: ${String(error)}`);
      assert.match((error as Error).message, field);
    }
    assert.throws(() => hub.resourceUpdated('relative'), { code: ErrorCode.InvalidEvent });
    assert.deepEqual(res.messages(), []);
    assert.equal(hub.stats().published, 0);
    await hub.close();
  });

  test('a publish nobody listens for reports zeros', async () => {
    const { hub } = newHub();
    assert.deepEqual(hub.toolsListChanged(), report({}));
    assert.deepEqual(hub.resourceUpdated('note://a'), report({}));
    assert.deepEqual(hub.taskStatus(task('t', 'working'), 'alice'), report({}));
    await hub.close();
  });
});

describe('bounded queues and coalescing', () => {
  test('while the socket pushes back, events queue and go out in order on drain', async () => {
    const { hub } = newHub();
    const res = new FakeResponse();
    res.accept = false; // the ack itself fills the socket
    openStream(hub, res, { filter: { toolsListChanged: true, resourceSubscriptions: ['note://a', 'note://b'] } });
    assert.deepEqual(hub.resourceUpdated('note://a'), report({ matched: 1, queued: 1 }));
    assert.deepEqual(hub.toolsListChanged(), report({ matched: 1, queued: 1 }));
    assert.deepEqual(hub.resourceUpdated('note://b'), report({ matched: 1, queued: 1 }));
    assert.equal(hub.stats().queued, 3);
    assert.deepEqual(res.messages(), []);
    res.drain();
    assert.deepEqual(delivered(res), [
      'notifications/resources/updated note://a',
      'notifications/tools/list_changed',
      'notifications/resources/updated note://b',
    ]);
    assert.equal(hub.stats().queued, 0);
    assert.deepEqual(hub.toolsListChanged(), report({ matched: 1, written: 1 }));
    await hub.close();
  });

  test('a second identical event merges into the queued one; different URIs do not', async () => {
    const { hub } = newHub();
    const res = new FakeResponse();
    res.accept = false;
    openStream(hub, res, {
      filter: { toolsListChanged: true, promptsListChanged: true, resourceSubscriptions: ['note://a', 'note://b'] },
    });
    assert.deepEqual(hub.toolsListChanged(), report({ matched: 1, queued: 1 }));
    assert.deepEqual(hub.resourceUpdated('note://a'), report({ matched: 1, queued: 1 }));
    assert.deepEqual(hub.toolsListChanged(), report({ matched: 1, coalesced: 1 }));
    assert.deepEqual(hub.resourceUpdated('note://a'), report({ matched: 1, coalesced: 1 }));
    assert.deepEqual(hub.resourceUpdated('note://b'), report({ matched: 1, queued: 1 }));
    assert.deepEqual(hub.promptsListChanged(), report({ matched: 1, queued: 1 }));
    assert.equal(hub.stats().queued, 4);
    assert.equal(hub.stats().coalesced, 2);
    res.drain();
    assert.deepEqual(delivered(res), [
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
    assert.deepEqual(hub.taskStatus(task('t1', 'input_required'), 'alice'), report({ matched: 1, coalesced: 1 }));
    const final = task('t1', 'completed', { result: { content: [{ type: 'text', text: 'ok' }] } });
    assert.deepEqual(hub.taskStatus(final, 'alice'), report({ matched: 1, coalesced: 1 }));
    res.drain();
    assert.deepEqual(delivered(res), [
      'notifications/tasks t1 completed',
      'notifications/tools/list_changed',
      'notifications/tasks t2 working',
    ]);
    const first = res.messages()[0];
    assert.deepEqual(first.params, { ...final, _meta: { 'io.modelcontextprotocol/subscriptionId': 'sub-1' } });
    assert.equal('statusMessage' in first.params, false);
    await hub.close();
  });

  test("'drop-oldest' (the default) keeps the newest maxBuffer events", async () => {
    const { hub } = newHub({ maxBuffer: 3 });
    assert.equal(hub.options.overflow, 'drop-oldest');
    const res = new FakeResponse();
    res.accept = false;
    const uris = ['note://1', 'note://2', 'note://3', 'note://4', 'note://5'];
    openStream(hub, res, { filter: { resourceSubscriptions: uris } });
    const reports = uris.map((uri) => hub.resourceUpdated(uri));
    assert.deepEqual(reports.slice(0, 3), [
      report({ matched: 1, queued: 1 }),
      report({ matched: 1, queued: 1 }),
      report({ matched: 1, queued: 1 }),
    ]);
    assert.deepEqual(reports[3], report({ matched: 1, queued: 1, dropped: 1 }));
    assert.deepEqual(reports[4], report({ matched: 1, queued: 1, dropped: 1 }));
    assert.equal(hub.stats().queued, 3);
    assert.equal(hub.stats().dropped, 2);
    // Coalescing into a queued URI does not count against the bound.
    assert.deepEqual(hub.resourceUpdated('note://4'), report({ matched: 1, coalesced: 1 }));
    res.drain();
    assert.deepEqual(delivered(res), [
      'notifications/resources/updated note://3',
      'notifications/resources/updated note://4',
      'notifications/resources/updated note://5',
    ]);
    assert.equal(hub.stats().openStreams, 1);
    await hub.close();
  });

  test("'drop-newest' keeps what is queued and drops the new event", async () => {
    const { hub } = newHub({ maxBuffer: 2, overflow: 'drop-newest' });
    const res = new FakeResponse();
    res.accept = false;
    openStream(hub, res, { filter: { resourceSubscriptions: ['note://1', 'note://2', 'note://3'] } });
    hub.resourceUpdated('note://1');
    hub.resourceUpdated('note://2');
    assert.deepEqual(hub.resourceUpdated('note://3'), report({ matched: 1, dropped: 1 }));
    assert.deepEqual(hub.resourceUpdated('note://2'), report({ matched: 1, coalesced: 1 }));
    assert.equal(hub.stats().queued, 2);
    res.drain();
    assert.deepEqual(delivered(res), [
      'notifications/resources/updated note://1',
      'notifications/resources/updated note://2',
    ]);
    await hub.close();
  });

  test("'close' ends the stream on overflow: its slot frees, its queue is dropped, the result follows on drain", async () => {
    const { hub } = newHub({ maxBuffer: 2, overflow: 'close', maxSubscriptions: 1 });
    const res = new FakeResponse();
    res.accept = false;
    openStream(hub, res, { filter: { resourceSubscriptions: ['note://1', 'note://2', 'note://3'] } });
    hub.resourceUpdated('note://1');
    hub.resourceUpdated('note://2');
    assert.deepEqual(hub.resourceUpdated('note://3'), report({ matched: 1, dropped: 1, closed: 1 }));
    const stats = hub.stats();
    assert.equal(stats.openStreams, 0);
    assert.equal(stats.closed.overflow, 1);
    assert.equal(stats.queued, 0);
    assert.deepEqual(hub.resourceUpdated('note://1'), report({}));
    // The slot is free at once, before the overflowed response has even finished.
    const next = new FakeResponse();
    openStream(hub, next, { id: 'next', filter: { toolsListChanged: true } });
    res.drain();
    assert.deepEqual(res.messages(), []);
    assert.ok(res.text.endsWith(RESULT_MARKER));
    assert.equal(res.writableEnded, true);
    assert.deepEqual(res.violations, []);
    await hub.close();
  });

  test('maxBuffer defaults to 100 distinct events', async () => {
    const { hub } = newHub();
    assert.equal(hub.stats().maxBuffer, 100);
    const res = new FakeResponse();
    res.accept = false;
    const uris = Array.from({ length: 101 }, (_, i) => `note://n/${i}`);
    openStream(hub, res, { filter: { resourceSubscriptions: uris } });
    const dropped = uris.map((uri) => hub.resourceUpdated(uri).dropped).reduce((a, b) => a + b, 0);
    assert.equal(dropped, 1);
    assert.equal(hub.stats().queued, 100);
    res.drain();
    assert.equal(res.messages().length, 100);
    assert.equal(res.messages()[0].params.uri, 'note://n/1');
    await hub.close();
  });
});

describe('overflow during fan-out', () => {
  test("a stream closed by the 'close' policy does not stop delivery to the others", async () => {
    const { hub } = newHub({ maxBuffer: 1, overflow: 'close' });
    const slow = new FakeResponse();
    const fast = new FakeResponse();
    const alsoFast = new FakeResponse();
    openStream(hub, slow, { id: 'slow', filter: { resourceSubscriptions: ['note://1', 'note://2'] } });
    openStream(hub, fast, { id: 'fast', filter: { resourceSubscriptions: ['note://1', 'note://2'] } });
    openStream(hub, alsoFast, { id: 'also', filter: { resourceSubscriptions: ['note://2'] } });
    slow.accept = false;
    assert.deepEqual(hub.resourceUpdated('note://1'), report({ matched: 2, written: 2 }));
    await settle(); // the tick's batch is written now, and fills slow's socket
    assert.deepEqual(hub.resourceUpdated('note://2'), report({ matched: 3, written: 2, queued: 1 }));
    assert.deepEqual(hub.resourceUpdated('note://1'), report({ matched: 2, written: 1, dropped: 1, closed: 1 }));
    assert.deepEqual(hub.resourceUpdated('note://2'), report({ matched: 2, written: 2 }));
    await settle();
    assert.equal(delivered(fast).length, 4);
    assert.equal(delivered(alsoFast).length, 2);
    assert.equal(hub.stats().openStreams, 2);
    await hub.close();
  });
});

describe('listeners and the bus', () => {
  test('subscribe() sees every MCP change event; unsubscribe is idempotent; a throwing listener is logged, not thrown', async () => {
    const { hub, logger } = newHub();
    const seen: SubscriptionEvent[] = [];
    const unsubscribe = hub.subscribe((event) => seen.push(event));
    const unsubscribeBad = hub.subscribe(() => {
      throw new Error('listener bug');
    });
    const res = new FakeResponse();
    openStream(hub, res, { filter: { toolsListChanged: true } });
    assert.deepEqual(hub.toolsListChanged(), report({ matched: 1, written: 1 }));
    hub.resourceUpdated('note://nobody');
    assert.deepEqual(seen, [{ kind: 'tools_list_changed' }, { kind: 'resource_updated', uri: 'note://nobody' }]);
    assert.equal(logger.errors.length, 2);
    unsubscribe();
    unsubscribe();
    unsubscribeBad();
    hub.toolsListChanged();
    assert.equal(seen.length, 2);
    assert.equal(logger.errors.length, 2);
    await hub.close();
  });

  test("the hub is the SDK's ServerEventBus: handler.notify.* reaches our streams; SDK listeners never see task events", async () => {
    const { hub } = newHub();
    const bus: ServerEventBus = hub;
    const handler = createMcpHandler(() => new McpServer({ name: 'sdk', version: '1.0.0' }), { bus: hub });
    const res = new FakeResponse();
    openStream(hub, res, { filter: { toolsListChanged: true, resourceSubscriptions: ['note://a'] } });
    handler.notify.toolsChanged();
    handler.notify.resourceUpdated('note://a');
    await settle(); // a tick's events reach a stream as one write, at the end of the tick
    assert.deepEqual(delivered(res), ['notifications/tools/list_changed', 'notifications/resources/updated note://a']);

    const sdkSeen: unknown[] = [];
    const allSeen: SubscriptionEvent[] = [];
    const stopSdk = bus.subscribe((event) => sdkSeen.push(event));
    const stopAll = hub.subscribeAll((event) => allSeen.push(event));
    const task = { taskId: 't1', status: 'working' as const, createdAt: 'x', lastUpdatedAt: 'x', ttlMs: null };
    hub.taskStatus(task, 'alice');
    hub.promptsListChanged();
    assert.deepEqual(sdkSeen, [{ kind: 'prompts_list_changed' }]);
    assert.deepEqual(
      allSeen.map((event) => event.kind),
      ['task_status', 'prompts_list_changed'],
    );
    stopSdk();
    stopAll();
    await handler.close();
    await hub.close();
  });

  test('an event published on one hub reaches the streams of the others on the bus, never echoed back', async () => {
    const bus = new MemoryBus();
    const { hub: a } = newHub({ bus });
    const { hub: b } = newHub({ bus });
    assert.equal(bus.size, 2);
    const onA = new FakeResponse();
    const onB = new FakeResponse();
    openStream(a, onA, { id: 'a', filter: { resourceSubscriptions: ['note://x'] } });
    openStream(b, onB, { id: 'b', filter: { resourceSubscriptions: ['note://x'] } });
    const seenByA: SubscriptionEvent[] = [];
    a.subscribe((event) => seenByA.push(event));

    assert.deepEqual(a.resourceUpdated('note://x'), report({ matched: 1, written: 1 }));
    await settle(); // a tick's events reach a stream as one write, at the end of the tick
    assert.deepEqual(delivered(onA), ['notifications/resources/updated note://x']);
    assert.deepEqual(delivered(onB), ['notifications/resources/updated note://x']);
    assert.equal(seenByA.length, 1);
    assert.equal(b.stats().published, 1);
    // A listener on the receiving hub sees events that arrived over the bus.
    const seenByB: SubscriptionEvent[] = [];
    const stop = b.subscribe((event) => seenByB.push(event));
    a.toolsListChanged();
    stop();
    assert.deepEqual(seenByB, [{ kind: 'tools_list_changed' }]);

    await a.close();
    assert.equal(bus.size, 1);
    b.resourceUpdated('note://x');
    assert.equal(seenByA.length, 2, 'a hub that left the bus hears nothing more');
    await b.close();
    assert.equal(bus.size, 0);
  });
});

describe('limits and reservations', () => {
  function capacityError(fn: () => unknown): ProtocolError {
    const error = thrown(fn);
    assert.ok(hasErrorCode(error, ErrorCode.Protocol), String(error));
    return error as ProtocolError;
  }

  test('maxSubscriptions refuses with -32603 "Subscription limit reached", 503 and Retry-After; a freed slot is reusable at once', async () => {
    const { hub } = newHub({ maxSubscriptions: 2, retryAfterSeconds: 7 });
    const a = new FakeResponse();
    openStream(hub, a, { principal: 'p1', id: 'a' });
    openStream(hub, new FakeResponse(), { principal: 'p2', id: 'b' });
    const error = capacityError(() => hub.reserve('p3', 'c'));
    assert.equal(error.rpcCode, -32603);
    assert.equal(error.message, 'Subscription limit reached');
    assert.equal(error.httpStatus, 503);
    assert.deepEqual(error.headers, { 'Retry-After': '7' });
    assert.equal(error.id, 'c');
    assert.equal(hub.stats().refused, 1);
    a.clientClose();
    openStream(hub, new FakeResponse(), { principal: 'p3', id: 'c' });
    assert.equal(hub.stats().openStreams, 2);
    await hub.close();
  });

  test('maxSubscriptionsPerPrincipal bounds one principal only', async () => {
    const { hub } = newHub({ maxSubscriptionsPerPrincipal: 1 });
    openStream(hub, new FakeResponse(), { principal: 'alice', id: 1 });
    const error = capacityError(() => hub.reserve('alice', 2));
    assert.equal(error.rpcCode, -32603);
    assert.equal(error.httpStatus, 503);
    assert.equal(error.headers['Retry-After'], '1');
    openStream(hub, new FakeResponse(), { principal: 'bob', id: 1 });
    assert.deepEqual(hub.stats().openByPrincipal, { alice: 1, bob: 1 });
    // hub.cancel frees alice's slot synchronously.
    assert.equal(hub.cancel('alice', 1), 1);
    openStream(hub, new FakeResponse(), { principal: 'alice', id: 2 });
    await hub.close();
  });

  test('a reservation holds a slot until it opens or is released; release is idempotent', async () => {
    const { hub } = newHub({ maxSubscriptions: 1, maxSubscriptionsPerPrincipal: 1 });
    const reservation = hub.reserve('alice', 1);
    assert.equal(hub.stats().pendingStreams, 1);
    assert.equal(capacityError(() => hub.reserve('bob', 2)).rpcCode, -32603);
    reservation.release();
    reservation.release();
    assert.equal(hub.stats().pendingStreams, 0);
    const again = hub.reserve('alice', 3);
    const stream = again.open(new FakeResponse(), {
      id: 3,
      filter: { toolsListChanged: true },
      keepAliveMs: false,
      ackFrame: ': a\n\n',
      resultFrame: ': r\n\n',
    });
    assert.equal(stream.isOpen, true);
    assert.equal(hub.stats().pendingStreams, 0);
    assert.throws(() =>
      again.open(new FakeResponse(), { id: 3, filter: {}, keepAliveMs: false, ackFrame: '', resultFrame: '' }),
    );
    // Releasing after opening must not give back the open stream's slot.
    again.release();
    assert.equal(capacityError(() => hub.reserve('carol', 4)).rpcCode, -32603);
    await hub.close();
  });

  test('a stream with an empty filter is acknowledged, completed at once, and holds no slot', async () => {
    const { hub } = newHub({ maxSubscriptions: 1, maxSubscriptionsPerPrincipal: 1 });
    const res = new FakeResponse();
    const stream = openStream(hub, res, { filter: {} });
    assert.equal(stream.isOpen, false);
    assert.equal(res.writableEnded, true);
    assert.equal(res.text, `: test-ack\n\n${RESULT_MARKER}`);
    const stats = hub.stats();
    assert.equal(stats.openStreams, 0);
    assert.equal(stats.pendingStreams, 0);
    assert.equal(stats.closed.empty, 1);
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
    assert.equal(hub.cancel('alice', 'nope'), 0);
    assert.equal(hub.cancel('carol', '1'), 0);
    const before = mine.text;
    assert.equal(hub.cancel('alice', '1'), 1);
    assert.equal(mine.destroyed, true);
    assert.equal(mine.text, before);
    assert.equal(sameIdOtherPrincipal.destroyed, false);
    assert.equal(numericId.destroyed, false, 'the string id "1" must not match the number 1');
    assert.equal(hub.cancel('alice', '1'), 0);
    const stats = hub.stats();
    assert.equal(stats.openStreams, 2);
    assert.equal(stats.closed.cancelled, 1);
    await settle();
    assert.deepEqual(mine.violations, []);
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
      assert.ok(res.text.endsWith(RESULT_MARKER));
      assert.equal(res.writableEnded, true);
      assert.deepEqual(res.violations, []);
    }
    assert.equal(hub.stats().closed.complete, 2);
    const c = new FakeResponse();
    openStream(hub, c, { id: 'c' });
    assert.equal(hub.toolsListChanged().written, 1);
    await hub.close();
    assert.ok(c.text.endsWith(RESULT_MARKER));
  });

  test('complete() writes what is queued before the result', async () => {
    const { hub } = newHub();
    const res = new FakeResponse();
    res.accept = false;
    openStream(hub, res, { filter: { toolsListChanged: true, resourceSubscriptions: ['note://a'] } });
    hub.toolsListChanged();
    hub.resourceUpdated('note://a');
    const done = hub.complete();
    assert.equal(res.writableEnded, false);
    res.drain();
    await done;
    assert.deepEqual(delivered(res), ['notifications/tools/list_changed', 'notifications/resources/updated note://a']);
    assert.ok(res.text.endsWith(RESULT_MARKER));
    await hub.close();
  });

  test('close() ignores later events, refuses new streams with 503, is idempotent, and leaves the bus', async () => {
    const bus = new MemoryBus();
    const { hub } = newHub({ bus, retryAfterSeconds: 4 });
    const res = new FakeResponse();
    openStream(hub, res);
    await Promise.all([hub.close(), hub.close()]);
    await hub.close();
    assert.ok(res.text.endsWith(RESULT_MARKER));
    assert.equal(bus.size, 0);
    // Host code may still publish during shutdown: nothing is delivered and nothing throws.
    const seen: SubscriptionEvent[] = [];
    hub.subscribe((event) => seen.push(event));
    assert.deepEqual(hub.toolsListChanged(), report({}));
    assert.deepEqual(hub.resourceUpdated('note://a'), report({}));
    assert.deepEqual(seen, []);
    // An invalid event is still a programmer's mistake.
    assert.throws(() => hub.resourceUpdated('relative'), { code: ErrorCode.InvalidEvent });
    const error = thrown(() => hub.reserve('alice', 9)) as ProtocolError;
    assert.equal(error.code, ErrorCode.Protocol);
    assert.equal(error.rpcCode, -32603);
    assert.equal(error.httpStatus, 503);
    assert.equal(error.headers['Retry-After'], '4');
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
    assert.equal(stats.openStreams, 2);
    assert.equal(stats.opened, 2);
    assert.deepEqual(stats.openByPrincipal, { alice: 2 });
    assert.deepEqual(stats.listening, {
      toolsListChanged: 1,
      promptsListChanged: 1,
      resourcesListChanged: 0,
      resourceUris: 0,
      taskIds: 1,
    });
    assert.equal(stats.published, 1);
    assert.equal(stats.written, 1);
    assert.equal(stats.maxSubscriptions, 10);
    stats.openByPrincipal.alice = 99;
    assert.deepEqual(hub.stats().openByPrincipal, { alice: 2 });
    await hub.close();
  });
});

describe('hub options', () => {
  function optionError(options: unknown): Error {
    const error = thrown(() => new SubscriptionHub(options as never));
    assert.ok(hasErrorCode(error, ErrorCode.InvalidOption), String(error));
    return error as Error;
  }

  test('a bad bound throws at construction in the p-queue manner, naming the field', () => {
    assert.equal(
      optionError({ maxBuffer: -5 }).message,
      'mcp-subscriptions: Expected `maxBuffer` to be a positive integer, got `-5` (number)',
    );
    for (const field of [
      'maxBuffer',
      'maxSubscriptions',
      'completeTimeoutMs',
      'retryAfterSeconds',
      'maxSubscriptionsPerPrincipal',
    ]) {
      for (const value of [0, -1, 1.5, '10', Number.NaN, Infinity, true]) {
        const message = optionError({ [field]: value }).message;
        assert.ok(message.includes(`\`${field}\``), message);
      }
    }
    assert.match(optionError({ maxSubscriptions: '10' }).message, /got `10` \(string\)/);
  });

  test('overflow, bus and logger are checked too', () => {
    assert.match(
      optionError({ overflow: 'drop-all' }).message,
      /`overflow`.*'drop-oldest', 'drop-newest', 'close'.*`drop-all` \(string\)/,
    );
    assert.match(optionError({ bus: {} }).message, /`bus`/);
    assert.match(optionError({ logger: { warn() {} } }).message, /`logger`/);
    assert.match(optionError('fast').message, /options/);
  });

  test('defaults are applied to a frozen copy; the input is not touched', async () => {
    const input = { maxBuffer: 5, logger: recordingLogger() };
    const snapshot = { ...input };
    const hub = new SubscriptionHub(input);
    assert.deepEqual(input, snapshot);
    assert.equal(Object.isFrozen(hub.options), true);
    assert.equal(hub.options.maxBuffer, 5);
    assert.equal(hub.options.overflow, 'drop-oldest');
    assert.equal(hub.options.maxSubscriptions, 1024);
    assert.equal(hub.options.maxSubscriptionsPerPrincipal, false);
    assert.equal(hub.options.retryAfterSeconds, 1);
    assert.equal(hub.options.completeTimeoutMs, 3000);
    await hub.close();
  });
});
