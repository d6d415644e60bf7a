/** The chaos test (tools/chaos/run.ts) as the system suites run it: a child process of its own, as `npm run chaos` does. */
import { runTool } from './tool.ts';

/**
 * Runs `npm run chaos -- <args>` and resolves with its exit code and everything it printed: every
 * failure with its seed, step, invariant and evidence, for a failed test to show.
 */
export function runChaos(args: readonly string[]): Promise<{ code: number | null; output: string }> {
  return runTool('tools/chaos/run.ts', args);
}
