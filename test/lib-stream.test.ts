/**
 * One listen response (ListenStream, opened through the hub): headers, the ack first, backpressure,
 * keepalives under fake timers, exactly-once teardown, graceful end and its cut-off.
 */
import assert from 'node:assert/strict';
import { describe, test, type TestContext } from 'node:test';
import { SubscriptionHub } from 'mcp-subscriptions';
import {
  ACK_MARKER,
  FakeResponse,
  openStream,
  recordingLogger,
  RESULT_MARKER,
  settle,
} from './helpers/fake-response.ts';

const KEEPALIVE = ': keepalive\n\n';

function newHub(options: ConstructorParameters<typeof SubscriptionHub>[0] = {}) {
  return new SubscriptionHub({ logger: recordingLogger(), ...options });
}

function fakeTimers(t: TestContext): void {
  t.mock.timers.enable({ apis: ['setInterval', 'setTimeout'] });
}

function count(haystack: string, needle: string): number {
  return haystack.split(needle).length - 1;
}

describe('opening', () => {
  test('writes status 200 and the SSE headers, disables Nagle, and writes the ack before anything else', async () => {
    const hub = newHub();
    const res = new FakeResponse();
    openStream(hub, res, { filter: { toolsListChanged: true } });
    assert.equal(res.statusCode, 200);
    assert.equal(res.headers?.['Content-Type'], 'text/event-stream');
    assert.equal(res.headers?.['Cache-Control'], 'no-cache, no-transform');
    assert.equal(res.headers?.['X-Accel-Buffering'], 'no');
    assert.equal(
      Object.keys(res.headers ?? {}).some((name) => name.toLowerCase() === 'mcp-session-id'),
      false,
    );
    assert.equal(res.noDelay, true);
    assert.deepEqual(res.chunks, [ACK_MARKER]);
    hub.toolsListChanged();
    assert.equal(res.chunks[0], ACK_MARKER);
    assert.equal(res.chunks.length, 2);
    await hub.close();
  });

  test('an event published while the ack is stuck in a full socket waits behind it', async () => {
    const hub = newHub();
    const res = new FakeResponse();
    res.accept = false;
    openStream(hub, res);
    hub.toolsListChanged();
    assert.deepEqual(res.chunks, [ACK_MARKER]);
    res.drain();
    assert.equal(res.chunks[0], ACK_MARKER);
    assert.equal(res.messages()[0].method, 'notifications/tools/list_changed');
    await hub.close();
  });
});

describe('backpressure', () => {
  test('after write() returns false nothing is written until drain; then the queue goes out in order', async () => {
    const hub = newHub({ maxBuffer: 500 });
    const res = new FakeResponse();
    const uris = Array.from({ length: 200 }, (_, i) => `note://n/${i}`);
    openStream(hub, res, { filter: { resourceSubscriptions: uris } });
    res.accept = false;
    assert.equal(hub.resourceUpdated(uris[0]!).written, 1); // this write fills the socket
    const writesWhenFull = res.chunks.length;
    for (const uri of uris.slice(1)) assert.equal(hub.resourceUpdated(uri).queued, 1);
    assert.equal(res.chunks.length, writesWhenFull);

    // The socket drains but fills again on the first flush write: the stream must wait again.
    res.accept = false;
    res.emit('drain');
    const afterFirstFlush = res.chunks.length;
    assert.ok(afterFirstFlush > writesWhenFull);
    hub.resourceUpdated(uris[0]!); // arrives while blocked again: queued behind the rest
    assert.equal(res.chunks.length, afterFirstFlush, 'no write while the socket is full');

    res.drain();
    const delivered = res.messages().map((m) => m.params.uri);
    assert.deepEqual(delivered, [...uris, uris[0]]);
    assert.equal(hub.stats().queued, 0);
    assert.equal(hub.stats().written, 201);
    assert.deepEqual(res.violations, []);
    await hub.close();
  });

  test('only one drain listener is held however many times the socket fills', async () => {
    const hub = newHub();
    const res = new FakeResponse();
    openStream(hub, res, { filter: { toolsListChanged: true } });
    for (let i = 0; i < 5; i++) {
      res.accept = false;
      hub.toolsListChanged();
      hub.toolsListChanged();
      assert.equal(res.listenerCount('drain'), 1);
      res.drain();
      assert.equal(res.listenerCount('drain'), 0);
    }
    await hub.close();
  });
});

