/**
 * One listen response (ListenStream, opened through the hub): headers, the ack first, backpressure,
 * keepalives under fake timers, exactly-once teardown, graceful end and its cut-off.
 */
import { afterEach, describe, expect, jest, test } from '@jest/globals';
import diagnostics from 'node:diagnostics_channel';
import { DiagnosticsChannel, SubscriptionHub, type StreamCloseMessage } from 'mcp-subscriptions';
import { hubEngine } from '../../lib/internal.ts';
import {
  ACK_MARKER,
  FakeResponse,
  openStream,
  recordingLogger,
  report,
  RESULT_MARKER,
  settle,
  ThrowingResponse,
} from '../helpers/fake-response.ts';
import { createListenHandler } from '../../lib/internal.ts';
import { listenBody, listenHeaders } from '../helpers/sse.ts';

const KEEPALIVE = ': keepalive\n\n';

function newHub(options: ConstructorParameters<typeof SubscriptionHub>[0] = {}) {
  return new SubscriptionHub({ logger: recordingLogger(), ...options });
}

/** What `jest.useFakeTimers` can fake (the modern, @sinonjs/fake-timers implementation). */
type FakeableAPI = NonNullable<
  Extract<NonNullable<Parameters<typeof jest.useFakeTimers>[0]>, { legacyFakeTimers?: false }>['doNotFake']
>[number];

/** The timers these tests fake: setInterval and setTimeout, with their clear* counterparts. */
type Faked = 'setInterval' | 'clearInterval' | 'setTimeout' | 'clearTimeout';

/**
 * Everything else jest would fake stays real: Date, process.nextTick, setImmediate (settle() turns the
 * event loop with it), queueMicrotask (the end-of-tick flush), performance, hrtime... A Record, so tsc
 * names any fakeable API a later jest adds that this list does not.
 */
const NOT_FAKED: Record<Exclude<FakeableAPI, Faked>, true> = {
  Date: true,
  hrtime: true,
  nextTick: true,
  performance: true,
  queueMicrotask: true,
  requestAnimationFrame: true,
  cancelAnimationFrame: true,
  requestIdleCallback: true,
  cancelIdleCallback: true,
  setImmediate: true,
  clearImmediate: true,
  Temporal: true,
};

function fakeTimers(): void {
  jest.useFakeTimers({ doNotFake: Object.keys(NOT_FAKED) as FakeableAPI[] });
}

afterEach(() => {
  jest.useRealTimers();
});

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

/** Enough URIs of about 1 KiB each that one burst of their updates passes PENDING_FLUSH_CHARS twice over. */
function bigUris(n = 40): string[] {
  return Array.from({ length: n }, (_, i) => `note://big/${i}/${'x'.repeat(1000)}`);
}

describe('opening', () => {
  test('writes status 200 and the SSE headers, disables Nagle, and writes the ack before anything else', async () => {
    const hub = newHub();
    const res = new FakeResponse();
    openStream(hub, res, { filter: { toolsListChanged: true } });
    expect(res.statusCode).toBe(200);
    expect(res.headers?.['Content-Type']).toBe('text/event-stream');
    expect(res.headers?.['Cache-Control']).toBe('no-cache, no-transform');
    expect(res.headers?.['X-Accel-Buffering']).toBe('no');
    expect(Object.keys(res.headers ?? {}).some((name) => name.toLowerCase() === 'mcp-session-id')).toBe(false);
    expect(res.noDelay).toBe(true);
    expect(res.chunks).toStrictEqual([ACK_MARKER]);
    hub.toolsListChanged();
    await settle(); // a tick's events reach a stream as one write, at the end of the tick
    expect(res.chunks[0]).toBe(ACK_MARKER);
    expect(res.chunks.length).toBe(2);
    await hub.close();
  });

  test('an event published while the ack is stuck in a full socket waits behind it', async () => {
    const hub = newHub();
    const res = new FakeResponse();
    res.accept = false;
    openStream(hub, res);
    hub.toolsListChanged();
    expect(res.chunks).toStrictEqual([ACK_MARKER]);
    res.drain();
    expect(res.chunks[0]).toBe(ACK_MARKER);
    expect(res.messages()[0].method).toBe('notifications/tools/list_changed');
    await hub.close();
  });
});

