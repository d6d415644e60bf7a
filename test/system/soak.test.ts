/**
 * The soak (`npm run soak`, tools/soak/) at its `--quick` size, in `npm test`, so that it never rots:
 * a few hundred listen open/close cycles with random disconnects under a steady publish load, then
 * every leak check of the full run (streams, index entries, timers, handles, listeners, connections,
 * closed-exactly-once, heap after GC). The full 20,000-cycle run is `npm run soak`; its figures are in
 * docs/reliability.md.
 */
import { expect, test } from '@jest/globals';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

test('npm run soak -- --quick: every check passes', async () => {
  const child = spawn(
    process.execPath,
    ['--conditions=mcp-subscriptions-source', '--import', 'tsx', 'tools/soak/run.ts', '--quick'],
    { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  // The whole report on failure: which check, and what it saw.
  expect({ code, output }).toMatchObject({ code: 0 });
  expect(output).toContain('soak: all checks passed');
}, 90_000);
