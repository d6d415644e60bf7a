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

/** Mirrors PENDING_FLUSH_CHARS in lib/listen-stream.ts: a tick's batch is written early at this size. */
const PENDING_FLUSH_CHARS = 16_384;

/** The exact bytes of a resource update on stream `id` (spec §3). */
function updateFrame(uri: string, id: string | number = 'sub-1'): string {
  return (
    'event: message\n' +
    `data: {"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":${JSON.stringify(uri)},"_meta":{"io.modelcontextprotocol/subscriptionId":${JSON.stringify(id)}}}}\n\n`
  );
}

/** The exact bytes of a tools list change on stream `id` (spec §3). */
function toolsFrame(id: string | number = 'sub-1'): string {
  return (
    'event: message\n' +
    `data: {"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":${JSON.stringify(id)}}}}\n\n`
  );
}

/** What a publish reported, with zeros for what it did not say. */
function report(partial: Partial<ReturnType<SubscriptionHub['publish']>>) {
  return { matched: 0, written: 0, queued: 0, coalesced: 0, dropped: 0, closed: 0, ...partial };
}

/** Enough URIs of about 1 KiB each that one burst of their updates passes PENDING_FLUSH_CHARS twice over. */
function bigUris(n = 40): string[] {
  return Array.from({ length: n }, (_, i) => `note://big/${i}/${'x'.repeat(1000)}`);
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
    await settle(); // a tick's events reach a stream as one write, at the end of the tick
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
    assert.equal(hub.resourceUpdated(uris[0]!).written, 1);
    await settle(); // the tick's batch is written now: this write fills the socket
    const writesWhenFull = res.chunks.length;
    assert.equal(writesWhenFull, 2);
    for (const uri of uris.slice(1)) assert.equal(hub.resourceUpdated(uri).queued, 1);
    await settle(); // nothing is written at the end of the tick either
    assert.equal(res.chunks.length, writesWhenFull);

    // The socket drains but fills again on the first flush write: the stream must wait again.
    res.accept = false;
    res.emit('drain');
    const afterFirstFlush = res.chunks.length;
    assert.ok(afterFirstFlush > writesWhenFull);
    assert.equal(hub.resourceUpdated(uris[0]!).queued, 1); // arrives while blocked again: queued behind the rest
    await settle();
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
      await settle(); // the tick's batch is written now, and fills the socket
      assert.equal(hub.toolsListChanged().queued, 1); // while full: queued, no second listener
      await settle();
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

describe('batching: one write per stream per tick', () => {
  test('a burst of publishes in one tick reaches each stream as one write, after a microtask, in order', async () => {
    const hub = newHub();
    const a = new FakeResponse();
    const b = new FakeResponse();
    const uris = Array.from({ length: 50 }, (_, i) => `note://burst/${i}`);
    openStream(hub, a, { id: 'a', filter: { resourceSubscriptions: uris } });
    openStream(hub, b, { id: 7, filter: { resourceSubscriptions: uris } });
    for (const uri of uris) assert.deepEqual(hub.resourceUpdated(uri), report({ matched: 2, written: 2 }));
    assert.deepEqual(a.chunks, [ACK_MARKER], 'nothing is written synchronously');
    assert.deepEqual(b.chunks, [ACK_MARKER], 'nothing is written synchronously');

    await Promise.resolve(); // one microtask: the end of the tick
    assert.deepEqual(a.chunks, [ACK_MARKER, uris.map((uri) => updateFrame(uri, 'a')).join('')]);
    assert.deepEqual(b.chunks, [ACK_MARKER, uris.map((uri) => updateFrame(uri, 7)).join('')]);
    assert.equal(hub.stats().written, 100);

    // Events published after that flush make the next batch, and the next write.
    hub.resourceUpdated(uris[0]!);
    hub.resourceUpdated(uris[1]!);
    assert.equal(a.chunks.length, 2);
    await Promise.resolve();
    assert.deepEqual(a.chunks.slice(2), [updateFrame(uris[0]!, 'a') + updateFrame(uris[1]!, 'a')]);
    await settle();
    assert.equal(a.chunks.length, 3, 'one write per tick, not one more');
    assert.deepEqual(a.violations, []);
    assert.deepEqual(b.violations, []);
    await hub.close();
  });

  test('a burst beyond 16 KiB is written early, in whole frames, with every byte in order', async () => {
    const hub = newHub();
    const res = new FakeResponse();
    const uris = bigUris();
    const frames = uris.map((uri) => updateFrame(uri));
    const longestFrame = Math.max(...frames.map((frame) => frame.length));
    assert.ok(frames.join('').length > 2 * PENDING_FLUSH_CHARS);
    openStream(hub, res, { filter: { resourceSubscriptions: uris } });
    for (const uri of uris) assert.deepEqual(hub.resourceUpdated(uri), report({ matched: 1, written: 1 }));

    // Written before the end of the tick, each early write as soon as the batch reached the bound.
    const early = res.chunks.slice(1);
    assert.ok(early.length >= 1, 'a batch that reaches 16 KiB is written before the end of the tick');
    for (const chunk of early) {
      assert.ok(chunk.length >= PENDING_FLUSH_CHARS, `an early write of ${chunk.length} chars`);
      assert.ok(chunk.length < PENDING_FLUSH_CHARS + longestFrame, `an early write of ${chunk.length} chars`);
    }

    await Promise.resolve(); // the rest goes out at the end of the tick
    assert.equal(res.chunks.length, early.length + 2);
    assert.equal(res.text, ACK_MARKER + frames.join(''));
    for (const chunk of res.chunks) assert.ok(chunk.endsWith('\n\n'), 'no frame is split across writes');
    assert.deepEqual(
      res.messages().map((m) => m.params.uri),
      uris,
    );
    assert.deepEqual(res.violations, []);
    await hub.close();
  });

  test('an early write that fills the socket sends the rest of the burst to the queue, written after drain', async () => {
    const hub = newHub();
    const res = new FakeResponse();
    const uris = bigUris();
    openStream(hub, res, { filter: { resourceSubscriptions: uris } });
    res.accept = false;
    const reports = uris.map((uri) => hub.resourceUpdated(uri));
    const written = reports.filter((r) => r.written === 1).length;
    assert.ok(written > 0 && written < uris.length);
    // The frames up to the bound were written as one batch; every one after it was queued.
    assert.deepEqual(reports.slice(written), Array(uris.length - written).fill(report({ matched: 1, queued: 1 })));
    assert.deepEqual(res.chunks, [
      ACK_MARKER,
      uris
        .slice(0, written)
        .map((uri) => updateFrame(uri))
        .join(''),
    ]);
    assert.ok(res.chunks[1]!.length >= PENDING_FLUSH_CHARS);
    assert.equal(res.listenerCount('drain'), 1);

    await settle();
    assert.equal(res.chunks.length, 2, 'nothing is written until drain');
    assert.equal(hub.stats().queued, uris.length - written);

    res.drain();
    assert.equal(res.text, ACK_MARKER + uris.map((uri) => updateFrame(uri)).join(''));
    assert.equal(hub.stats().queued, 0);
    assert.equal(hub.stats().written, uris.length);
    await settle();
    assert.deepEqual(res.violations, []);
    await hub.close();
  });

  test('complete() in the same tick as a burst writes the batch, then the terminal result', async () => {
    const hub = newHub();
    const res = new FakeResponse();
    const uris = ['note://1', 'note://2', 'note://3'];
    openStream(hub, res, { filter: { resourceSubscriptions: uris } });
    for (const uri of uris) hub.resourceUpdated(uri);
    assert.deepEqual(res.chunks, [ACK_MARKER]);
    const completed = hub.complete();
    assert.deepEqual(res.chunks, [ACK_MARKER, uris.map((uri) => updateFrame(uri)).join(''), RESULT_MARKER]);
    assert.equal(res.writableEnded, true);
    await completed;
    await settle(); // the end-of-tick flush finds nothing left, and writes nothing after the end
    assert.equal(res.chunks.length, 3);
    assert.deepEqual(res.violations, []);
    assert.equal(hub.stats().closed.complete, 1);
    assert.equal(hub.stats().written, 3);
    await hub.close();
  });

  test('complete() in the same tick as a burst that fills the socket writes the result after drain', async () => {
    const hub = newHub();
    const res = new FakeResponse();
    const uris = ['note://1', 'note://2', 'note://3'];
    openStream(hub, res, { filter: { resourceSubscriptions: uris } });
    res.accept = false;
    for (const uri of uris) hub.resourceUpdated(uri);
    let done = false;
    const completed = hub.complete().then(() => (done = true));
    const batch = uris.map((uri) => updateFrame(uri)).join('');
    assert.deepEqual(res.chunks, [ACK_MARKER, batch]);
    await settle();
    assert.equal(done, false);
    assert.equal(res.writableEnded, false);
    assert.deepEqual(res.chunks, [ACK_MARKER, batch], 'nothing more until drain');
    res.drain();
    await completed;
    assert.deepEqual(res.chunks, [ACK_MARKER, batch, RESULT_MARKER]);
    assert.equal(res.writableEnded, true);
    await settle();
    assert.deepEqual(res.violations, []);
    await hub.close();
  });

  test('a client that never reads the batch written by a graceful end is cut off after completeTimeoutMs', async (t) => {
    fakeTimers(t);
    const hub = newHub({ completeTimeoutMs: 500 });
    const res = new FakeResponse();
    openStream(hub, res, { filter: { toolsListChanged: true } });
    res.accept = false;
    hub.toolsListChanged();
    let done = false;
    const closing = hub.close().then(() => (done = true));
    assert.deepEqual(res.chunks, [ACK_MARKER, toolsFrame()]); // the batch, refused by the full socket
    t.mock.timers.tick(499);
    await settle();
    assert.equal(done, false);
    t.mock.timers.tick(1);
    await closing;
    assert.equal(res.destroyed, true);
    assert.equal(res.writableEnded, false);
    assert.deepEqual(res.chunks, [ACK_MARKER, toolsFrame()], 'no terminal result');
    assert.equal(hub.stats().cutOff, 1);
    assert.deepEqual(res.violations, []);
  });

  test('a hang-up or cancellation in the same tick as a burst writes nothing more', async () => {
    const hub = newHub();
    const hungUp = new FakeResponse();
    const cancelled = new FakeResponse();
    const other = new FakeResponse();
    const uris = ['note://1', 'note://2', 'note://3'];
    openStream(hub, hungUp, { id: 'h', filter: { resourceSubscriptions: uris } });
    openStream(hub, cancelled, { id: 'c', filter: { resourceSubscriptions: uris } });
    openStream(hub, other, { id: 'o', filter: { resourceSubscriptions: uris } });
    for (const uri of uris) assert.equal(hub.resourceUpdated(uri).written, 3);
    hungUp.clientClose();
    assert.equal(hub.cancel('alice', 'c'), 1);
    await settle();
    // A write after the hang-up would show as a violation, one after destroy() too.
    assert.deepEqual(hungUp.chunks, [ACK_MARKER]);
    assert.deepEqual(hungUp.violations, []);
    assert.deepEqual(cancelled.chunks, [ACK_MARKER]);
    assert.deepEqual(cancelled.violations, []);
    assert.equal(cancelled.destroyed, true);
    // The stream still open got its batch at the end of that same tick.
    assert.deepEqual(other.chunks, [ACK_MARKER, uris.map((uri) => updateFrame(uri, 'o')).join('')]);
    const stats = hub.stats();
    assert.equal(stats.closed.client, 1);
    assert.equal(stats.closed.cancelled, 1);
    assert.equal(stats.openStreams, 1);
    await hub.close();
  });

  test('when the batch fills the socket, later events queue and coalesce, and follow the batch after drain', async () => {
    const hub = newHub();
    const res = new FakeResponse();
    openStream(hub, res, { filter: { toolsListChanged: true, resourceSubscriptions: ['note://a', 'note://b'] } });
    res.accept = false;
    assert.deepEqual(hub.resourceUpdated('note://a'), report({ matched: 1, written: 1 }));
    assert.deepEqual(hub.resourceUpdated('note://b'), report({ matched: 1, written: 1 }));
    assert.equal(res.listenerCount('drain'), 0, 'nothing written yet, so nothing pushed back yet');
    await Promise.resolve();
    const batch = updateFrame('note://a') + updateFrame('note://b');
    assert.deepEqual(res.chunks, [ACK_MARKER, batch]); // this write returned false
    assert.equal(res.listenerCount('drain'), 1);

    assert.deepEqual(hub.toolsListChanged(), report({ matched: 1, queued: 1 }));
    assert.deepEqual(hub.resourceUpdated('note://b'), report({ matched: 1, queued: 1 }));
    assert.deepEqual(hub.toolsListChanged(), report({ matched: 1, coalesced: 1 }));
    // The same URI as a frame of the batch: the batch is on the wire, not in the queue.
    assert.deepEqual(hub.resourceUpdated('note://a'), report({ matched: 1, queued: 1 }));
    await settle();
    assert.deepEqual(res.chunks, [ACK_MARKER, batch], 'nothing is written until drain');
    assert.equal(hub.stats().queued, 3);
    assert.equal(res.listenerCount('drain'), 1);

    res.drain();
    assert.deepEqual(res.chunks, [
      ACK_MARKER,
      batch,
      toolsFrame() + updateFrame('note://b') + updateFrame('note://a'), // the queue, one write
    ]);
    assert.equal(res.listenerCount('drain'), 0);
    const stats = hub.stats();
    assert.equal(stats.queued, 0);
    assert.equal(stats.written, 5);
    assert.equal(stats.coalesced, 1);

    // Drained, the stream batches again.
    hub.toolsListChanged();
    assert.equal(res.chunks.length, 3);
    await Promise.resolve();
    assert.deepEqual(res.chunks.slice(3), [toolsFrame()]);
    assert.deepEqual(res.violations, []);
    await hub.close();
  });
});