describe('keepalive', () => {
  test('writes a keepalive comment every keepAliveMs', async (t) => {
    fakeTimers(t);
    const hub = newHub();
    const res = new FakeResponse();
    openStream(hub, res, { keepAliveMs: 1000 });
    t.mock.timers.tick(999);
    assert.equal(count(res.text, KEEPALIVE), 0);
    t.mock.timers.tick(1);
    assert.equal(res.text, ACK_MARKER + KEEPALIVE);
    t.mock.timers.tick(2000);
    assert.equal(count(res.text, KEEPALIVE), 3);
    assert.deepEqual(res.comments(), ['test-ack', 'keepalive', 'keepalive', 'keepalive']);
    res.clientClose();
    await hub.close();
  });

  test('no keepalive is written while the socket is full', async (t) => {
    fakeTimers(t);
    const hub = newHub();
    const res = new FakeResponse();
    res.accept = false;
    openStream(hub, res, { keepAliveMs: 100 });
    t.mock.timers.tick(1000);
    assert.equal(count(res.text, KEEPALIVE), 0);
    res.drain();
    t.mock.timers.tick(100);
    assert.equal(count(res.text, KEEPALIVE), 1);
    res.clientClose();
    await hub.close();
  });

  test('keepAliveMs: false writes none', async (t) => {
    fakeTimers(t);
    const hub = newHub();
    const res = new FakeResponse();
    openStream(hub, res, { keepAliveMs: false });
    t.mock.timers.tick(24 * 3600 * 1000);
    assert.equal(res.text, ACK_MARKER);
    res.clientClose();
    await hub.close();
  });

  test('keepalives stop once the stream ends, whichever way it ends', async (t) => {
    fakeTimers(t);
    const hub = newHub();
    const closedByClient = new FakeResponse();
    const cancelled = new FakeResponse();
    const completed = new FakeResponse();
    openStream(hub, closedByClient, { id: 1, keepAliveMs: 10 });
    openStream(hub, cancelled, { id: 2, keepAliveMs: 10 });
    openStream(hub, completed, { id: 3, keepAliveMs: 10 });
    closedByClient.clientClose();
    hub.cancel('alice', 2);
    await hub.complete();
    const lengths = [closedByClient, cancelled, completed].map((res) => res.text.length);
    t.mock.timers.tick(10_000);
    assert.deepEqual(
      [closedByClient, cancelled, completed].map((res) => res.text.length),
      lengths,
    );
    for (const res of [closedByClient, cancelled, completed]) assert.deepEqual(res.violations, []);
    await hub.close();
  });
});

describe('teardown', () => {
  test('a client that hangs up frees everything at once, exactly once', async () => {
    const hub = newHub({ maxSubscriptions: 1, maxSubscriptionsPerPrincipal: 1 });
    const res = new FakeResponse();
    res.accept = false;
    openStream(hub, res, {
      filter: { toolsListChanged: true, resourceSubscriptions: ['note://a', 'note://b'], taskIds: ['t'] },
    });
    hub.resourceUpdated('note://a');
    hub.resourceUpdated('note://b');
    assert.equal(hub.stats().queued, 2);

    res.clientClose();
    let stats = hub.stats();
    assert.equal(stats.openStreams, 0);
    assert.equal(stats.queued, 0);
    assert.deepEqual(stats.openByPrincipal, {});
    assert.deepEqual(stats.listening, {
      toolsListChanged: 0,
      promptsListChanged: 0,
      resourcesListChanged: 0,
      resourceUris: 0,
      taskIds: 0,
    });
    assert.equal(stats.closed.client, 1);
    assert.equal(res.listenerCount('close'), 0);
    assert.equal(res.listenerCount('drain'), 0);

    // Every later path finds it already gone.
    res.emit('close');
    res.emit('drain');
    assert.equal(hub.cancel('alice', 'sub-1'), 0);
    await hub.complete();
    stats = hub.stats();
    assert.equal(stats.closed.client, 1);
    assert.equal(stats.closed.complete, 0);
    assert.equal(res.text, ACK_MARKER);
    assert.deepEqual(res.violations, []);

    // The freed slot is reusable at once.
    openStream(hub, new FakeResponse(), { id: 'again' });
    assert.equal(hub.stats().openStreams, 1);
    await hub.close();
  });

  test('a cancelled stream writes nothing more and is destroyed', async () => {
    const hub = newHub();
    const res = new FakeResponse();
    openStream(hub, res, { id: 'L', filter: { toolsListChanged: true } });
    assert.equal(hub.cancel('alice', 'L'), 1);
    assert.equal(res.destroyed, true);
    assert.deepEqual(hub.toolsListChanged(), {
      matched: 0,
      written: 0,
      queued: 0,
      coalesced: 0,
      dropped: 0,
      closed: 0,
    });
    await settle(); // the response's own 'close' arrives later and must be harmless
    assert.equal(res.text, ACK_MARKER);
    assert.equal(hub.stats().closed.cancelled, 1);
    assert.deepEqual(res.violations, []);
    await hub.close();
  });
});