describe('backpressure', () => {
  test('after write() returns false nothing is written until drain; then the queue goes out in order', async () => {
    const hub = newHub();
    const res = new FakeResponse();
    const uris = Array.from({ length: 200 }, (_, i) => `note://n/${i}`);
    openStream(hub, res, { filter: { resourceSubscriptions: uris } });
    res.accept = false;
    expect(hub.resourceUpdated(uris[0]!).written).toBe(1);
    await settle(); // the tick's batch is written now: this write fills the socket
    const writesWhenFull = res.chunks.length;
    expect(writesWhenFull).toBe(2);
    for (const uri of uris.slice(1)) expect(hub.resourceUpdated(uri).queued).toBe(1);
    await settle(); // nothing is written at the end of the tick either
    expect(res.chunks.length).toBe(writesWhenFull);

    // The socket drains but fills again on the first flush write: the stream must wait again.
    res.accept = false;
    res.emit('drain');
    const afterFirstFlush = res.chunks.length;
    expect(afterFirstFlush).toBeGreaterThan(writesWhenFull);
    expect(hub.resourceUpdated(uris[0]!).queued).toBe(1); // arrives while blocked again: queued behind the rest
    await settle();
    // no write while the socket is full
    expect(res.chunks.length).toBe(afterFirstFlush);

    res.drain();
    const delivered = res.messages().map((m) => m.params.uri);
    expect(delivered).toStrictEqual([...uris, uris[0]]);
    expect(hub.stats().queued).toBe(0);
    expect(hub.stats().written).toBe(201);
    expect(res.violations).toStrictEqual([]);
    await hub.close();
  });

  test('one drain listener for the stream’s life however many times the socket fills; none once it ends', async () => {
    const hub = newHub();
    const res = new FakeResponse();
    openStream(hub, res, { filter: { toolsListChanged: true } });
    expect(res.listenerCount('drain')).toBe(1);
    for (let i = 0; i < 5; i++) {
      res.accept = false;
      hub.toolsListChanged();
      await settle(); // the tick's batch is written now, and fills the socket
      expect(hub.toolsListChanged().queued).toBe(1); // while full: queued, no second listener
      await settle();
      expect(res.listenerCount('drain')).toBe(1);
      res.drain();
      expect(res.listenerCount('drain')).toBe(1);
      expect(res.messages().at(-1)?.method).toBe('notifications/tools/list_changed'); // the queue went out
    }
    await hub.close();
    expect(res.listenerCount('drain')).toBe(0);
  });
});

