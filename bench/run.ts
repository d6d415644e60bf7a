/**
 * `npm run bench [-- --quick] [--only=fanout,idle] [--profile]`: the benchmark suite, end to end. For each
 * scenario it starts the three servers (our host app, the same app on the SDK's own listen, the
 * `node:http` ceiling), each in its own process, forks the load generator in another, prints the
 * scenario's parameters and figures, and stops every process. At the end it prints one table, and
 * writes `bench/results/<date>[-quick].json` and the SVG chart (`docs/benchmarks.svg` for a full run;
 * an `--only` run writes `bench/results/<date>-only-<names>[-quick].*`, never over a full run's files).
 */
import { execFileSync, fork, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { renderChart } from './chart.ts';
import type { LoadRequest, ScenarioResult, Target } from './load.ts';
import { buildRows, formatTable, type Report } from './report.ts';
import { SCENARIOS } from './scenarios.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const NODE_ARGS = ['--conditions=mcp-subscriptions-source', '--import', 'tsx'];
const SERVER_FILES: Record<Target, string[]> = {
  ours: ['bench/servers/host.ts', 'ours'],
  sdk: ['bench/servers/host.ts', 'sdk'],
  ceiling: ['bench/servers/ceiling.ts'],
};

const children = new Set<ChildProcess>();

function killAll(): void {
  for (const child of children) child.kill('SIGKILL');
  children.clear();
}
process.on('exit', killAll);
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    killAll();
    process.exit(130);
  });
}

function track(child: ChildProcess): ChildProcess {
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}

/** Starts one server; resolves with its port once it printed it. */
function startServer(target: Target, profileDir: string | undefined): Promise<{ port: number; child: ChildProcess }> {
  const [file, ...args] = SERVER_FILES[target];
  // --profile: CPU profiles per server in <dir>/<target>/ (written when it exits; the largest is the
  // main thread's, the others tsx's loader thread's) and a heap snapshot per GC'd usage.
  const profiling = profileDir === undefined ? [] : ['--cpu-prof', `--cpu-prof-dir=${path.join(profileDir, target)}`];
  const child = track(
    spawn(process.execPath, ['--expose-gc', ...profiling, ...NODE_ARGS, file as string, ...args], {
      cwd: ROOT,
      stdio: ['pipe', 'pipe', 'inherit'],
      env: profileDir === undefined ? process.env : { ...process.env, BENCH_PROFILE_DIR: profileDir },
    }),
  );
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${target} server did not start within 30 s`)), 30_000);
    let out = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const line = out.split('\n').find((l) => l.startsWith('{'));
      if (line === undefined || !out.includes('\n')) return;
      clearTimeout(timer);
      resolve({ port: (JSON.parse(line) as { port: number }).port, child });
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${target} server exited with ${code}`));
    });
  });
}

/** Stops a server: closing its stdin ends it; SIGKILL after 3 s. */
function stopServer(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), 3000);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.stdin!.end();
  });
}

