/** The soak (tools/soak/run.ts) as the system suites run it: a child process of its own, as `npm run soak` does. */
import { runTool } from './tool.ts';

/**
 * Runs `npm run soak -- <args>` from the repository root and resolves, once it exited, with its exit
 * code and everything it printed (stdout and stderr interleaved): the whole report, for a failure to show.
 */
export function runSoak(args: readonly string[]): Promise<{ code: number | null; output: string }> {
  return runTool('tools/soak/run.ts', args);
}
