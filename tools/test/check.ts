// `npm test`: the static checks (tsc, ESLint, Prettier) and jest's unit and integration tiers, all at
// once. They are independent, and jest's tiers spend much of their time waiting on sockets and Redis, so
// running them side by side rather than one after another keeps a contributor's verdict within two
// minutes on two cores. jest's output streams as it comes; each check's output is printed when it ends,
// and a summary says which failed. Exits non-zero when any step failed.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const bin = (path: string): string => fileURLToPath(new URL(`../../node_modules/${path}`, import.meta.url));
const tier = fileURLToPath(new URL('./tier.ts', import.meta.url));

interface Step {
  readonly name: string;
  readonly args: readonly string[];
  /** jest streams its progress; the checks are quiet unless they fail, so they are buffered. */
  readonly stream?: boolean;
}

const steps: readonly Step[] = [
  { name: 'typecheck', args: [bin('typescript/bin/tsc'), '-p', 'tsconfig.json', '--noEmit'] },
  { name: 'eslint', args: [bin('eslint/bin/eslint.js'), '.'] },
  { name: 'prettier', args: [bin('prettier/bin/prettier.cjs'), '--check', '.'] },
  // Three workers, not jest's default of one per core less one: on two cores that is one, and the tiers
  // spend most of their time waiting (loopback sockets, Redis, PostgreSQL, timers), not computing.
  {
    name: 'jest (unit, integration)',
    args: ['--import', 'tsx', tier, 'unit', 'integration', '--', '--maxWorkers=3'],
    stream: true,
  },
];

function run(step: Step): Promise<{ step: Step; code: number; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, step.args, { stdio: step.stream ? 'inherit' : ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    child.once('close', (code, signal) => resolve({ step, code: code ?? (signal === null ? 1 : 128), output }));
  });
}

const started = Date.now();
const results = await Promise.all(
  steps.map((step) =>
    run(step).then((result) => {
      if (!step.stream && (result.code !== 0 || result.output.trim() !== '')) {
        process.stdout.write(`\n── ${step.name} ──\n${result.output}`);
      }
      return result;
    }),
  ),
);
const failed = results.filter((result) => result.code !== 0);
const seconds = ((Date.now() - started) / 1000).toFixed(0);
for (const { step, code } of results) {
  process.stdout.write(`${code === 0 ? 'ok  ' : 'FAIL'} ${step.name}\n`);
}
process.stdout.write(
  failed.length === 0 ? `npm test: all passed in ${seconds} s\n` : `npm test: ${failed.length} failed\n`,
);
process.exit(failed.length === 0 ? 0 : 1);
