/** A script of tools/ as the system suites run it: a child process of its own, as its npm script does. */
import { spawn } from 'node:child_process';
import { REPO_ROOT } from './sample-app.ts';

/**
 * Runs `script` (a path from the repository root, such as `tools/soak/run.ts`) with `args`, from the
 * repository root, and resolves once it exited with its exit code and everything it printed (stdout and
 * stderr interleaved): the whole report, for a failed test to show.
 */
export async function runTool(
  script: string,
  args: readonly string[],
): Promise<{ code: number | null; output: string }> {
  const child = spawn(process.execPath, ['--conditions=mcp-subscriptions-source', '--import', 'tsx', script, ...args], {
    cwd: REPO_ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  return { code, output };
}
