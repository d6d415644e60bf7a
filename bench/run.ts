/**
 * `npm run bench [-- --quick] [--only=fanout,idle] [--profile]`: the benchmark suite, end to end. For each
 * scenario it starts the three servers (our host app, the same app on the SDK's own listen, the
 * `node:http` ceiling), plus those of the scenario's framework rows (the ceiling mounted in Express; our
 * host app on Fastify and the ceiling mounted in Fastify) and of its metrics rows (ours with an
 * OpenTelemetry `MeterProvider`, which it scrapes as Prometheus would while the scenario runs), each in
 * its own process, forks the load generator in another, prints the scenario's parameters and figures,
 * and stops every process. At the end it prints one table, and
 * writes `bench/results/<date>[-quick].json` and the SVG chart (`docs/benchmarks.svg` for a full run;
 * an `--only` run writes `bench/results/<date>-only-<names>[-quick].*`, never over a full run's files).
 *
 * A scenario with `redisNodes` (the cross-node one) also starts two more `ours` processes, node A and
 * node B, joined by a `RedisBus` on `BENCH_REDIS_URL` (default `redis://127.0.0.1:6379`) under a
 * channel prefix of this run's own. When that Redis does not answer, the scenario is reported as
 * skipped with the reason, unless `CI` is set: then the run fails.
 *
 * A fleet scenario (`fleet`) starts a redis-server of its own on a free loopback port, and for each
 * routing mode of the bus its nodes, several per process (`bench/servers/fleet.ts`), then the load.
 *
 * PostgreSQL: the `pg:` routings of the fleet, the cross-node scenario's nodes C and D
 * (`postgresNodes`), and the NOTIFY ceiling (`postgresServer`) run on a PostgreSQL of the bench's own,
 * a private cluster (initdb on a free loopback port, tools/chaos/postgres.ts), durable as a production
 * server is (fsync and synchronous commit on), so that its CPU, read from /proc, is the bench's traffic
 * alone and the shared server on 5432 is never touched.
 */
