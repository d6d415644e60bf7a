/**
 * Runs the host's per-item checks (read check, then subscribe hook) over a listen request's URIs or
 * task ids, concurrently with a bound per request and a bound per engine.
 *
 * Fail closed: an item is kept only when every check returns exactly `true`. A check that throws,
 * rejects or times out drops the item; the error goes to `onError` for the operator and never to the
 * client (spec §2: a refused URI looks exactly like one never asked for). When the run's signal
 * aborts (the client left, or the listen's deadline passed), no item starts any more, the items in
 * flight are abandoned (their checks' signals abort) and the items that passed so far are returned.
 */
import { CheckTimeoutError } from './errors.ts';
import type { CheckContext } from './types.ts';

/** A host check of one item; may be sync or async. Only `true` admits the item. */
export type ItemCheck<Req> = (item: string, context: CheckContext<Req>) => boolean | PromiseLike<boolean>;

/**
 * Bounds the host checks in flight across every listen request of one engine: a check holds a
 * permit from its call until it settles or times out (an abandoned check the host keeps running is
 * told so by its signal). A sync check takes and gives back its permit within its call.
 */
export class CheckSemaphore {
  private inFlight = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(readonly max: number) {}

  /** Takes a permit when one is free. */
  tryAcquire(): boolean {
    if (this.inFlight >= this.max) return false;
    this.inFlight++;
    return true;
  }

  /** Resolves once a permit is handed over (first come, first served). */
  acquire(): Promise<void> {
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  /** Gives a permit back, to the longest waiter if any. */
  release(): void {
    if (this.waiting.length === 0) {
      this.inFlight--;
      return;
    }
    (this.waiting.shift() as () => void)();
  }

  /** Checks holding a permit now. */
  get active(): number {
    return this.inFlight;
  }
}

/**
 * What one check call is told. `signal` is made on first read only (a sync check that never reads
 * it costs no allocation), and aborts when the run's signal aborts (the client left, the deadline
 * passed) or when this call itself times out. A context is reused by the next call as long as the
 * calls return synchronously: a check that returned a promise keeps its own.
 */
class CallContext<Req> implements CheckContext<Req> {
  private own: AbortController | undefined;
  private linked: AbortSignal | undefined;

  constructor(
    readonly principal: string,
    readonly request: Req,
    private readonly run: () => AbortSignal,
  ) {}

  get signal(): AbortSignal {
    if (this.linked === undefined) {
      this.own = new AbortController();
      this.linked = AbortSignal.any([this.run(), this.own.signal]);
    }
    return this.linked;
  }

  /** This call timed out: its signal aborts with `reason`. */
  timedOut(reason: unknown): void {
    this.own?.abort(reason);
  }
}

/** How the checks of one stage ended in one run: `[allowed, denied, error, timeout]` (telemetry's counts). */
export type StageCounts = [number, number, number, number];

/** How a batch of checks runs. */
export interface AuthorizeRun {
  /** How many items of this request may be in flight at once (a bound on the host's database load). */
  readonly concurrency: number;
  /** How long one check may take before its item is dropped, or `false` for no limit. */
  readonly timeoutMs: number | false;
  /** Told about every check that threw, rejected or timed out while the run lasted. `stage` is the check's index. */
  readonly onError: (error: unknown, stage: number) => void;
  /**
   * The signal that ends the run (aborted when the client goes away or the listen's authorization
   * deadline passes), made on first call: a run whose checks all answer synchronously never needs one.
   */
  readonly signal: () => AbortSignal;
  /** The engine-wide bound on checks in flight. */
  readonly semaphore: CheckSemaphore;
  /**
   * When given (telemetry records), how the checks ended, one entry per check stage: allowed, denied,
   * error (threw or rejected), timeout. Checks abandoned when the run ended are not counted.
   */
  readonly outcomes?: readonly StageCounts[];
}

const ALLOWED = 0;
const DENIED = 1;
const ERROR = 2;
const TIMEOUT = 3;

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    (typeof value === 'object' || typeof value === 'function') &&
    value !== null &&
    typeof (value as { then?: unknown }).then === 'function'
  );
}

/**
 * The items that pass every check, in request order: an array when every check answered synchronously
 * (a thousand URIs through plain functions cost a thousand calls, with no promise, microtask or signal),
 * else a promise. From the first check that returns a promise on, the rest runs `concurrency` at a time.
 */
