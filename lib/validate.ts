/**
 * Option validation, in one place for every entry point (the hub, the listen engine, the Express
 * middleware, the Nest module). Each check throws an `OptionsError` with a code of its own and a
 * message in the p-queue manner, naming the field: ``Expected `maxSubscriptions` to be a positive integer,
 * got `-5` (number)``. Unknown keys are refused with the nearest known one suggested.
 */
import { describeValue, ErrorCode, OptionsError } from './errors.ts';
import type { Logger } from './types.ts';

/** The longest delay Node's timers honour; a longer one fires after 1 ms instead. */
export const MAX_TIMER_MS = 2_147_483_647;

/**
 * The keys of an options interface, checked by the compiler against it: listing one too many or one
 * too few is a type error, so the runtime list cannot drift from the documented interface.
 */
export function optionKeys<T>(keys: { readonly [K in keyof Required<T>]: true }): readonly string[] {
  return Object.freeze(Object.keys(keys));
}

/** A plain object as `JSON.parse` makes one: neither `null` nor an array. */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** An options object (absent means all defaults); `name` says which, for nested ones. */
export function optionsObject(value: unknown, name = 'options'): asserts value is object {
  if (!isPlainObject(value)) {
    throw new OptionsError(ErrorCode.OptionsNotObject, `Expected ${name} to be an object, got ${describeValue(value)}`);
  }
}

/** Edit distance with adjacent transpositions (optimal string alignment), case-insensitive. */
function distance(a: string, b: string): number {
  const s = a.toLowerCase();
  const t = b.toLowerCase();
  const rows: number[][] = [];
  for (let i = 0; i <= s.length; i++) {
    const row: number[] = [i];
    for (let j = 1; j <= t.length; j++) {
      if (i === 0) {
        row.push(j);
        continue;
      }
      const above = rows[i - 1] as number[];
      const cost = s[i - 1] === t[j - 1] ? 0 : 1;
      let best = Math.min((above[j] as number) + 1, (row[j - 1] as number) + 1, (above[j - 1] as number) + cost);
      if (i > 1 && j > 1 && s[i - 1] === t[j - 2] && s[i - 2] === t[j - 1]) {
        best = Math.min(best, ((rows[i - 2] as number[])[j - 2] as number) + 1);
      }
      row.push(best);
    }
    rows.push(row);
  }
  return (rows[s.length] as number[])[t.length] as number;
}

/**
 * The known key nearest to `key`, when it is near enough to be a typo: at most a third of the
 * key's length in edits (so `maxSubscription` finds `maxSubscriptions`, and `foo` finds nothing).
 */
export function nearestKey(key: string, known: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Math.max(1, Math.floor(key.length / 3)) + 1;
  for (const candidate of known) {
    const d = distance(key, candidate);
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best;
}

/**
 * Refuses keys that `where` does not take. `elsewhere` maps keys that belong to another entry point
 * to a hint saying where they go (`maxSubscriptions` given to the middleware belongs to the hub). `noun`
 * names what a key is (`option`, `capability`).
 */
export function knownKeys(
  options: object,
  known: readonly string[],
  where: string,
  elsewhere: Readonly<Record<string, string>> = {},
  noun = 'option',
): void {
  for (const key of Object.keys(options)) {
    if (known.includes(key)) continue;
    const hint = Object.hasOwn(elsewhere, key) ? elsewhere[key] : undefined;
    const near = nearestKey(key, known);
    const advice =
      hint !== undefined
        ? hint
        : near !== undefined
          ? `did you mean \`${near}\`?`
          : `expected one of ${known.map((k) => `\`${k}\``).join(', ')}`;
    throw new OptionsError(ErrorCode.UnknownOption, `Unknown ${noun} \`${key}\` of ${where}; ${advice}`);
  }
}

/**
 * Refuses options that `where` no longer takes, each with `removed[key]`, what replaced it: an option
 * that was accepted and ignored would let a user believe it still does something.
 */
export function removedOptions(options: object, removed: Readonly<Record<string, string>>, where: string): void {
  for (const key of Object.keys(options)) {
    const replacement = Object.hasOwn(removed, key) ? removed[key] : undefined;
    if (replacement !== undefined) {
      throw new OptionsError(ErrorCode.RemovedOption, `Option \`${key}\` of ${where} was removed: ${replacement}`);
    }
  }
}

