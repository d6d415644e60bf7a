/**
 * Streams that end on purpose: `maxStreamDurationMs` (its validation, the jitter's range, the hub's one
 * clock) and `hub.drain({ overMs })` (its validation, the refusals while it runs, the spreading of the
 * ends, idempotence, `close()` during it). Fake responses and fake timers: no socket.
 */
import { afterEach, describe, expect, jest, test } from '@jest/globals';
import { fc, test as propTest } from '@fast-check/jest';
import { ErrorCode, SubscriptionHub } from 'mcp-subscriptions';
import {
  createListenHandler,
  hubEngine,
  refusalHeaders,
  refusalStatus,
  type ProtocolError,
} from '../../lib/internal.ts';
import { lifetimeTickMs, streamLifetimeMs } from '../../lib/listen-stream.ts';
import { FakeResponse, openStream, recordingLogger, RESULT_MARKER, settle } from '../helpers/fake-response.ts';
import { thrown } from '../helpers/assert.ts';
import { optionsErrorOf } from '../helpers/options.ts';
import { listenBody, listenHeaders } from '../helpers/sse.ts';

function newHub(options: ConstructorParameters<typeof SubscriptionHub>[0] = {}): SubscriptionHub {
  return new SubscriptionHub({ logger: recordingLogger(), ...options });
}

/**
 * Timers and the clock the lifetime clock and the drain read (`performance.now()`) are faked;
 * process.nextTick, setImmediate and queueMicrotask stay real, so that settle() still turns the loop.
 */
function fakeTimers(): void {
  jest.useFakeTimers({ doNotFake: ['nextTick', 'setImmediate', 'clearImmediate', 'queueMicrotask'] });
}

afterEach(() => {
  jest.useRealTimers();
  jest.restoreAllMocks();
});

/** Whether a fake response got its terminal result. */
const completed = (res: FakeResponse): boolean => res.writableEnded && res.text.endsWith(RESULT_MARKER);

/** Opens `count` streams on fake responses, ids `s0`, `s1`, … */
function openMany(hub: SubscriptionHub, count: number): FakeResponse[] {
  return Array.from({ length: count }, (_, i) => {
    const res = new FakeResponse();
    openStream(hub, res, { id: `s${i}`, principal: `p${i}` });
    return res;
  });
}

describe('maxStreamDurationMs: the option', () => {
  test('false and unset mean no limit; a duration is kept as given', () => {
    expect(newHub().options.maxStreamDurationMs).toBe(false);
    expect(newHub({ maxStreamDurationMs: false }).options.maxStreamDurationMs).toBe(false);
    expect(newHub({ maxStreamDurationMs: 600_000 }).options.maxStreamDurationMs).toBe(600_000);
  });

  test.each([
    [0, ErrorCode.NotPositiveInteger],
    [-1, ErrorCode.NotPositiveInteger],
    [1.5, ErrorCode.NotPositiveInteger],
    [Number.NaN, ErrorCode.NotPositiveInteger],
    ['60000', ErrorCode.NotPositiveInteger],
    [true, ErrorCode.NotPositiveInteger],
    [null, ErrorCode.NotPositiveInteger],
    [2 ** 31, ErrorCode.DurationTooLong],
  ])('%p is refused at construction, naming the field and that false turns it off', (value, code) => {
    const error = optionsErrorOf(() => newHub({ maxStreamDurationMs: value as never }));
    expect(error.code).toBe(code);
    expect(error.message).toContain('`maxStreamDurationMs`');
    expect(error.message).toContain('`false`');
  });

  test('a misspelt key is refused with the right one suggested', () => {
    const error = optionsErrorOf(() => newHub({ maxStreamDuration: 1000 } as never));
    expect(error.code).toBe(ErrorCode.UnknownOption);
    expect(error.message).toContain('maxStreamDurationMs');
  });
});

describe('maxStreamDurationMs: the jitter', () => {
  test('a lifetime runs from 0.75 to 1 times the limit, never past it', () => {
    expect(streamLifetimeMs(60_000, () => 0)).toBe(45_000);
    expect(streamLifetimeMs(60_000, () => 0.5)).toBe(52_500);
    // The largest draw may round up to the limit itself: never past it.
    expect(streamLifetimeMs(60_000, () => 1 - Number.EPSILON)).toBeLessThanOrEqual(60_000);
  });

  propTest.prop([
    fc.integer({ min: 1, max: 2_147_483_647 }),
    fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
  ])('every draw is within [0.75, 1] × the limit', (maxMs, draw) => {
    const ms = streamLifetimeMs(maxMs, () => draw);
    expect(ms).toBeGreaterThanOrEqual(0.75 * maxMs);
    expect(ms).toBeLessThanOrEqual(maxMs);
  });

  test('the clock ticks at 1 % of the limit, from 10 ms to 1 s', () => {
    expect(lifetimeTickMs(100)).toBe(10);
    expect(lifetimeTickMs(50_000)).toBe(500);
    expect(lifetimeTickMs(3_600_000)).toBe(1000);
  });
});

