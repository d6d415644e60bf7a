/**
 * Skipping that says why. jest's `test.skip` takes no reason, so the reason goes into the title: a
 * report that lists a skipped test always tells the reader what it would take to run it. Under CI a
 * suite that needs something missing fails instead (`failUnderCi`): CI provides all of it, so a skip
 * there would be a suite silently not run.
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

/**
 * Under CI (`CI` set), a missing prerequisite is a failure, not a skip: when `missing` is a string,
 * registers `<what> > is there (under CI the server suites never skip)`, a test failing with it. Call it
 * at a suite file's top level, beside the `describeUnless(missing)` of the suites that need it.
 */
export function failUnderCi(what: string, missing: string | undefined): void {
  if (!process.env.CI || missing === undefined) return;
  describe(what, () => {
    test('is there (under CI the server suites never skip)', () => {
      throw new Error(missing);
    });
  });
}