import { execFileSync, fork, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { PostgresProcess, privatePostgresMissing } from '../tools/chaos/postgres.ts';
import { renderChart } from './chart.ts';
import type { LoadRequest } from './load.ts';
import { buildRows, formatTable, skippedRow, type Report } from './report.ts';
import type { BenchPostgres, Figures, Nodes, Ports, Scenario, ScenarioResult, Target } from './scenario.ts';
import { SCENARIOS } from './scenarios/index.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const NODE_ARGS = ['--conditions=mcp-subscriptions-source', '--import', 'tsx'];
const REDIS_URL = process.env['BENCH_REDIS_URL'] ?? 'redis://127.0.0.1:6379';
/** This run's own channels: runs (and tests) sharing one Redis never hear each other. */
const CHANNEL_PREFIX = `mcp-subscriptions-bench-${process.pid}-${Date.now().toString(36)}`;
const SERVER_FILES: Record<Target, string[]> = {
  ours: ['bench/servers/host.ts', 'ours'],
  sdk: ['bench/servers/host.ts', 'sdk'],
  ceiling: ['bench/servers/ceiling.ts'],
  'ceiling-express': ['bench/servers/ceiling.ts', 'express'],
  'ours-fastify': ['bench/servers/host.ts', 'fastify'],
  'ceiling-fastify': ['bench/servers/ceiling.ts', 'fastify'],
  'ours-metrics': ['bench/servers/host.ts', 'metrics'],
};
/**
 * How often ours with metrics is scraped (`BENCH_SCRAPE_MS`): every second by default, 15 times as often
 * as a common Prometheus `scrape_interval` of 15 s, so that the figures bound what scraping costs from
 * above (a scrape then falls in about one fan-out round of four).
 */
const SCRAPE_MS = Number(process.env['BENCH_SCRAPE_MS'] ?? 1000);
if (!Number.isInteger(SCRAPE_MS) || SCRAPE_MS <= 0) {
  throw new Error(`BENCH_SCRAPE_MS: expected a positive integer (ms), got ${process.env['BENCH_SCRAPE_MS']}`);
}

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

/**
 * Starts one server (`name` is `ours`, `sdk`, `ceiling`, or `ours-a`/`ours-b` for the nodes joined over
 * Redis, with `env` saying how); resolves with its port once it printed it.
 */
async function startServer(
  name: string,
  target: Target,
  profileDir: string | undefined,
  env: Record<string, string> = {},
): Promise<{ port: number; child: ChildProcess }> {
  const { info, child } = await spawnServer(name, SERVER_FILES[target], profileDir, env);
  return { port: info['port'] as number, child };
}

/**
 * Runs `node <file> <args...>` as a server process; resolves with the first JSON line it prints on
 * stdout (its port, or a fleet's ports) once it printed it.
 */
function spawnServer(
  name: string,
  [file, ...args]: readonly string[],
  profileDir: string | undefined,
  env: Record<string, string>,
): Promise<{ info: Record<string, unknown>; child: ChildProcess }> {
  // --profile: CPU profiles per server in <dir>/<name>/ (written when it exits; the largest is the
  // main thread's, the others tsx's loader thread's) and a heap snapshot per GC'd usage.
  const profiling = profileDir === undefined ? [] : ['--cpu-prof', `--cpu-prof-dir=${path.join(profileDir, name)}`];
  const child = track(
    spawn(process.execPath, ['--expose-gc', ...profiling, ...NODE_ARGS, file as string, ...args], {
      cwd: ROOT,
      stdio: ['pipe', 'pipe', 'inherit'],
      env: { ...process.env, ...(profileDir === undefined ? {} : { BENCH_PROFILE_DIR: profileDir }), ...env },
    }),
  );
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} server did not start within 30 s`)), 30_000);
    let out = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const line = out.split('\n').find((l) => l.startsWith('{'));
      if (line === undefined || !out.includes('\n')) return;
      clearTimeout(timer);
      resolve({ info: JSON.parse(line) as Record<string, unknown>, child });
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${name} server exited with ${code}`));
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

/**
 * Scrapes ours with metrics (`GET /control/metrics`, the Prometheus exporter's handler) every
 * `SCRAPE_MS`, one scrape at a time as Prometheus does (a tick that finds one in flight is skipped).
 * `stop()` (idempotent) ends the timer, takes one last scrape, and resolves with what was scraped: the
 * count, failures, and the metric families of the last scrape other than the exporter's `target_info`
 * (with no other instrumented code in the host, the library's own instruments).
 */
function startScraper(port: number): { stop(): Promise<Figures> } {
  let scrapes = 0;
  let failures = 0;
  let last = '';
  let inFlight: Promise<void> | undefined;
  const scrape = (): Promise<void> =>
    fetch(`http://127.0.0.1:${port}/control/metrics`).then(
      async (response) => {
        const body = await response.text();
        if (response.ok) {
          scrapes++;
          last = body;
        } else {
          failures++;
        }
      },
      () => {
        failures++;
      },
    );
  const timer = setInterval(() => {
    inFlight ??= scrape().finally(() => (inFlight = undefined));
  }, SCRAPE_MS);
  let stopped: Promise<Figures> | undefined;
  return {
    stop() {
      clearInterval(timer);
      stopped ??= (async () => {
        await inFlight;
        await scrape();
        const families = last
          .split('\n')
          .filter((line) => line.startsWith('# TYPE '))
          .map((line) => line.split(' ')[2] ?? '')
          .filter((name) => name !== 'target_info');
        return { scrapes, scrapeFailures: failures, metricFamilies: families.length, metricNames: families.join(' ') };
      })();
      return stopped;
    },
  };
}

/** Node A and node B: `ours` joined over Redis, in this run's channel prefix. */
function startNodes(profileDir: string | undefined): Promise<{ port: number; child: ChildProcess }>[] {
  return (['a', 'b'] as const).map((id) =>
    startServer(`ours-${id}`, 'ours', profileDir, {
      BENCH_REDIS_URL: REDIS_URL,
      BENCH_REDIS_PREFIX: CHANNEL_PREFIX,
      BENCH_NODE_ID: id.toUpperCase(),
    }),
  );
}