describe('stalled streams', () => {
  /** StreamClose diagnostics published until `stop()`. */
  function closeMessages(): { messages: StreamCloseMessage[]; stop: () => void } {
    const messages: StreamCloseMessage[] = [];
    const onMessage = (message: unknown): void => void messages.push(message as StreamCloseMessage);
    diagnostics.subscribe(DiagnosticsChannel.StreamClose, onMessage);
    return { messages, stop: () => diagnostics.unsubscribe(DiagnosticsChannel.StreamClose, onMessage) };
  }

  test('a stream that accepts no byte for stallTimeoutMs is closed as stalled: counted, published, its socket destroyed', async () => {
    fakeTimers();
    const hub = newHub({ stallTimeoutMs: 1000 });
    const close = closeMessages();
    try {
      const res = new FakeResponse();
      openStream(hub, res, { principal: 'alice', filter: { resourceSubscriptions: ['note://a', 'note://b'] } });
      res.accept = false;
      hub.resourceUpdated('note://a');
      await settle(); // the tick's batch is written now, and fills the socket: the stall clock starts
      expect(hub.resourceUpdated('note://b').queued).toBe(1);
      jest.advanceTimersByTime(999);
      expect(hub.stats().openStreams).toBe(1);
      expect(res.destroyed).toBe(false);
      jest.advanceTimersByTime(1);
      const stats = hub.stats();
      expect(stats.openStreams).toBe(0);
      expect(stats.closed.stalled).toBe(1);
      expect(stats.queued).toBe(0);
      expect(stats.dropped).toBe(1); // the queued update it will never read
      expect(res.destroyed).toBe(true);
      expect(res.text.includes(RESULT_MARKER)).toBe(false); // nothing more is written to a client that does not read
      expect(res.listenerCount('drain')).toBe(0);
      expect(jest.getTimerCount()).toBe(0);
      expect(close.messages).toStrictEqual([
        {
          principal: 'alice',
          reason: 'stalled',
          filter: {
            toolsListChanged: false,
            promptsListChanged: false,
            resourcesListChanged: false,
            resourceSubscriptions: 2,
            taskIds: 0,
          },
        },
      ]);
      // Its slot is free at once.
      expect(hub.resourceUpdated('note://a')).toStrictEqual(report({}));
      expect(res.violations).toStrictEqual([]);
    } finally {
      close.stop();
      await hub.close();
    }
  });

  test('a stream that drains before the timeout stays open and receives the latest state of all it follows', async () => {
    fakeTimers();
    const hub = newHub({ stallTimeoutMs: 1000 });
    const res = new FakeResponse();
    const uris = ['note://a', 'note://b', 'note://c'];
    openStream(hub, res, { filter: { toolsListChanged: true, resourceSubscriptions: uris } });
    res.accept = false;
    hub.toolsListChanged();
    await settle(); // fills the socket
    for (const uri of uris) hub.resourceUpdated(uri);
    hub.toolsListChanged();
    jest.advanceTimersByTime(999);
    res.drain();
    jest.advanceTimersByTime(10_000); // the lapsed clock closes nothing once the socket drained
    expect(hub.stats().openStreams).toBe(1);
    expect(hub.stats().closed.stalled).toBe(0);
    expect(res.messages().map((m) => m.params.uri ?? m.method)).toStrictEqual([
      'notifications/tools/list_changed',
      ...uris,
      'notifications/tools/list_changed',
    ]);
    // Blocked again later: the clock starts afresh at the new block, not at the first one.
    res.accept = false;
    hub.toolsListChanged();
    await settle();
    jest.advanceTimersByTime(999);
    expect(hub.stats().openStreams).toBe(1);
    jest.advanceTimersByTime(1);
    expect(hub.stats().closed.stalled).toBe(1);
    expect(res.violations).toStrictEqual([]);
    await hub.close();
  });

  test('one stall timer per stream however often the socket fills: none per write', async () => {
    fakeTimers();
    const hub = newHub({ stallTimeoutMs: 1000 });
    const res = new FakeResponse();
    openStream(hub, res, { filter: { toolsListChanged: true } });
    for (let i = 0; i < 100; i++) hub.toolsListChanged();
    await settle();
    expect(jest.getTimerCount()).toBe(0); // a stream that keeps up holds no timer at all
    for (let i = 0; i < 5; i++) {
      res.accept = false;
      hub.toolsListChanged();
      await settle(); // fills the socket
      expect(jest.getTimerCount()).toBe(1);
      jest.advanceTimersByTime(500);
      res.drain();
    }
    expect(jest.getTimerCount()).toBe(1);
    expect(hub.stats().openStreams).toBe(1);
    await hub.close();
    expect(jest.getTimerCount()).toBe(0);
  });

  test('stallTimeoutMs defaults to 60000; false keeps a blocked stream open for ever', async () => {
    fakeTimers();
    const byDefault = newHub();
    expect(byDefault.options.stallTimeoutMs).toBe(60_000);
    const off = newHub({ stallTimeoutMs: false });
    const a = new FakeResponse();
    const b = new FakeResponse();
    a.accept = false;
    b.accept = false;
    openStream(byDefault, a);
    openStream(off, b);
    jest.advanceTimersByTime(59_999);
    expect(byDefault.stats().openStreams).toBe(1);
    jest.advanceTimersByTime(1);
    expect(byDefault.stats().closed.stalled).toBe(1);
    jest.advanceTimersByTime(24 * 3600_000);
    expect(off.stats().openStreams).toBe(1);
    expect(jest.getTimerCount()).toBe(0);
    await byDefault.close();
    const closing = off.close();
    b.drain();
    await closing;
  });

  test('a graceful end under way is bounded by completeTimeoutMs, not cut short as stalled', async () => {
    fakeTimers();
    const hub = newHub({ stallTimeoutMs: 100, completeTimeoutMs: 1000 });
    const res = new FakeResponse();
    res.accept = false;
    openStream(hub, res);
    const closing = hub.close();
    jest.advanceTimersByTime(500);
    expect(res.destroyed).toBe(false);
    res.drain();
    await closing;
    expect(res.text.endsWith(RESULT_MARKER)).toBe(true);
    expect(hub.stats().closed).toMatchObject({ complete: 1, stalled: 0 });
  });
});