/**
 * The option's value, or `fallback` when it is absent. Only `undefined` is absent: `null` is a value,
 * and is refused by the option's check (a `null` bound must not quietly become "no bound").
 */
export function given<T>(value: T | undefined, fallback: T): T {
  return value === undefined ? fallback : value;
}

/** A logger: an object with `warn` and `error` methods. */
export function loggerOption(name: string, value: unknown): Logger {
  const logger = value as Partial<Logger> | null | undefined;
  if (typeof logger?.warn !== 'function' || typeof logger.error !== 'function') {
    throw new OptionsError(
      ErrorCode.InvalidLogger,
      `Expected \`${name}\` to have \`warn\` and \`error\` methods, got ${describeValue(value)}`,
    );
  }
  return value as Logger;
}

/** A positive safe integer. */
export function positiveInteger(name: string, value: unknown, alternative = ''): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0) {
    throw new OptionsError(
      ErrorCode.NotPositiveInteger,
      `Expected \`${name}\` to be a positive integer${alternative}, got ${describeValue(value)}`,
    );
  }
  return value;
}

/** A non-negative safe integer (0 allowed). */
export function nonNegativeInteger(name: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw new OptionsError(
      ErrorCode.NotNonNegativeInteger,
      `Expected \`${name}\` to be a non-negative integer, got ${describeValue(value)}`,
    );
  }
  return value;
}

/** A duration in milliseconds a timer can wait for: a positive integer up to {@link MAX_TIMER_MS}. */
export function durationMs(name: string, value: unknown, alternative = ''): number {
  const ms = positiveInteger(name, value, alternative);
  if (ms > MAX_TIMER_MS) {
    throw new OptionsError(
      ErrorCode.DurationTooLong,
      `Expected \`${name}\` to be at most ${MAX_TIMER_MS} ms (about 24.8 days)${alternative}, got ${describeValue(value)}`,
    );
  }
  return ms;
}

/** A duration in milliseconds that may be 0 (`hub.drain()`'s `overMs`), up to {@link MAX_TIMER_MS}. */
export function durationOrZero(name: string, value: unknown): number {
  const ms = nonNegativeInteger(name, value);
  if (ms > MAX_TIMER_MS) {
    throw new OptionsError(
      ErrorCode.DurationTooLong,
      `Expected \`${name}\` to be at most ${MAX_TIMER_MS} ms (about 24.8 days), got ${describeValue(value)}`,
    );
  }
  return ms;
}

/** What the message of an option that `false` turns off adds: the fix a user may not know of. */
const OR_FALSE = ', or `false` to turn it off';

/** A duration, or `false` for "off"; a mistake's message says that `false` is allowed. */
export function durationOrFalse(name: string, value: unknown): number | false {
  return value === false ? false : durationMs(name, value, OR_FALSE);
}

/** A positive integer, or `false` for "no bound"; a mistake's message says that `false` is allowed. */
export function positiveIntegerOrFalse(name: string, value: unknown): number | false {
  return value === false ? false : positiveInteger(name, value, OR_FALSE);
}

/** A boolean. */
export function booleanOption(name: string, value: unknown): boolean {
  if (typeof value !== 'boolean') {
    throw new OptionsError(ErrorCode.NotBoolean, `Expected \`${name}\` to be a boolean, got ${describeValue(value)}`);
  }
  return value;
}

/** A function, or `undefined` when the option is optional and absent. */
export function optionalFunction(name: string, value: unknown): void {
  if (value !== undefined && typeof value !== 'function') {
    throw new OptionsError(ErrorCode.NotFunction, `Expected \`${name}\` to be a function, got ${describeValue(value)}`);
  }
}

/** One of a few allowed values. */
export function oneOf<T extends string>(name: string, value: unknown, choices: readonly T[]): T {
  if (!(choices as readonly unknown[]).includes(value)) {
    throw new OptionsError(
      ErrorCode.NotOneOf,
      `Expected \`${name}\` to be one of ${choices.map((c) => `'${c}'`).join(', ')}, got ${describeValue(value)}`,
    );
  }
  return value as T;
}
