/**
 * Validators shared by every `resolveOptions()`: each returns the value or throws an `OptionsError`
 * in the p-queue manner, naming the field.
 */
import { describeValue, OptionsError } from './errors.ts';

/** The longest delay Node's timers honour; a longer one fires after 1 ms instead. */
export const MAX_TIMER_MS = 2_147_483_647;

/** A positive safe integer. */
export function positiveInteger(name: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0) {
    throw new OptionsError(`Expected \`${name}\` to be a positive integer, got ${describeValue(value)}`);
  }
  return value;
}

/** A duration in milliseconds a timer can wait for: a positive integer up to {@link MAX_TIMER_MS}. */
export function durationMs(name: string, value: unknown): number {
  const ms = positiveInteger(name, value);
  if (ms > MAX_TIMER_MS) {
    throw new OptionsError(
      `Expected \`${name}\` to be at most ${MAX_TIMER_MS} ms (about 24.8 days), got ${describeValue(value)}`,
    );
  }
  return ms;
}

/** A duration, or `false` for "off". */
export function durationOrFalse(name: string, value: unknown): number | false {
  return value === false ? false : durationMs(name, value);
}

/** A function, or `undefined` when the option is optional and absent. */
export function optionalFunction(name: string, value: unknown): void {
  if (value !== undefined && typeof value !== 'function') {
    throw new OptionsError(`Expected \`${name}\` to be a function, got ${describeValue(value)}`);
  }
}

/** An options object (absent means all defaults). */
export function optionsObject(value: unknown): void {
  if (typeof value !== 'object' || value === null) {
    throw new OptionsError(`Expected options to be an object, got ${describeValue(value)}`);
  }
}