describe('keepalive', () => {
  test('writes a keepalive comment every keepAliveMs', async () => {
    fakeTimers();
    const hub = newHub();
    const res = new FakeResponse();
    openStream(hub, res, { keepAliveMs: 1000 });
    jest.advanceTimersByTime(999);
    expect(count(res.text, KEEPALIVE)).toBe(0);
    jest.advanceTimersByTime(1);
    expect(res.text).toBe(ACK_MARKER + KEEPALIVE);
    jest.advanceTimersByTime(2000);
    expect(count(res.text, KEEPALIVE)).toBe(3);
    expect(res.comments()).toStrictEqual(['test-ack', 'keepalive', 'keepalive', 'keepalive']);
    res.clientClose();
    await hub.close();
  });

  test('no keepalive is written while the socket is full', async () => {
    fakeTimers();
    const hub = newHub();
    const res = new FakeResponse();
    res.accept = false;
    openStream(hub, res, { keepAliveMs: 100 });
    jest.advanceTimersByTime(1000);
    expect(count(res.text, KEEPALIVE)).toBe(0);
    res.drain();
    jest.advanceTimersByTime(100);
    expect(count(res.text, KEEPALIVE)).toBe(1);
    res.clientClose();
    await hub.close();
  });

  test('keepAliveMs: false writes none', async () => {
    fakeTimers();
    const hub = newHub();
    const res = new FakeResponse();
    openStream(hub, res, { keepAliveMs: false });
    jest.advanceTimersByTime(24 * 3600 * 1000);
    expect(res.text).toBe(ACK_MARKER);
    res.clientClose();
    await hub.close();
  });

  test('keepalives stop once the stream ends, whichever way it ends', async () => {
    fakeTimers();
    const hub = newHub();
    const closedByClient = new FakeResponse();
    const cancelled = new FakeResponse();
    const completed = new FakeResponse();
    openStream(hub, closedByClient, { id: 1, keepAliveMs: 10 });
    openStream(hub, cancelled, { id: 2, keepAliveMs: 10 });
    openStream(hub, completed, { id: 3, keepAliveMs: 10 });
    closedByClient.clientClose();
    hubEngine(hub).cancel('alice', 2);
    await hub.complete();
    const lengths = [closedByClient, cancelled, completed].map((res) => res.text.length);
    jest.advanceTimersByTime(10_000);
    expect([closedByClient, cancelled, completed].map((res) => res.text.length)).toStrictEqual(lengths);
    for (const res of [closedByClient, cancelled, completed]) expect(res.violations).toStrictEqual([]);
    await hub.close();
  });

  test('streams sharing one keepalive period share one timer: a later stream gets its first keepalive within the period, and the timer goes with the last stream', async () => {
    fakeTimers();
    const hub = newHub();
    const first = new FakeResponse();
    const second = new FakeResponse();
    const other = new FakeResponse();
    openStream(hub, first, { id: 1, keepAliveMs: 1000 });
    jest.advanceTimersByTime(600);
    openStream(hub, second, { id: 2, keepAliveMs: 1000 });
    openStream(hub, other, { id: 3, keepAliveMs: 250 });
    expect(jest.getTimerCount()).toBe(2); // one clock per period, not one timer per stream
    jest.advanceTimersByTime(400); // t = 1000: the clock ticks for both, 400 ms after the second opened
    expect([first, second].map((res) => count(res.text, KEEPALIVE))).toStrictEqual([1, 1]);
    expect(count(other.text, KEEPALIVE)).toBe(1); // t = 850
    jest.advanceTimersByTime(1000);
    expect([first, second].map((res) => count(res.text, KEEPALIVE))).toStrictEqual([2, 2]);
    expect(count(other.text, KEEPALIVE)).toBe(5);
    first.clientClose();
    jest.advanceTimersByTime(1000);
    expect([first, second].map((res) => count(res.text, KEEPALIVE))).toStrictEqual([2, 3]);
    second.clientClose();
    other.clientClose();
    expect(jest.getTimerCount()).toBe(0);
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
    expect(hub.stats().queued).toBe(2);

    res.clientClose();
    let stats = hub.stats();
    expect(stats.openStreams).toBe(0);
    expect(stats.queued).toBe(0);
    expect(stats.principals).toBe(0);
    expect(stats.maxOpenPerPrincipal).toBe(0);
    expect(stats.listening).toStrictEqual({
      toolsListChanged: 0,
      promptsListChanged: 0,
      resourcesListChanged: 0,
      resourceUris: 0,
      taskIds: 0,
    });
    expect(stats.closed.client).toBe(1);
    expect(res.listenerCount('close')).toBe(0);
    expect(res.listenerCount('drain')).toBe(0);

    // Every later path finds it already gone.
    res.emit('close');
    res.emit('drain');
    expect(hubEngine(hub).cancel('alice', 'sub-1')).toBe(0);
    await hub.complete();
    stats = hub.stats();
    expect(stats.closed.client).toBe(1);
    expect(stats.closed.complete).toBe(0);
    expect(res.text).toBe(ACK_MARKER);
    expect(res.violations).toStrictEqual([]);

    // The freed slot is reusable at once.
    openStream(hub, new FakeResponse(), { id: 'again' });
    expect(hub.stats().openStreams).toBe(1);
    await hub.close();
  });

  test('a cancelled stream writes nothing more and is destroyed', async () => {
    const hub = newHub();
    const res = new FakeResponse();
    openStream(hub, res, { id: 'L', filter: { toolsListChanged: true } });
    expect(hubEngine(hub).cancel('alice', 'L')).toBe(1);
    expect(res.destroyed).toBe(true);
    expect(hub.toolsListChanged()).toStrictEqual({
      matched: 0,
      written: 0,
      queued: 0,
      coalesced: 0,
    });
    await settle(); // the response's own 'close' arrives later and must be harmless
    expect(res.text).toBe(ACK_MARKER);
    expect(hub.stats().closed.cancelled).toBe(1);
    expect(res.violations).toStrictEqual([]);
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
    expect(res.chunks[0]).toBe(ACK_MARKER);
    expect(res.chunks.at(-1)).toBe(RESULT_MARKER);
    expect(res.writableEnded).toBe(true);
    expect(res.destroyed).toBe(false);
    expect(hub.stats().closed.complete).toBe(1);
    await settle();
    expect(res.violations).toStrictEqual([]);
    await hub.close();
  });

  test('a graceful end waits for drain, then writes the queue and the result', async () => {
    fakeTimers();
    const hub = newHub({ completeTimeoutMs: 500 });
    const res = new FakeResponse();
    res.accept = false;
    openStream(hub, res, { filter: { toolsListChanged: true } });
    hub.toolsListChanged();
    let done = false;
    const completed = hub.complete().then(() => (done = true));
    jest.advanceTimersByTime(499);
    await settle();
    expect(done).toBe(false);
    expect(res.writableEnded).toBe(false);
    res.drain();
    await completed;
    expect(res.messages()[0].method).toBe('notifications/tools/list_changed');
    expect(res.text.endsWith(RESULT_MARKER)).toBeTruthy();
    await hub.close();
  });

  test('a client that never reads is cut off after completeTimeoutMs, without the result', async () => {
    fakeTimers();
    const hub = newHub({ completeTimeoutMs: 500 });
    const res = new FakeResponse();
    res.accept = false;
    openStream(hub, res, { filter: { toolsListChanged: true } });
    hub.toolsListChanged();
    let done = false;
    const closing = hub.close().then(() => (done = true));
    await settle();
    expect(done).toBe(false);
    jest.advanceTimersByTime(500);
    await closing;
    expect(res.destroyed).toBe(true);
    expect(res.text).toBe(ACK_MARKER);
    expect(hub.stats().openStreams).toBe(0);
    expect(res.violations).toStrictEqual([]);
  });

  test('a client that hangs up during a graceful end finishes it', async () => {
    const hub = newHub();
    const res = new FakeResponse();
    res.accept = false;
    openStream(hub, res);
    const completed = hub.complete();
    res.clientClose();
    await completed;
    expect(res.text).toBe(ACK_MARKER);
    expect(res.violations).toStrictEqual([]);
    await hub.close();
  });

  test('an empty honoured filter is acknowledged and then completed at once', async () => {
    const hub = newHub();
    const res = new FakeResponse();
    const stream = openStream(hub, res, { filter: {}, keepAliveMs: 10 });
    expect(stream.isOpen).toBe(false);
    expect(res.text).toBe(ACK_MARKER + RESULT_MARKER);
    expect(res.writableEnded).toBe(true);
    await settle();
    expect(res.violations).toStrictEqual([]);
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
    for (const uri of uris) expect(hub.resourceUpdated(uri)).toStrictEqual(report({ matched: 2, written: 2 }));
    // nothing is written synchronously
    expect(a.chunks).toStrictEqual([ACK_MARKER]);
    // nothing is written synchronously
    expect(b.chunks).toStrictEqual([ACK_MARKER]);

    await Promise.resolve(); // one microtask: the end of the tick
    expect(a.chunks).toStrictEqual([ACK_MARKER, uris.map((uri) => updateFrame(uri, 'a')).join('')]);
    expect(b.chunks).toStrictEqual([ACK_MARKER, uris.map((uri) => updateFrame(uri, 7)).join('')]);
    expect(hub.stats().written).toBe(100);

    // Events published after that flush make the next batch, and the next write.
    hub.resourceUpdated(uris[0]!);
    hub.resourceUpdated(uris[1]!);
    expect(a.chunks.length).toBe(2);
    await Promise.resolve();
    expect(a.chunks.slice(2)).toStrictEqual([updateFrame(uris[0]!, 'a') + updateFrame(uris[1]!, 'a')]);
    await settle();
    // one write per tick, not one more
    expect(a.chunks.length).toBe(3);
    expect(a.violations).toStrictEqual([]);
    expect(b.violations).toStrictEqual([]);
    await hub.close();
  });

  test('a burst beyond 16 KiB is written early, in whole frames, with every byte in order', async () => {
    const hub = newHub();
    const res = new FakeResponse();
    const uris = bigUris();
    const frames = uris.map((uri) => updateFrame(uri));
    const longestFrame = Math.max(...frames.map((frame) => frame.length));
    expect(frames.join('').length).toBeGreaterThan(2 * PENDING_FLUSH_CHARS);
    openStream(hub, res, { filter: { resourceSubscriptions: uris } });
    for (const uri of uris) expect(hub.resourceUpdated(uri)).toStrictEqual(report({ matched: 1, written: 1 }));

    // Written before the end of the tick, each early write as soon as the batch reached the bound.
    const early = res.chunks.slice(1);
    // a batch that reaches 16 KiB is written before the end of the tick
    expect(early.length).toBeGreaterThanOrEqual(1);
    for (const chunk of early) {
      expect(chunk.length).toBeGreaterThanOrEqual(PENDING_FLUSH_CHARS);
      expect(chunk.length).toBeLessThan(PENDING_FLUSH_CHARS + longestFrame);
    }

    await Promise.resolve(); // the rest goes out at the end of the tick
    expect(res.chunks.length).toBe(early.length + 2);
    expect(res.text).toBe(ACK_MARKER + frames.join(''));
    // no frame is split across writes
    for (const chunk of res.chunks) expect(chunk.endsWith('\n\n')).toBeTruthy();
    expect(res.messages().map((m) => m.params.uri)).toStrictEqual(uris);
    expect(res.violations).toStrictEqual([]);
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
    expect(written).toBeGreaterThan(0);
    expect(written).toBeLessThan(uris.length);
    // The frames up to the bound were written as one batch; every one after it was queued.
    expect(reports.slice(written)).toStrictEqual(Array(uris.length - written).fill(report({ matched: 1, queued: 1 })));
    expect(res.chunks).toStrictEqual([
      ACK_MARKER,
      uris
        .slice(0, written)
        .map((uri) => updateFrame(uri))
        .join(''),
    ]);
    expect(res.chunks[1]!.length).toBeGreaterThanOrEqual(PENDING_FLUSH_CHARS);
    expect(res.listenerCount('drain')).toBe(1);

    await settle();
    // nothing is written until drain
    expect(res.chunks.length).toBe(2);
    expect(hub.stats().queued).toBe(uris.length - written);

    res.drain();
    expect(res.text).toBe(ACK_MARKER + uris.map((uri) => updateFrame(uri)).join(''));
    expect(hub.stats().queued).toBe(0);
    expect(hub.stats().written).toBe(uris.length);
    await settle();
    expect(res.violations).toStrictEqual([]);
    await hub.close();
  });

  test('after drain the queue goes out in writes of at most 16 KiB and a frame: a refused write holds no more', async () => {
    const hub = newHub();
    const res = new FakeResponse();
    const uris = bigUris();
    const frames = uris.map((uri) => updateFrame(uri));
    const longestFrame = Math.max(...frames.map((frame) => frame.length));
    openStream(hub, res, { filter: { resourceSubscriptions: uris } });
    res.accept = false;
    hub.resourceUpdated(uris[0]!);
    await settle(); // this write fills the socket
    for (const uri of uris.slice(1)) expect(hub.resourceUpdated(uri).queued).toBe(1);
    expect(frames.slice(1).join('').length).toBeGreaterThan(2 * PENDING_FLUSH_CHARS);

    // The socket drains once and refuses the next write: that write is all a stopped reader's
    // connection holds in the server besides the queue, so it is bounded like a tick's batch.
    res.emit('drain');
    const refused = res.chunks.slice(2);
    expect(refused.length).toBe(1);
    expect(refused[0]!.length).toBeGreaterThanOrEqual(PENDING_FLUSH_CHARS);
    expect(refused[0]!.length).toBeLessThan(PENDING_FLUSH_CHARS + longestFrame);
    expect(hub.stats().queued).toBeGreaterThan(0); // the rest waits for the next drain

    res.drain();
    expect(res.text).toBe(ACK_MARKER + frames.join(''));
    for (const chunk of res.chunks.slice(2)) {
      expect(chunk.length).toBeLessThan(PENDING_FLUSH_CHARS + longestFrame);
      expect(chunk.endsWith('\n\n')).toBe(true); // whole frames only
    }
    expect(hub.stats().queued).toBe(0);
    expect(res.violations).toStrictEqual([]);
    await hub.close();
  });

  test('complete() in the same tick as a burst writes the batch, then the terminal result', async () => {
    const hub = newHub();
    const res = new FakeResponse();
    const uris = ['note://1', 'note://2', 'note://3'];
    openStream(hub, res, { filter: { resourceSubscriptions: uris } });
    for (const uri of uris) hub.resourceUpdated(uri);
    expect(res.chunks).toStrictEqual([ACK_MARKER]);
    const completed = hub.complete();
    expect(res.chunks).toStrictEqual([ACK_MARKER, uris.map((uri) => updateFrame(uri)).join(''), RESULT_MARKER]);
    expect(res.writableEnded).toBe(true);
    await completed;
    await settle(); // the end-of-tick flush finds nothing left, and writes nothing after the end
    expect(res.chunks.length).toBe(3);
    expect(res.violations).toStrictEqual([]);
    expect(hub.stats().closed.complete).toBe(1);
    expect(hub.stats().written).toBe(3);
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
    expect(res.chunks).toStrictEqual([ACK_MARKER, batch]);
    await settle();
    expect(done).toBe(false);
    expect(res.writableEnded).toBe(false);
    // nothing more until drain
    expect(res.chunks).toStrictEqual([ACK_MARKER, batch]);
    res.drain();
    await completed;
    expect(res.chunks).toStrictEqual([ACK_MARKER, batch, RESULT_MARKER]);
    expect(res.writableEnded).toBe(true);
    await settle();
    expect(res.violations).toStrictEqual([]);
    await hub.close();
  });

  test('a client that never reads the batch written by a graceful end is cut off after completeTimeoutMs', async () => {
    fakeTimers();
    const hub = newHub({ completeTimeoutMs: 500 });
    const res = new FakeResponse();
    openStream(hub, res, { filter: { toolsListChanged: true } });
    res.accept = false;
    hub.toolsListChanged();
    let done = false;
    const closing = hub.close().then(() => (done = true));
    expect(res.chunks).toStrictEqual([ACK_MARKER, toolsFrame()]); // the batch, refused by the full socket
    jest.advanceTimersByTime(499);
    await settle();
    expect(done).toBe(false);
    jest.advanceTimersByTime(1);
    await closing;
    expect(res.destroyed).toBe(true);
    expect(res.writableEnded).toBe(false);
    // no terminal result
    expect(res.chunks).toStrictEqual([ACK_MARKER, toolsFrame()]);
    expect(hub.stats().cutOff).toBe(1);
    expect(res.violations).toStrictEqual([]);
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
    for (const uri of uris) expect(hub.resourceUpdated(uri).written).toBe(3);
    hungUp.clientClose();
    expect(hubEngine(hub).cancel('alice', 'c')).toBe(1);
    await settle();
    // A write after the hang-up would show as a violation, one after destroy() too.
    expect(hungUp.chunks).toStrictEqual([ACK_MARKER]);
    expect(hungUp.violations).toStrictEqual([]);
    expect(cancelled.chunks).toStrictEqual([ACK_MARKER]);
    expect(cancelled.violations).toStrictEqual([]);
    expect(cancelled.destroyed).toBe(true);
    // The stream still open got its batch at the end of that same tick.
    expect(other.chunks).toStrictEqual([ACK_MARKER, uris.map((uri) => updateFrame(uri, 'o')).join('')]);
    const stats = hub.stats();
    expect(stats.closed.client).toBe(1);
    expect(stats.closed.cancelled).toBe(1);
    expect(stats.openStreams).toBe(1);
    await hub.close();
  });

  test('when the batch fills the socket, later events queue and coalesce, and follow the batch after drain', async () => {
    const hub = newHub();
    const res = new FakeResponse();
    openStream(hub, res, { filter: { toolsListChanged: true, resourceSubscriptions: ['note://a', 'note://b'] } });
    res.accept = false;
    expect(hub.resourceUpdated('note://a')).toStrictEqual(report({ matched: 1, written: 1 }));
    expect(hub.resourceUpdated('note://b')).toStrictEqual(report({ matched: 1, written: 1 }));
    // nothing written yet, so nothing pushed back yet
    expect(hub.stats().queued).toBe(0);
    await Promise.resolve();
    const batch = updateFrame('note://a') + updateFrame('note://b');
    expect(res.chunks).toStrictEqual([ACK_MARKER, batch]); // this write returned false
    expect(res.listenerCount('drain')).toBe(1);

    expect(hub.toolsListChanged()).toStrictEqual(report({ matched: 1, queued: 1 }));
    expect(hub.resourceUpdated('note://b')).toStrictEqual(report({ matched: 1, queued: 1 }));
    expect(hub.toolsListChanged()).toStrictEqual(report({ matched: 1, coalesced: 1 }));
    // The same URI as a frame of the batch: the batch is on the wire, not in the queue.
    expect(hub.resourceUpdated('note://a')).toStrictEqual(report({ matched: 1, queued: 1 }));
    await settle();
    // nothing is written until drain
    expect(res.chunks).toStrictEqual([ACK_MARKER, batch]);
    expect(hub.stats().queued).toBe(3);
    expect(res.listenerCount('drain')).toBe(1);

    res.drain();
    expect(res.chunks).toStrictEqual([
      ACK_MARKER,
      batch,
      toolsFrame() + updateFrame('note://b') + updateFrame('note://a'), // the queue, one write
    ]);
    expect(hub.stats().queued).toBe(0);
    const stats = hub.stats();
    expect(stats.queued).toBe(0);
    expect(stats.written).toBe(5);
    expect(stats.coalesced).toBe(1);

    // Drained, the stream batches again.
    hub.toolsListChanged();
    expect(res.chunks.length).toBe(3);
    await Promise.resolve();
    expect(res.chunks.slice(3)).toStrictEqual([toolsFrame()]);
    expect(res.violations).toStrictEqual([]);
    await hub.close();
  });
});