/** Runs one scenario in a fresh load-generator process. */
function runLoad(request: LoadRequest): Promise<ScenarioResult> {
  const child = track(
    fork(path.join(ROOT, 'bench/load.ts'), [], {
      cwd: ROOT,
      execArgv: NODE_ARGS,
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    }),
  );
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(
        new Error(`${request.scenario}: the load generator did not finish within ${request.timeoutMs + 10_000} ms`),
      );
    }, request.timeoutMs + 10_000);
    child.once('message', (message: { ok: boolean; result?: ScenarioResult; error?: string }) => {
      clearTimeout(timer);
      if (message.ok) resolve(message.result!);
      else reject(new Error(`${request.scenario}: ${message.error}`));
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${request.scenario}: the load generator exited with ${code}`));
    });
    child.send(request);
  });
}

/** The commit measured, and whether the engine (lib/, adapters/) differs from it. */
function gitState(): { commit: string; engineDirty: boolean } {
  try {
    const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT }).toString().trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--', 'lib', 'adapters'], { cwd: ROOT })
      .toString()
      .trim();
    return { commit, engineDirty: dirty !== '' };
  } catch {
    return { commit: 'unknown', engineDirty: false };
  }
}

function localDate(): string {
  const d = new Date();
  return `${d.getFullYear()}-${String(d.getMonth() + 1).padStart(2, '0')}-${String(d.getDate()).padStart(2, '0')}`;
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const quick = args.includes('--quick');
  const profile = args.includes('--profile');
  const only = args
    .find((a) => a.startsWith('--only='))
    ?.slice('--only='.length)
    .split(',');
  const unknown = only?.filter((name) => !SCENARIOS.some((s) => s.name === name)) ?? [];
  if (unknown.length > 0) {
    throw new Error(`--only: no scenario ${unknown.join(', ')}; known: ${SCENARIOS.map((s) => s.name).join(', ')}`);
  }
  const specs = SCENARIOS.filter((s) => only === undefined || only.includes(s.name));
  const started = Date.now();
  const report: Report = {
    date: new Date().toISOString(),
    mode: quick ? 'quick' : 'full',
    machine: {
      node: process.version,
      platform: `${os.platform()} ${os.release()} ${os.arch()}`,
      cpus: os.cpus().length,
      cpuModel: os.cpus()[0]?.model ?? 'unknown',
      memoryGb: Math.round(os.totalmem() / 2 ** 30),
    },
    git: gitState(),
    scenarios: {},
    rows: [],
    durationS: 0,
  };
  console.log(
    `mcp-subscriptions benchmarks (${report.mode}): node ${process.version}, ${report.machine.cpus} × ${report.machine.cpuModel}`,
  );
  console.log(
    "servers: ours = Express + mcpSubscriptions() + SDK; sdk = the same app on the SDK's own listen; ceiling = node:http",
  );
  for (const spec of specs) {
    const params = quick ? spec.quick : spec.full;
    console.log(`\n▶ ${spec.name}: ${spec.title}\n  params: ${JSON.stringify(params)}`);
    const t0 = Date.now();
    const profileDir = profile ? path.join(ROOT, 'bench/results/profiles', `${localDate()}-${spec.name}`) : undefined;
    if (profileDir !== undefined) mkdirSync(profileDir, { recursive: true });
    const servers = await Promise.all(spec.targets.map((t) => startServer(t, profileDir)));
    const ports = Object.fromEntries(spec.targets.map((t, i) => [t, servers[i]!.port])) as Record<Target, number>;
    let result: ScenarioResult;
    try {
      result = await runLoad({ scenario: spec.name, ports, targets: spec.targets, params, timeoutMs: spec.timeoutMs });
    } finally {
      await Promise.all(servers.map((s) => stopServer(s.child)));
    }
    report.scenarios[spec.name] = { title: spec.title, params, result };
    const rows = buildRows(spec, params, result);
    report.rows.push(...rows);
    console.log(formatTable(rows, false));
    console.log(`  (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
  }
  report.durationS = (Date.now() - started) / 1000;
  console.log(`\nAll figures (${report.mode} run, ${report.durationS.toFixed(0)} s):\n`);
  console.log(formatTable(report.rows, true));

  const resultsDir = path.join(ROOT, 'bench/results');
  mkdirSync(resultsDir, { recursive: true });
  // A partial run never replaces the files of the day's full run (quick ones stay ignored: `*-quick.*`).
  const base = `${localDate()}${only === undefined ? '' : `-only-${only.join('-')}`}${quick ? '-quick' : ''}`;
  writeFileSync(path.join(resultsDir, `${base}.json`), `${JSON.stringify(report, null, 2)}\n`);
  const chartPath =
    quick || only !== undefined ? path.join(resultsDir, `${base}.svg`) : path.join(ROOT, 'docs/benchmarks.svg');
  writeFileSync(chartPath, renderChart(report));
  console.log(`\nwrote bench/results/${base}.json and ${path.relative(ROOT, chartPath)}`);
}

main().then(
  () => {
    killAll();
    process.exit(0);
  },
  (error: unknown) => {
    console.error(error);
    killAll();
    process.exit(1);
  },
);