/** Node C and node D: `ours` joined over the bench's PostgreSQL, in this run's channel prefix. */
function startPostgresNodes(
  postgres: BenchPostgres,
  profileDir: string | undefined,
): Promise<{ port: number; child: ChildProcess }>[] {
  return (['c', 'd'] as const).map((id) =>
    startServer(`ours-${id}`, 'ours', profileDir, {
      BENCH_DATABASE_URL: postgres.url,
      BENCH_REDIS_PREFIX: 'mcp-subscriptions-bench',
      BENCH_NODE_ID: id.toUpperCase(),
    }),
  );
}

/**
 * A PostgreSQL of the bench's own: durable (fsync, synchronous commit), with connection slots for a
 * fleet's pools (8 nodes × 10 + their listening sessions).
 */
async function startOwnPostgres(): Promise<{ postgres: BenchPostgres; stop(): Promise<void> }> {
  const server = await PostgresProcess.start({ durable: true, maxConnections: 200 });
  return { postgres: { url: server.url(), pid: server.pid as number }, stop: () => server.stop() };
}

/** Whether a scenario (with these params) runs on the bench's PostgreSQL. */
function needsPostgres(spec: Scenario, params: unknown): boolean {
  return (
    spec.postgresNodes === true ||
    spec.postgresServer === true ||
    (spec.fleet?.routings(params).some((routing) => routing.startsWith('pg:')) ?? false)
  );
}

/** Why Redis cannot be used (it does not answer PING within 3 s), or `undefined` when it answers. */
async function redisProblem(url = REDIS_URL): Promise<string | undefined> {
  const client = new Redis(url, {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: 3000,
    commandTimeout: 3000,
  });
  // The socket's own error (ECONNREFUSED, ENOTFOUND) says more than connect()'s "Connection is closed".
  let socketError: Error | undefined;
  client.on('error', (error: Error) => (socketError ??= error));
  try {
    await client.connect();
    const reply: string = await client.ping();
    return reply === 'PONG' ? undefined : `PING answered ${JSON.stringify(reply)}`;
  } catch (error) {
    return (socketError ?? (error instanceof Error ? error : new Error(String(error)))).message;
  } finally {
    client.disconnect();
  }
}

/** A free loopback port (the OS's pick; closed again before it is used). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address !== null ? address.port : 0));
    });
  });
}

/**
 * A redis-server of the bench's own on a free loopback port, without persistence: what it serves, and
 * so its `INFO` counters, is the fleet scenario's traffic only (the shared 6379 is never touched).
 */