describe('keepalive clocks, freed however a stream ends', () => {
  /** Opens a stream through the engine's handler (not the hub's reservations), with keepalives every `ms`. */
  async function listenWith(hub: SubscriptionHub, res: FakeResponse, id: string, ms: number): Promise<void> {
    const handler = createListenHandler({ hub, capabilities: { toolsListChanged: true }, keepAliveMs: ms });
    await handler.handle(
      { body: listenBody(id, { toolsListChanged: true }), headers: listenHeaders(), principal: 'alice', request: {} },
      res,
    );
    expect(res.messages()[0]?.method).toBe('notifications/subscriptions/acknowledged');
  }

  const endings: Record<string, (hub: SubscriptionHub, res: ThrowingResponse) => void | Promise<void>> = {
    'a hang-up': (_hub, res) => res.clientClose(),
    'a cancel': (hub) => {
      expect(hubEngine(hub).cancel('alice', 'first')).toBe(1);
    },
    'a write that throws': async (hub, res) => {
      res.armed = true;
      hub.toolsListChanged();
      await settle(); // the tick's batch is written now, and the write throws
    },
  };

  for (const [ending, end] of Object.entries(endings)) {
    test(`after ${ending}, no keepalive timer is left, and the next stream of that period starts a clock of its own`, async () => {
      fakeTimers();
      const hub = newHub();
      const first = new ThrowingResponse();
      await listenWith(hub, first, 'first', 1000);
      expect(jest.getTimerCount()).toBe(1);
      jest.advanceTimersByTime(600);
      await end(hub, first);
      expect(hub.stats().openStreams).toBe(0);
      // First check: the clock's timer is gone.
      expect(jest.getTimerCount()).toBe(0);
      // Second check, by behaviour: a stream opened now (t = 600) is not put on the old clock (which
      // would tick at t = 1000); its own clock gives it its first keepalive a full period later.
      const second = new FakeResponse();
      await listenWith(hub, second, 'second', 1000);
      jest.advanceTimersByTime(999);
      expect(count(second.text, KEEPALIVE)).toBe(0);
      jest.advanceTimersByTime(1);
      expect(count(second.text, KEEPALIVE)).toBe(1);
      expect(count(first.text, KEEPALIVE)).toBe(0);
      second.clientClose();
      expect(jest.getTimerCount()).toBe(0);
      await hub.close();
    });
  }

  test('an acknowledgement whose write throws starts no keepalive clock', async () => {
    fakeTimers();
    const hub = newHub();
    const stream = openStream(hub, new ThrowingResponse(true), { keepAliveMs: 1000 });
    expect(stream.isOpen).toBe(false);
    expect(jest.getTimerCount()).toBe(0);
    await hub.close();
  });

  test('a write that throws closes its stream as failed, and only that one', async () => {
    fakeTimers();
    const hub = newHub();
    const broken = new ThrowingResponse();
    const healthy = new FakeResponse();
    await listenWith(hub, broken, 'first', 1000);
    await listenWith(hub, healthy, 'other', 1000);
    broken.armed = true;
    hub.toolsListChanged();
    await settle();
    expect(hub.stats().closed.failed).toBe(1);
    expect(hub.stats().openStreams).toBe(1);
    expect(broken.destroyed).toBe(true);
    jest.advanceTimersByTime(1000);
    expect(count(healthy.text, KEEPALIVE)).toBe(1);
    expect(jest.getTimerCount()).toBe(1); // the clock the healthy stream still needs
    healthy.clientClose();
    expect(jest.getTimerCount()).toBe(0);
    await hub.close();
  });
});
