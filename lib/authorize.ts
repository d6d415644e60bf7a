/**
 * Runs the host's per-item checks (read check, then subscribe hook) over a listen request's URIs or
 * task ids, concurrently with a bound.
 *
 * Fail closed: an item is kept only when every check returns exactly `true`. A check that throws,
 * rejects or times out drops the item; the error goes to `onError` for the operator and never to the
 * client (spec §2: a refused URI looks exactly like one never asked for).
 */
import { CheckTimeoutError } from './errors.ts';

/** A host check of one item; may be sync or async. Only `true` admits the item. */
export type ItemCheck<C> = (item: string, context: C) => boolean | PromiseLike<boolean>;

/** How a batch of checks runs. */
export interface AuthorizeRun {
  /** How many items may be in flight at once (a bound on the host's database load). */
  readonly concurrency: number;
  /** How long one check may take before its item is dropped, or `false` for no limit. */
  readonly timeoutMs: number | false;
  /** Told about every check that threw, rejected or timed out. `stage` is the check's index. */
  readonly onError: (error: unknown, stage: number) => void;
  /** Stops starting new items once aborted (the client went away). */
  readonly signal?: AbortSignal;
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    (typeof value === 'object' || typeof value === 'function') &&
    value !== null &&
    typeof (value as { then?: unknown }).then === 'function'
  );
}

function withTimeout<T>(pending: PromiseLike<T>, timeoutMs: number | false): Promise<T> {
  if (timeoutMs === false) return Promise.resolve(pending);
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new CheckTimeoutError(timeoutMs)), timeoutMs);
  });
  return Promise.race([pending, timeout]).finally(() => clearTimeout(timer));
}

/**
 * The items that pass every check, in request order. Sync checks run without a microtask per item,
 * so a thousand URIs through plain functions cost a thousand calls, not a thousand awaits.
 */
export async function authorizeEach<C>(
  items: readonly string[],
  checks: readonly ItemCheck<C>[],
  context: C,
  run: AuthorizeRun,
): Promise<string[]> {
  const admitted = new Uint8Array(items.length);

  const finishAsync = async (pending: PromiseLike<boolean>, item: string, stage: number): Promise<boolean> => {
    for (let c = stage; c < checks.length; c++) {
      try {
        const result = c === stage ? await withTimeout(pending, run.timeoutMs) : await runCheck(c, item);
        if (result !== true) return false;
      } catch (error) {
        run.onError(error, c);
        return false;
      }
    }
    return true;
  };

  const runCheck = (c: number, item: string): Promise<boolean> | boolean => {
    const result = (checks[c] as ItemCheck<C>)(item, context);
    return isThenable(result) ? withTimeout(result, run.timeoutMs) : result;
  };

  const passes = (item: string): boolean | Promise<boolean> => {
    for (let c = 0; c < checks.length; c++) {
      let result: boolean | PromiseLike<boolean>;
      try {
        result = (checks[c] as ItemCheck<C>)(item, context);
      } catch (error) {
        run.onError(error, c);
        return false;
      }
      if (isThenable(result)) return finishAsync(result, item, c);
      if (result !== true) return false;
    }
    return true;
  };

  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length && run.signal?.aborted !== true) {
      const index = next++;
      const verdict = passes(items[index] as string);
      admitted[index] = (typeof verdict === 'boolean' ? verdict : await verdict) ? 1 : 0;
    }
  };

  const workers: Promise<void>[] = [];
  for (let w = 0; w < Math.min(run.concurrency, items.length); w++) workers.push(worker());
  await Promise.all(workers);

  const kept: string[] = [];
  for (let i = 0; i < items.length; i++) if (admitted[i] === 1) kept.push(items[i] as string);
  return kept;
}