async function startOwnRedis(): Promise<{ port: number; child: ChildProcess }> {
  const port = await freePort();
  const child = track(
    spawn(
      'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--loglevel', 'warning'],
      { stdio: ['ignore', 'ignore', 'inherit'] },
    ),
  );
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`redis-server exited with ${child.exitCode}`);
    if ((await redisProblem(`redis://127.0.0.1:${port}`)) === undefined) return { port, child };
    if (Date.now() > deadline) throw new Error(`redis-server on port ${port} did not answer within 10 s`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * A fleet scenario: one Redis of its own, and per routing mode fresh node processes (the nodes split
 * evenly over `spec.fleet.processes`, channel prefix of their own) and one load run; the modes' figures
 * merged by the scenario.
 */
async function runFleet(spec: Scenario, params: unknown, profileDir: string | undefined): Promise<ScenarioResult> {
  const fleet = spec.fleet!;
  const redis = await startOwnRedis();
  const own = needsPostgres(spec, params) ? await startOwnPostgres() : undefined;
  try {
    const byRouting: Record<string, Figures> = {};
    const count = fleet.nodes(params);
    const per = Math.ceil(count / fleet.processes);
    const groups = Array.from({ length: fleet.processes }, (_, g) =>
      Array.from({ length: Math.min(per, count - g * per) }, (_, i) => g * per + i),
    ).filter((group) => group.length > 0);
    for (const routing of fleet.routings(params)) {
      const env = {
        ...(routing.startsWith('pg:')
          ? { BENCH_DATABASE_URL: own!.postgres.url }
          : { BENCH_REDIS_URL: `redis://127.0.0.1:${redis.port}` }),
        // PostgreSQL keeps 63 bytes of a channel name: a prefix of its own per routing, short.
        BENCH_REDIS_PREFIX: routing.startsWith('pg:')
          ? `bench-fleet-${routing.slice(3)}`
          : `${CHANNEL_PREFIX}-fleet-${routing}`,
        BENCH_ROUTING: routing,
      };
      const started = await Promise.all(
        groups.map((group, g) =>
          spawnServer(
            `fleet-${routing}-${g}`,
            ['bench/servers/fleet.ts', group.map((i) => `n${i}`).join(',')],
            profileDir,
            env,
          ),
        ),
      );
      const ports = started.flatMap((s) => s.info['ports'] as number[]);
      try {
        const result = await runLoad({
          scenario: spec.name,
          ports: {} as Ports,
          targets: spec.targets,
          params: params as Record<string, unknown>,
          timeoutMs: spec.timeoutMs,
          fleet: {
            ports,
            processes: groups,
            redisPort: redis.port,
            routing,
            ...(routing.startsWith('pg:') ? { postgres: own!.postgres } : {}),
          },
        });
        byRouting[routing] = result.ours ?? {};
      } finally {
        await Promise.all(started.map((s) => stopServer(s.child)));
      }
    }
    return fleet.merge(byRouting);
  } finally {
    redis.child.kill('SIGKILL');
    await own?.stop();
  }
}

/** Whether this is a CI run, where a scenario must never be skipped quietly. */
function inCi(): boolean {
  const ci = process.env['CI'];
  return ci !== undefined && ci !== '' && ci !== '0' && ci !== 'false';
}

/** The reason `spec` cannot run here, or `undefined`; throws under CI. */
async function skipReason(spec: Scenario, params: unknown): Promise<string | undefined> {
  const postgresMissing = needsPostgres(spec, params) ? privatePostgresMissing() : undefined;
  if (postgresMissing !== undefined) {
    const reason = `${postgresMissing} (the scenario starts a PostgreSQL of its own)`;
    if (inCi()) throw new Error(`${spec.name}: ${reason}. CI is set, so it is not skipped.`);
    return reason;
  }
  if (spec.postgresServer === true) return undefined;
  if (spec.fleet !== undefined) {
    if (spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0) return undefined;
    const reason = 'redis-server is not installed (the fleet scenario starts a Redis of its own)';
    if (inCi()) throw new Error(`${spec.name}: ${reason}. CI is set, so it is not skipped.`);
    return reason;
  }
  if (spec.redisNodes !== true) return undefined;
  const problem = await redisProblem();
  if (problem === undefined) return undefined;
  const reason = `Redis at ${REDIS_URL} does not answer (${problem}); set BENCH_REDIS_URL`;
  if (inCi()) throw new Error(`${spec.name}: ${reason}. CI is set, so it is not skipped.`);
  return reason;
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
  // Strict: a flag mistyped, or given in a form not read, must stop the run, not start the whole bench
  // (`--only fanout` once ran every scenario and wrote over the full run's results).
  const { values } = parseArgs({
    options: { quick: { type: 'boolean' }, profile: { type: 'boolean' }, only: { type: 'string' } },
    strict: true,
    allowPositionals: false,
  });
  const quick = values.quick === true;
  const profile = values.profile === true;
  const only = values.only?.split(',');
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
      loadAvg: Math.round((os.loadavg()[0] ?? 0) * 100) / 100,
    },
    git: gitState(),
    scenarios: {},
    rows: [],
    durationS: 0,
  };
  console.log(
    `mcp-subscriptions benchmarks (${report.mode}): node ${process.version}, ${report.machine.cpus} × ${report.machine.cpuModel}, load average ${report.machine.loadAvg}`,
  );
  console.log(
    "servers: ours = Express + mcpSubscriptions() + SDK; sdk = the same app on the SDK's own listen; ceiling = node:http",
  );
  if (specs.some((s) => s.targets.includes('ours-fastify'))) {
    console.log(
      'Fastify rows: ours on Fastify = the same app on Fastify 5 + the Fastify plugin; ceiling in Fastify = the ceiling as a Fastify route',
    );
  }
  if (specs.some((s) => s.targets.includes('ours-metrics'))) {
    console.log(
      `metrics rows: ours with metrics = ours with an OpenTelemetry MeterProvider (sdk-metrics, the Prometheus exporter as its reader) registered before its hub, scraped every ${SCRAPE_MS} ms`,
    );
  }
  if (specs.some((s) => s.redisNodes === true)) {
    console.log(
      `cross-node: ours-a and ours-b = ours joined by a RedisBus on ${REDIS_URL}, channel prefix ${CHANNEL_PREFIX}`,
    );
  }
  if (specs.some((s) => needsPostgres(s, quick ? s.quick : s.full))) {
    console.log(
      'PostgreSQL rows: a private PostgreSQL of the bench (initdb on a free port, fsync and synchronous commit on); ours-c and ours-d = ours joined by a PostgresBus on it',
    );
  }
  for (const spec of specs) {
    const params = quick ? spec.quick : spec.full;
    console.log(`\n▶ ${spec.name}: ${spec.title}\n  params: ${JSON.stringify(params)}`);
    const t0 = Date.now();
    const profileDir = profile ? path.join(ROOT, 'bench/results/profiles', `${localDate()}-${spec.name}`) : undefined;
    if (profileDir !== undefined) mkdirSync(profileDir, { recursive: true });
    const skipped = await skipReason(spec, params);
    if (skipped !== undefined) {
      console.log(`  skipped: ${skipped}`);
      report.scenarios[spec.name] = { title: spec.title, params, result: {}, skipped };
      report.rows.push(skippedRow(spec, skipped));
      continue;
    }
    if (spec.fleet !== undefined) {
      const result = await runFleet(spec, params, profileDir);
      report.scenarios[spec.name] = { title: spec.title, params, result };
      const rows = buildRows(spec, params, result);
      report.rows.push(...rows);
      console.log(formatTable(rows, false));
      console.log(`  (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
      continue;
    }
    const own = needsPostgres(spec, params) ? await startOwnPostgres() : undefined;
    const servers = await Promise.all([
      ...spec.targets.map((t) => startServer(t, t, profileDir)),
      ...(spec.redisNodes === true ? startNodes(profileDir) : []),
      ...(spec.postgresNodes === true && own !== undefined ? startPostgresNodes(own.postgres, profileDir) : []),
    ]);
    const ports = Object.fromEntries(spec.targets.map((t, i) => [t, servers[i]!.port])) as Record<Target, number>;
    const n = spec.targets.length;
    const nodes: Nodes | undefined =
      spec.redisNodes === true
        ? {
            a: servers[n]!.port,
            b: servers[n + 1]!.port,
            ...(spec.postgresNodes === true ? { c: servers[n + 2]!.port, d: servers[n + 3]!.port } : {}),
          }
        : undefined;
    // Scraped from start to end, the other servers' turns included, as Prometheus would.
    const scraper = spec.targets.includes('ours-metrics') ? startScraper(ports['ours-metrics']) : undefined;
    let result: ScenarioResult;
    try {
      result = await runLoad({
        scenario: spec.name,
        ports,
        targets: spec.targets,
        params,
        timeoutMs: spec.timeoutMs,
        ...(nodes !== undefined ? { nodes } : {}),
        ...(own !== undefined ? { postgres: own.postgres } : {}),
      });
      if (scraper !== undefined) result['ours-metrics'] = { ...result['ours-metrics'], ...(await scraper.stop()) };
    } finally {
      await scraper?.stop();
      await Promise.all(servers.map((s) => stopServer(s.child)));
      await own?.stop();
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