describe('maxStreamDurationMs: streams end gracefully, spread, from one clock', () => {
  test('each stream ends with its terminal result between 0.75 × the limit (less two ticks) and the limit, counted expired', async () => {
    fakeTimers();
    const maxMs = 10_000;
    const tick = lifetimeTickMs(maxMs);
    const count = 200;
    // Draws spread evenly over [0, 1), up to its largest value: the ends must follow them, and the
    // longest must still end within the limit.
    let draw = 0;
    jest.spyOn(Math, 'random').mockImplementation(() => Math.min(1 - Number.EPSILON, (draw++ % count) / (count - 1)));
    const hub = newHub({ maxStreamDurationMs: maxMs });
    const responses = openMany(hub, count);
    // One interval for the hub, none per stream.
    expect(jest.getTimerCount()).toBe(1);

    const endedAt = new Map<FakeResponse, number>();
    for (let elapsed = 0; elapsed <= maxMs; elapsed += tick) {
      await jest.advanceTimersByTimeAsync(tick);
      await settle();
      for (const res of responses) if (completed(res) && !endedAt.has(res)) endedAt.set(res, elapsed + tick);
    }
    expect(endedAt.size).toBe(count);
    for (const at of endedAt.values()) {
      expect(at).toBeGreaterThanOrEqual(0.75 * maxMs - 2 * tick);
      expect(at).toBeLessThanOrEqual(maxMs);
    }
    // Spread: the ends fall in many ticks, not one.
    expect(new Set(endedAt.values()).size).toBeGreaterThanOrEqual(20);
    expect(hub.stats().closed.expired).toBe(count);
    expect(hub.stats().openStreams).toBe(0);
    // The clock stopped with its last stream.
    expect(jest.getTimerCount()).toBe(0);
    await hub.close();
  });

  test('a stream that closes first leaves the clock: nothing holds it, and its end is not counted twice', async () => {
    fakeTimers();
    const hub = newHub({ maxStreamDurationMs: 1000 });
    const [early, late] = openMany(hub, 2) as [FakeResponse, FakeResponse];
    early.clientClose();
    await settle();
    expect(jest.getTimerCount()).toBe(1);
    await jest.advanceTimersByTimeAsync(1000);
    await settle();
    expect(completed(late)).toBe(true);
    expect(early.text.endsWith(RESULT_MARKER)).toBe(false);
    expect(hub.stats().closed).toMatchObject({ client: 1, expired: 1 });
    expect(jest.getTimerCount()).toBe(0);
    await hub.close();
  });

  test('unset, the hub keeps no timer at all for its streams', async () => {
    fakeTimers();
    const hub = newHub();
    openMany(hub, 10);
    expect(jest.getTimerCount()).toBe(0);
    await hub.close();
  });

  test('close() stops the clock', async () => {
    fakeTimers();
    const hub = newHub({ maxStreamDurationMs: 60_000 });
    openMany(hub, 3);
    await hub.close();
    await settle();
    expect(jest.getTimerCount()).toBe(0);
    expect(hub.stats().closed).toMatchObject({ complete: 3, expired: 0 });
  });
});

