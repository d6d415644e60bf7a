/** Small assertions that jest's matchers do not give in the shape the suites need. */
import { expect } from '@jest/globals';

/**
 * What `fn` throws, to assert on its `code` and message; fails the test when it does not throw.
 * (`expect(fn).toThrow()` checks a message or a class, but not a `code`, which is how errors are told
 * apart here.)
 */
export function thrown(fn: () => unknown): Error & { code?: string } {
  try {
    fn();
  } catch (error) {
    return error as Error & { code?: string };
  }
  throw new Error('expected a throw');
}

/** `expect(actual).toBe(expected)`; a failure also prints `context` (e.g. the response text), as assert's message did. */
export function expectToBe(actual: unknown, expected: unknown, context: string): void {
  expect({ actual, context }).toStrictEqual({ actual: expected, context });
}
