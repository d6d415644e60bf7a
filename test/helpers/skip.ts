/**
 * Skipping that says why. jest's `test.skip` takes no reason, so the reason goes into the title: a
 * report that lists a skipped test always tells the reader what it would take to run it.
 */
import { describe, test } from '@jest/globals';

type TestArgs = Parameters<typeof test>;
type DescribeArgs = Parameters<typeof describe>;

/** `test`, or, when `skipReason` is a string, `test.skip` with `[skipped: reason]` in the title. */
export function testUnless(skipReason: string | undefined): (...args: TestArgs) => void {
  if (skipReason === undefined) return test;
  return (name, fn, timeout) => test.skip(`${String(name)} [skipped: ${skipReason}]`, fn, timeout);
}

/** `describe`, or, when `skipReason` is a string, `describe.skip` with `[skipped: reason]` in the title. */
export function describeUnless(skipReason: string | undefined): (...args: DescribeArgs) => void {
  if (skipReason === undefined) return describe;
  return (name, fn) => describe.skip(`${String(name)} [skipped: ${skipReason}]`, fn);
}