describe('hub.drain()', () => {
  test.each([
    [{ overMs: -1 }, ErrorCode.NotNonNegativeInteger],
    [{ overMs: 1.5 }, ErrorCode.NotNonNegativeInteger],
    [{ overMs: '1000' }, ErrorCode.NotNonNegativeInteger],
    [{ overMs: Number.NaN }, ErrorCode.NotNonNegativeInteger],
    [{ overMs: 2 ** 31 }, ErrorCode.DurationTooLong],
    [{ over: 1000 }, ErrorCode.UnknownOption],
    [1000, ErrorCode.OptionsNotObject],
  ])('%p is refused at the call, naming the field', (options, code) => {
    const hub = newHub();
    const error = optionsErrorOf(() => hub.drain(options as never));
    expect(error.code).toBe(code);
    if (code !== ErrorCode.OptionsNotObject) expect(error.message).toMatch(/overMs/);
    // A refused call starts nothing.
    expect(hub.stats().draining).toBe(false);
  });

  test('new listens are refused from the call: 503, Retry-After, "Server is draining", counted apart', async () => {
    const hub = newHub({ retryAfterSeconds: 7 });
    const drained = hub.drain();
    expect(hub.stats().draining).toBe(true);
    const error = thrown(() => hubEngine(hub).reserve('alice', 'late')) as ProtocolError;
    expect(error).toMatchObject({ reason: 'draining', rpcCode: -32603, message: 'Server is draining', id: 'late' });
    expect(refusalStatus(error)).toBe(503);
    expect(refusalHeaders(error)).toStrictEqual({ 'Retry-After': '7' });

    // Through the listen handler: written as a JSON-RPC error and counted by its reason.
    const handler = createListenHandler({ hub, capabilities: { toolsListChanged: true }, keepAliveMs: false });
    const res = new FakeResponse();
    await handler.handle(
      {
        body: listenBody('late-2', { toolsListChanged: true }),
        headers: listenHeaders(),
        principal: 'bob',
        request: {},
      },
      res,
    );
    expect(res.statusCode).toBe(503);
    expect(res.headers).toMatchObject({ 'Retry-After': '7' });
    expect(JSON.parse(res.text)).toStrictEqual({
      jsonrpc: '2.0',
      id: 'late-2',
      error: { code: -32603, message: 'Server is draining' },
    });
    const stats = hub.stats();
    expect(stats.refusals).toMatchObject({ draining: 1, capacity: 0, 'shutting-down': 0 });
    await drained;
    await hub.close();
    expect(hub.stats().draining).toBe(false);
  });

  test('a listen that held a slot when the drain began is refused when it would open', async () => {
    const hub = newHub();
    const reservation = hubEngine(hub).reserve('alice', 'checking');
    const drained = hub.drain();
    const error = thrown(() =>
      reservation.open(new FakeResponse(), {
        id: 'checking',
        filter: { toolsListChanged: true },
        keepAliveMs: false,
        ackFrame: ': ack\n\n',
        resultFrame: () => RESULT_MARKER,
      }),
    ) as ProtocolError;
    expect(error.reason).toBe('draining');
    expect(hub.stats()).toMatchObject({ openStreams: 0, pendingStreams: 0 });
    await drained;
    await hub.close();
  });

  test('open streams end one every overMs / n, the first at once, each with its terminal result; then it resolves', async () => {
    fakeTimers();
    const hub = newHub();
    const responses = openMany(hub, 10);
    let resolved = false;
    const drained = hub.drain({ overMs: 1000 }).then(() => {
      resolved = true;
    });
    await settle();
    expect(responses.filter(completed)).toHaveLength(1);
    for (let step = 1; step < 10; step++) {
      await jest.advanceTimersByTimeAsync(100);
      await settle();
      // Oldest first, exactly one more per step.
      expect(responses.map(completed)).toStrictEqual(responses.map((_, i) => i <= step));
      expect(resolved).toBe(step === 9);
    }
    await drained;
    expect(hub.stats().closed).toMatchObject({ drained: 10, complete: 0 });
    // Events still reached the streams not ended yet: nothing else changed for them.
    expect(hub.stats().draining).toBe(true);
    await hub.close();
  });

  test('events still reach the streams a drain has not ended yet', async () => {
    fakeTimers();
    const hub = newHub();
    const [first, second] = openMany(hub, 2) as [FakeResponse, FakeResponse];
    const drained = hub.drain({ overMs: 1000 });
    await settle();
    expect(completed(first)).toBe(true);
    expect(hub.toolsListChanged()).toMatchObject({ matched: 1, written: 1 });
    await settle();
    expect(second.messages().map((m) => m?.method)).toContain('notifications/tools/list_changed');
    await jest.advanceTimersByTimeAsync(500);
    await drained;
    expect(completed(second)).toBe(true);
    await hub.close();
  });

  test('overMs 0, or no streams, ends everything at once', async () => {
    const hub = newHub();
    const responses = openMany(hub, 5);
    await hub.drain();
    await settle();
    expect(responses.every(completed)).toBe(true);
    await hub.close();
    const empty = newHub();
    await empty.drain({ overMs: 60_000 });
    await empty.close();
  });

  test('idempotent: a second call returns the first one promise, whatever its overMs', async () => {
    fakeTimers();
    const hub = newHub();
    openMany(hub, 4);
    const first = hub.drain({ overMs: 400 });
    expect(hub.drain({ overMs: 0 })).toBe(first);
    await jest.advanceTimersByTimeAsync(400);
    await first;
    expect(hub.stats().closed.drained).toBe(4);
    await hub.close();
  });

  test('close() during a drain ends the streams left at once, and the drain resolves', async () => {
    fakeTimers();
    const hub = newHub();
    const responses = openMany(hub, 10);
    const drained = hub.drain({ overMs: 600_000 });
    await settle();
    expect(responses.filter(completed)).toHaveLength(1);
    await hub.close();
    await drained;
    await settle();
    expect(responses.every(completed)).toBe(true);
    expect(hub.stats().closed).toMatchObject({ drained: 1, complete: 9 });
    expect(hub.stats().draining).toBe(false);
    // Nothing left scheduled: the drain's timer went with it.
    expect(jest.getTimerCount()).toBe(0);
  });

  test('after close(), drain does nothing', async () => {
    const hub = newHub();
    await hub.close();
    await hub.drain({ overMs: 1000 });
    expect(hub.stats().draining).toBe(false);
    const error = thrown(() => hubEngine(hub).reserve('alice', 'x')) as ProtocolError;
    expect(error.reason).toBe('shutting-down');
  });
});