describe('graceful end', () => {
  test('complete() writes the terminal result last and ends the response', async () => {
    const hub = newHub();
    const res = new FakeResponse();
    openStream(hub, res, { filter: { toolsListChanged: true } });
    hub.toolsListChanged();
    await hub.complete();
    assert.equal(res.chunks[0], ACK_MARKER);
    assert.equal(res.chunks.at(-1), RESULT_MARKER);
    assert.equal(res.writableEnded, true);
    assert.equal(res.destroyed, false);
    assert.equal(hub.stats().closed.complete, 1);
    await settle();
    assert.deepEqual(res.violations, []);
    await hub.close();
  });

  test('a graceful end waits for drain, then writes the queue and the result', async (t) => {
    fakeTimers(t);
    const hub = newHub({ completeTimeoutMs: 500 });
    const res = new FakeResponse();
    res.accept = false;
    openStream(hub, res, { filter: { toolsListChanged: true } });
    hub.toolsListChanged();
    let done = false;
    const completed = hub.complete().then(() => (done = true));
    t.mock.timers.tick(499);
    await settle();
    assert.equal(done, false);
    assert.equal(res.writableEnded, false);
    res.drain();
    await completed;
    assert.equal(res.messages()[0].method, 'notifications/tools/list_changed');
    assert.ok(res.text.endsWith(RESULT_MARKER));
    await hub.close();
  });

  test('a client that never reads is cut off after completeTimeoutMs, without the result', async (t) => {
    fakeTimers(t);
    const hub = newHub({ completeTimeoutMs: 500 });
    const res = new FakeResponse();
    res.accept = false;
    openStream(hub, res, { filter: { toolsListChanged: true } });
    hub.toolsListChanged();
    let done = false;
    const closing = hub.close().then(() => (done = true));
    await settle();
    assert.equal(done, false);
    t.mock.timers.tick(500);
    await closing;
    assert.equal(res.destroyed, true);
    assert.equal(res.text, ACK_MARKER);
    assert.equal(hub.stats().openStreams, 0);
    assert.deepEqual(res.violations, []);
  });

  test('a client that hangs up during a graceful end finishes it', async () => {
    const hub = newHub();
    const res = new FakeResponse();
    res.accept = false;
    openStream(hub, res);
    const completed = hub.complete();
    res.clientClose();
    await completed;
    assert.equal(res.text, ACK_MARKER);
    assert.deepEqual(res.violations, []);
    await hub.close();
  });

  test('an empty honoured filter is acknowledged and then completed at once', async () => {
    const hub = newHub();
    const res = new FakeResponse();
    const stream = openStream(hub, res, { filter: {}, keepAliveMs: 10 });
    assert.equal(stream.isOpen, false);
    assert.equal(res.text, ACK_MARKER + RESULT_MARKER);
    assert.equal(res.writableEnded, true);
    await settle();
    assert.deepEqual(res.violations, []);
    await hub.close();
  });
});
