/** The chaos test (tools/chaos/run.ts) as the system suites run it: a child process of its own, as `npm run chaos` does. */
import { spawn } from 'node:child_process';
import { REPO_ROOT } from './sample-app.ts';

/**
 * Runs `npm run chaos -- <args>` from the repository root and resolves, once it exited, with its exit
 * code and everything it printed (stdout and stderr interleaved): every failure with its seed, step,
 * invariant and evidence, for a failed test to show.
 */
export async function runChaos(args: readonly string[]): Promise<{ code: number | null; output: string }> {
  const child = spawn(
    process.execPath,
    ['--conditions=mcp-subscriptions-source', '--import', 'tsx', 'tools/chaos/run.ts', ...args],
    { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  return { code, output };
}
