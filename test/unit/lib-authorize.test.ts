/**
 * The per-item checks of one listen request (lib/authorize.ts), on their own: `CheckSemaphore` (the
 * engine-wide bound, first come first served) and `authorizeEach` (sync answers without a promise,
 * request order kept, `concurrency` at a time, the per-check timeout, failures, abort, and only exactly
 * `true` admitting an item). Time is jest's fake setTimeout; setImmediate stays real to turn the loop.
 */
import { afterEach, describe, expect, jest, test } from '@jest/globals';
import { ErrorCode } from 'mcp-subscriptions';
import { authorizeEach, CheckSemaphore, type AuthorizeRun, type ItemCheck } from '../../lib/authorize.ts';
import { settle, settleUntil } from '../helpers/fake-response.ts';

afterEach(() => {
  jest.useRealTimers();
});

/** Fake timers for the per-check timeout; the event loop still turns (setImmediate) and promises still run. */
function fakeTimeouts(): void {
  jest.useFakeTimers({ doNotFake: ['setImmediate', 'nextTick', 'queueMicrotask'] });
}

interface Gate {
  readonly promise: Promise<boolean>;
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

function gate(): Gate {
  let resolve!: (value: unknown) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<boolean>((res, rej) => {
    resolve = res as (value: unknown) => void;
    reject = rej;
  });
  return { promise, resolve, reject };
}

const BASE = { principal: 'alice', request: { marker: 'the request' } };

/** A run with recorded failures; `signal` made on demand from `controller` (aborted by the test). */
function runOf(
  overrides: Partial<Omit<AuthorizeRun, 'onError' | 'signal'>> = {},
  controller = new AbortController(),
): { run: AuthorizeRun; errors: [unknown, number][]; signalReads: () => number; controller: AbortController } {
  const errors: [unknown, number][] = [];
  let reads = 0;
  const run: AuthorizeRun = {
    concurrency: 4,
    timeoutMs: false,
    semaphore: new CheckSemaphore(1000),
    ...overrides,
    onError: (error, stage) => void errors.push([error, stage]),
    signal: () => {
      reads++;
      return controller.signal;
    },
  };
  return { run, errors, signalReads: () => reads, controller };
}

/** Whether `promise` settles within a bounded number of event-loop turns; never waits on jest's timeout. */
async function settlesWithin<T>(promise: Promise<T>, turns = 200): Promise<{ settled: boolean; value?: T }> {
  let outcome: { settled: boolean; value?: T } = { settled: false };
  void promise.then((value) => (outcome = { settled: true, value }));
  for (let i = 0; i < turns && !outcome.settled; i++) await settle();
  return outcome;
}

describe('CheckSemaphore', () => {
  test('tryAcquire takes permits up to max, then refuses; release frees one', () => {
    const semaphore = new CheckSemaphore(2);
    expect(semaphore.max).toBe(2);
    expect([semaphore.tryAcquire(), semaphore.tryAcquire(), semaphore.tryAcquire()]).toStrictEqual([true, true, false]);
    expect(semaphore.active).toBe(2);
    semaphore.release();
    expect(semaphore.active).toBe(1);
    expect(semaphore.tryAcquire()).toBe(true);
    expect(semaphore.active).toBe(2);
  });

  test('a released permit goes to the longest waiter, first come first served, and stays held', async () => {
    const semaphore = new CheckSemaphore(1);
    expect(semaphore.tryAcquire()).toBe(true);
    const order: string[] = [];
    void semaphore.acquire().then(() => order.push('first'));
    void semaphore.acquire().then(() => order.push('second'));
    await settle();
    expect(order).toStrictEqual([]);
    semaphore.release();
    await settle();
    expect(order).toStrictEqual(['first']);
    // Handed over, not freed: still one in flight, and nobody else gets in.
    expect(semaphore.active).toBe(1);
    expect(semaphore.tryAcquire()).toBe(false);
    semaphore.release();
    await settle();
    expect(order).toStrictEqual(['first', 'second']);
    semaphore.release();
    expect(semaphore.active).toBe(0);
  });
});

describe('authorizeEach: answers', () => {
  test('sync checks answer with an array, at once, in request order, without reading the run signal', () => {
    const { run, signalReads } = runOf();
    const kept = authorizeEach(['a', 'b', 'c', 'd'], [(item) => item !== 'b'], BASE, run);
    expect(kept).toStrictEqual(['a', 'c', 'd']);
    expect(signalReads()).toBe(0);
    expect(run.semaphore.active).toBe(0);
  });

  test("what passed is always a list of its own, never the request's (a stream keeps it while it lives)", async () => {
    const { run } = runOf();
    const items = ['a', 'b', 'c'];
    const sync = authorizeEach(items, [() => true], BASE, run);
    expect(sync).toStrictEqual(items);
    expect(sync).not.toBe(items);
    const async = await authorizeEach(items, [() => Promise.resolve(true)], BASE, run);
    expect(async).toStrictEqual(items);
    expect(async).not.toBe(items);
    expect(authorizeEach(items, [], BASE, run)).not.toBe(items);
  });

  test('no items, or no checks: an array at once (nothing to refuse with no checks)', () => {
    const { run } = runOf();
    expect(authorizeEach([], [() => false], BASE, run)).toStrictEqual([]);
    expect(authorizeEach(['a', 'b'], [], BASE, run)).toStrictEqual(['a', 'b']);
  });

  test('only exactly true admits: falsy and truthy non-true answers refuse, sync and async alike', async () => {
    const answers: Record<string, unknown> = {
      true: true,
      false: false,
      undefined: undefined,
      null: null,
      zero: 0,
      empty: '',
      one: 1,
      yes: 'yes',
      stringTrue: 'true',
      object: {},
      nan: Number.NaN,
    };
    const items = Object.keys(answers);
    const sync = authorizeEach(items, [(item) => answers[item] as boolean], BASE, runOf().run);
    expect(sync).toStrictEqual(['true']);
    const async = authorizeEach(items, [(item) => Promise.resolve(answers[item] as boolean)], BASE, runOf().run);
    expect(async).toBeInstanceOf(Promise);
    expect(await async).toStrictEqual(['true']);
    // A thenable that is not a Promise is waited for too.
    const thenable = authorizeEach(
      items,
      [
        (item) =>
          ({
            then: (resolve: (value: boolean) => void) => resolve(answers[item] as boolean),
          }) as unknown as PromiseLike<boolean>,
      ],
      BASE,
      runOf().run,
    );
    expect(await thenable).toStrictEqual(['true']);
  });

  test('every check must pass, in order; a later check is not asked about an item an earlier one refused', () => {
    const asked: string[] = [];
    const kept = authorizeEach(
      ['a', 'b', 'c'],
      [
        (item) => {
          asked.push(`read ${item}`);
          return item !== 'b';
        },
        (item) => {
          asked.push(`hook ${item}`);
          return item !== 'c';
        },
      ],
      BASE,
      runOf().run,
    );
    expect(kept).toStrictEqual(['a']);
    expect(asked).toStrictEqual(['read a', 'hook a', 'read b', 'read c', 'hook c']);
  });

  test('a check is told the principal and request; sync calls share one context, an async call keeps its own', async () => {
    const contexts: { item: string; context: Parameters<ItemCheck<unknown>>[1] }[] = [];
    const kept = authorizeEach(
      ['s1', 's2', 'async', 's3'],
      [
        (item, context) => {
          contexts.push({ item, context });
          return item === 'async' ? Promise.resolve(true) : true;
        },
      ],
      BASE,
      runOf().run,
    );
    expect(await kept).toStrictEqual(['s1', 's2', 'async', 's3']);
    const [s1, s2, async, s3] = contexts.map(({ context }) => context);
    expect(s1!.principal).toBe('alice');
    expect(s1!.request).toBe(BASE.request);
    expect(s2).toBe(s1);
    expect(async).toBe(s1); // the context of the last sync call is reused…
    expect(s3).not.toBe(async); // …and kept by the call that went async: the next one gets a fresh one
  });

  test('mixed sync and async answers keep request order, whatever order the promises settle in', async () => {
    const gates = new Map<string, Gate>();
    const items = ['1', 'slow-2', '3', 'slow-4', 'slow-5', '6', 'slow-7'];
    const result = authorizeEach(
      items,
      [
        (item) => {
          if (!item.startsWith('slow')) return item !== '3';
          const g = gate();
          gates.set(item, g);
          return g.promise;
        },
      ],
      BASE,
      runOf({ concurrency: 10 }).run,
    );
    expect(result).toBeInstanceOf(Promise);
    await settleUntil(() => gates.size === 4, 'every slow check to start');
    // Newest first: completion order is the reverse of request order.
    for (const item of ['slow-7', 'slow-5', 'slow-4', 'slow-2']) gates.get(item)!.resolve(item !== 'slow-5');
    expect(await result).toStrictEqual(['1', 'slow-2', 'slow-4', '6', 'slow-7']);
  });
});

describe('authorizeEach: bounds', () => {
  test('at most `concurrency` items of one run are in flight; every permit is given back', async () => {
    let inFlight = 0;
    let most = 0;
    const gates: Gate[] = [];
    const { run } = runOf({ concurrency: 3 });
    const result = authorizeEach(
      Array.from({ length: 12 }, (_, i) => `n${i}`),
      [
        async () => {
          inFlight++;
          most = Math.max(most, inFlight);
          const g = gate();
          gates.push(g);
          try {
            return await g.promise;
          } finally {
            inFlight--;
          }
        },
      ],
      BASE,
      run,
    );
    let released = 0;
    while (released < 12) {
      await settleUntil(() => gates.length > released, 'the next check to start');
      expect(inFlight).toBeLessThanOrEqual(3);
      gates[released]!.resolve(released % 3 !== 0);
      released++;
    }
    expect(await result).toStrictEqual(['n1', 'n2', 'n4', 'n5', 'n7', 'n8', 'n10', 'n11']);
    expect(most).toBe(3);
    expect(run.semaphore.active).toBe(0);
  });

  test('the engine-wide semaphore bounds checks across runs; a waiting check starts when a permit is handed over', async () => {
    const semaphore = new CheckSemaphore(2);
    const started: string[] = [];
    const gates = new Map<string, Gate>();
    const check: ItemCheck<unknown> = (item) => {
      started.push(item);
      const g = gate();
      gates.set(item, g);
      return g.promise;
    };
    const first = authorizeEach(['a1', 'a2', 'a3'], [check], BASE, runOf({ concurrency: 3, semaphore }).run);
    const second = authorizeEach(['b1', 'b2'], [check], BASE, runOf({ concurrency: 3, semaphore }).run);
    await settle();
    // Two permits in all: the first run took both; everything else waits.
    expect(started).toStrictEqual(['a1', 'a2']);
    expect(semaphore.active).toBe(2);
    gates.get('a1')!.resolve(true);
    await settleUntil(() => started.length === 3, 'a permit handed to the longest waiter');
    expect(started).toStrictEqual(['a1', 'a2', 'a3']);
    expect(semaphore.active).toBe(2);
    for (const item of ['a2', 'a3']) gates.get(item)!.resolve(true);
    await settleUntil(() => started.length === 5, 'the second run to get its permits');
    for (const item of ['b1', 'b2']) gates.get(item)!.resolve(item === 'b2');
    expect(await first).toStrictEqual(['a1', 'a2', 'a3']);
    expect(await second).toStrictEqual(['b2']);
    expect(semaphore.active).toBe(0);
  });

  test('a sync check holds its permit during its call only; a full semaphore makes even a sync check wait', async () => {
    const semaphore = new CheckSemaphore(1);
    const activeDuringCall: number[] = [];
    const sync = authorizeEach(
      ['a', 'b'],
      [
        () => {
          activeDuringCall.push(semaphore.active);
          return true;
        },
      ],
      BASE,
      runOf({ semaphore }).run,
    );
    expect(sync).toStrictEqual(['a', 'b']);
    expect(activeDuringCall).toStrictEqual([1, 1]);
    expect(semaphore.active).toBe(0);

    expect(semaphore.tryAcquire()).toBe(true); // someone else's check holds the only permit
    const waiting = authorizeEach(['c'], [() => true], BASE, runOf({ semaphore }).run);
    expect(waiting).toBeInstanceOf(Promise);
    expect((await settlesWithin(waiting as Promise<string[]>, 20)).settled).toBe(false);
    semaphore.release();
    expect(await waiting).toStrictEqual(['c']);
    expect(semaphore.active).toBe(0);
  });
});

describe('authorizeEach: failures', () => {
  test('a check that throws or rejects drops its item and is reported with its stage; the rest go on', async () => {
    const thrown = new Error('read broke');
    const rejected = new Error('hook broke');
    const { run, errors } = runOf();
    const result = authorizeEach(
      ['ok', 'throws', 'rejects', 'ok2'],
      [
        (item) => {
          if (item === 'throws') throw thrown;
          return true;
        },
        (item) => (item === 'rejects' ? Promise.reject(rejected) : Promise.resolve(true)),
      ],
      BASE,
      run,
    );
    expect(await result).toStrictEqual(['ok', 'ok2']);
    expect(errors).toStrictEqual([
      [thrown, 0],
      [rejected, 1],
    ]);
    expect(run.semaphore.active).toBe(0);
  });

  test('a check slower than timeoutMs is dropped with a CheckTimeoutError, and its signal aborts with it', async () => {
    fakeTimeouts();
    const signals = new Map<string, AbortSignal>();
    const slow = gate();
    const { run, errors } = runOf({ timeoutMs: 100 });
    const result = authorizeEach(
      ['hangs', 'slow', 'sync'],
      [
        (item, { signal }) => {
          signals.set(item, signal);
          if (item === 'hangs') return new Promise<boolean>(() => {});
          if (item === 'slow') return slow.promise;
          return true;
        },
      ],
      BASE,
      run,
    );
    await settle();
    jest.advanceTimersByTime(99);
    slow.resolve(true); // within its time
    await settle();
    expect(signals.get('hangs')!.aborted).toBe(false);
    jest.advanceTimersByTime(1);
    const outcome = await settlesWithin(result as Promise<string[]>);
    expect(outcome).toStrictEqual({ settled: true, value: ['slow', 'sync'] });
    expect(errors).toHaveLength(1);
    const [error, stage] = errors[0]!;
    expect(stage).toBe(0);
    expect((error as { code?: unknown }).code).toBe(ErrorCode.CheckTimeout);
    expect((error as Error).message).toMatch(/longer than 100 ms/);
    const hangs = signals.get('hangs')!;
    expect(hangs.aborted).toBe(true);
    expect(hangs.reason).toBe(error);
    expect(signals.get('slow')!.aborted).toBe(false);
    expect(run.semaphore.active).toBe(0); // the timed-out check's permit came back
    expect(jest.getTimerCount()).toBe(0); // the answered check's timer was cleared
  });

  test('a check that answers after its timeout changes nothing and is not reported twice', async () => {
    fakeTimeouts();
    const late = gate();
    const { run, errors } = runOf({ timeoutMs: 50 });
    const result = authorizeEach(['late'], [() => late.promise], BASE, run);
    await settle();
    jest.advanceTimersByTime(50);
    expect(await settlesWithin(result as Promise<string[]>)).toStrictEqual({ settled: true, value: [] });
    late.resolve(true);
    late.reject(new Error('and then broke')); // ignored: a promise settles once
    await settle();
    expect(errors).toHaveLength(1);
    expect(run.semaphore.active).toBe(0);
  });
});

describe('authorizeEach: abort', () => {
  test('an abort returns what passed so far; checks in flight are abandoned and told; no new item starts', async () => {
    const controller = new AbortController();
    const started: string[] = [];
    const signals = new Map<string, AbortSignal>();
    const gates = new Map<string, Gate>();
    const { run, errors } = runOf({ concurrency: 2 }, controller);
    const result = authorizeEach(
      ['fast', 'slow-1', 'slow-2', 'never-1', 'never-2'],
      [
        (item, { signal }) => {
          started.push(item);
          signals.set(item, signal);
          if (item === 'fast') return Promise.resolve(true);
          const g = gate();
          gates.set(item, g);
          return g.promise;
        },
      ],
      BASE,
      run,
    );
    await settleUntil(() => started.length === 3, 'both workers to wait on a slow check');
    expect(started).toStrictEqual(['fast', 'slow-1', 'slow-2']);
    const reason = new Error('the client left');
    controller.abort(reason);
    expect(await settlesWithin(result as Promise<string[]>)).toStrictEqual({ settled: true, value: ['fast'] });
    for (const item of ['slow-1', 'slow-2']) {
      expect(signals.get(item)!.aborted).toBe(true);
      expect(signals.get(item)!.reason).toBe(reason);
    }
    // The abandoned checks answer later: nothing more starts, nothing is reported.
    gates.get('slow-1')!.resolve(true);
    gates.get('slow-2')!.reject(new Error('late failure'));
    await settle();
    await settle();
    expect(started).toStrictEqual(['fast', 'slow-1', 'slow-2']);
    expect(errors).toStrictEqual([]);
    expect(run.semaphore.active).toBe(0);
  });

  test('a run whose signal aborted before it went async checks nothing more after the first async answer', async () => {
    const controller = new AbortController();
    controller.abort();
    const started: string[] = [];
    const { run } = runOf({ concurrency: 3 }, controller);
    const result = authorizeEach(
      ['sync', 'async', 'after'],
      [
        (item) => {
          started.push(item);
          return item === 'async' ? Promise.resolve(true) : true;
        },
      ],
      BASE,
      run,
    );
    // The check in flight is abandoned at once: what passed synchronously is all there is.
    expect(await settlesWithin(result as Promise<string[]>)).toStrictEqual({ settled: true, value: ['sync'] });
    expect(started).toStrictEqual(['sync', 'async']);
  });

  test('a check waiting for a permit when the run aborts never starts, and gives the permit on', async () => {
    const semaphore = new CheckSemaphore(1);
    expect(semaphore.tryAcquire()).toBe(true);
    const controller = new AbortController();
    const started: string[] = [];
    const result = authorizeEach(
      ['waits'],
      [
        (item) => {
          started.push(item);
          return true;
        },
      ],
      BASE,
      runOf({ semaphore }, controller).run,
    );
    await settle();
    controller.abort();
    expect(await settlesWithin(result as Promise<string[]>)).toStrictEqual({ settled: true, value: [] });
    const other = semaphore.acquire();
    semaphore.release(); // the permit held outside reaches the aborted waiter, which hands it on…
    await other; // …to the next waiter
    expect(started).toStrictEqual([]);
    expect(semaphore.active).toBe(1);
    semaphore.release();
    expect(semaphore.active).toBe(0);
  });
});