export function authorizeEach<Req>(
  items: readonly string[],
  checks: readonly ItemCheck<Req>[],
  base: { readonly principal: string; readonly request: Req },
  run: AuthorizeRun,
): string[] | Promise<string[]> {
  const { semaphore, timeoutMs, outcomes } = run;
  const admitted = new Uint8Array(items.length);
  let ended = false;
  /** Set once the run's signal aborted (read from a local: `signal.aborted` costs a call per item). */
  let aborted = false;
  let spare: CallContext<Req> | undefined;

  /** Waits for an async check, within its timeout; gives its permit back when it settles or times out. */
  const settle = (pending: PromiseLike<boolean>, context: CallContext<Req>, stage: number): Promise<boolean> =>
    new Promise<boolean>((resolve) => {
      let open = true;
      let timedOut = false;
      let timer: NodeJS.Timeout | undefined;
      const finish = (verdict: boolean, failed: boolean, error?: unknown): void => {
        if (!open) return;
        open = false;
        if (timer !== undefined) clearTimeout(timer);
        semaphore.release();
        if (outcomes !== undefined && !ended) {
          (outcomes[stage] as StageCounts)[timedOut ? TIMEOUT : failed ? ERROR : verdict ? ALLOWED : DENIED]++;
        }
        // After the run ended (deadline, client gone) a late failure is nobody's concern.
        if (failed && !ended) run.onError(error, stage);
        resolve(verdict);
      };
      if (timeoutMs !== false) {
        timer = setTimeout(() => {
          const error = new CheckTimeoutError(timeoutMs);
          timedOut = true;
          context.timedOut(error);
          finish(false, true, error);
        }, timeoutMs);
      }
      pending.then(
        (result) => finish(result === true, false),
        (error: unknown) => finish(false, true, error),
      );
    });

  /**
   * Calls check `stage` on `item` holding a permit: a boolean when it answered synchronously. A sync
   * answer gives the permit back, unless the caller keeps holding it (`held`, the synchronous pass); an
   * async one keeps it until it settles.
   */
  const call = (stage: number, item: string, held = false): boolean | Promise<boolean> => {
    const context = (spare ??= new CallContext(base.principal, base.request, run.signal));
    let result: boolean | PromiseLike<boolean>;
    try {
      result = (checks[stage] as ItemCheck<Req>)(item, context);
    } catch (error) {
      if (!held) semaphore.release();
      if (outcomes !== undefined) (outcomes[stage] as StageCounts)[ERROR]++;
      run.onError(error, stage);
      return false;
    }
    if (!isThenable(result)) {
      if (!held) semaphore.release();
      if (outcomes !== undefined) (outcomes[stage] as StageCounts)[result === true ? ALLOWED : DENIED]++;
      return result === true;
    }
    // This call keeps its context (it may read its signal later): the next call gets a fresh one.
    spare = undefined;
    return settle(result, context, stage);
  };

  const passes = async (item: string, from: number): Promise<boolean> => {
    for (let stage = from; stage < checks.length; stage++) {
      if (!semaphore.tryAcquire()) {
        await semaphore.acquire();
        if (aborted) {
          semaphore.release();
          return false;
        }
      }
      const verdict = call(stage, item);
      if (!(typeof verdict === 'boolean' ? verdict : await verdict)) return false;
    }
    return true;
  };

  /**
   * One item, synchronously as long as its checks answer synchronously and permits are free; `held`
   * when the caller holds a permit for the whole synchronous pass (a check that answers with a promise
   * then takes it over).
   */
  const check = (item: string, held = false): boolean | Promise<boolean> => {
    for (let stage = 0; stage < checks.length; stage++) {
      if (!held && !semaphore.tryAcquire()) return passes(item, stage);
      const verdict = call(stage, item, held);
      if (typeof verdict !== 'boolean') {
        return stage + 1 < checks.length
          ? verdict.then((ok) => (ok && !aborted ? passes(item, stage + 1) : false))
          : verdict;
      }
      if (!verdict) return false;
    }
    return true;
  };

  const collect = (): string[] => {
    ended = true;
    let count = 0;
    for (let i = 0; i < items.length; i++) count += admitted[i] as number;
    // Every item passed (the usual case): one copy, no walk. Always a new list: the caller keeps it
    // for as long as the stream lives, and `items` may be the request's own.
    if (count === items.length) return items.slice();
    const kept: string[] = [];
    for (let i = 0; i < items.length; i++) if (admitted[i] === 1) kept.push(items[i] as string);
    return kept;
  };

  // The synchronous pass: item after item for as long as every check answers at once. One permit for
  // the whole pass, taken once rather than per call: nothing else runs between two synchronous calls,
  // so it is the same bound as a permit per call (a check holds it during its call only).
  const held = items.length > 0 && checks.length > 0 && semaphore.tryAcquire();
  let next = 0;
  while (next < items.length) {
    const index = next++;
    const verdict = check(items[index] as string, held);
    // The held permit, if any, went with the check now waiting.
    if (typeof verdict !== 'boolean') return finish(index, verdict);
    if (verdict) admitted[index] = 1;
  }
  if (held) semaphore.release();
  return collect();

  /** The rest of the run, once item `index` is waiting on `verdict`: `concurrency` items at a time. */
  async function finish(index: number, verdict: Promise<boolean>): Promise<string[]> {
    const signal = run.signal();
    aborted = signal.aborted;
    const onAbort = (): void => {
      aborted = true;
    };
    signal.addEventListener('abort', onAbort, { once: true });

    const worker = async (first?: { index: number; verdict: Promise<boolean> }): Promise<void> => {
      if (first !== undefined && (await first.verdict) && !ended) admitted[first.index] = 1;
      while (next < items.length && !aborted) {
        const at = next++;
        const pending = check(items[at] as string);
        const ok = typeof pending === 'boolean' ? pending : await pending;
        if (ok && !ended) admitted[at] = 1;
      }
    };

    const workers: Promise<void>[] = [worker({ index, verdict })];
    for (let w = 1; w < Math.min(run.concurrency, items.length - index); w++) workers.push(worker());
    const all = Promise.all(workers);
    if (!aborted) {
      // The run ends when every item is decided, or as soon as its signal aborts: a check in flight
      // then no longer holds the listen up.
      await new Promise<void>((resolve) => {
        const onEnd = (): void => resolve();
        signal.addEventListener('abort', onEnd, { once: true });
        void all.then(() => {
          signal.removeEventListener('abort', onEnd);
          resolve();
        });
      });
    }
    signal.removeEventListener('abort', onAbort);
    return collect();
  }
}
