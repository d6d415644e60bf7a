/**
 * `npm run chaos -- --seed N [--steps N] [--cluster | --postgres] [--quick] [--runs N] [--verbose]
 * [--print-schedule] [--json FILE]`: issue 29's chaos test (on PostgreSQL: issue 30's). See `--help`, harness.ts (the run), schedule.ts (what a seed
 * draws) and checks.ts (the five invariants); docs/reliability.md has the figures.
 */
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { INVARIANT_NAMES, type Invariant } from './checks.ts';
import { runChaos, type ChaosReport } from './harness.ts';
import { describeStep, schedule, type Engine } from './schedule.ts';

const HELP = `npm run chaos -- [options]

Issue 29's chaos test: three sample processes (sample-app/express) joined over a Redis of the run's
own (or, with --cluster, a Redis Cluster of 3 masters and 3 replicas on loopback ports 7500-7999; with
--postgres, a private PostgreSQL cluster, initdb on a free loopback port, a role per node) run random
listens, closes, cancels and publishes over a small key pool while faults are injected:

  single Redis   kill -9 of redis-server and restart on the same port; CLIENT KILL of one node's
                 bus connections (publisher, subscriber or both); CLIENT PAUSE for 0.3 to 1.5 s
  --cluster      kill -9 of the master serving a pool key's channel (its replica takes over, the
                 dead node comes back as a replica); that slot moved to another master
  --postgres     kill -9 of the postmaster, started again (crash recovery; every LISTEN and the
                 NOTIFY queue lost); pg_terminate_backend() of one node's listening connection; one
                 node's pool exhausted: its role limited to the connections it keeps (ALTER ROLE
                 ... CONNECTION LIMIT) and its pool's sessions terminated, so that its publishes get
                 no connection until the limit is lifted

After each fault is healed the run waits for recovery (bounded), then checks:
  1 every open stream learned of every key it follows that changed after its ack
  2 no stream got a key it does not follow or may not read
  3 each node's subscriptions equal the keys its open streams follow (no leak, no hole): on Redis
    as CLIENT LIST and PUBSUB NUMSUB count them; on PostgreSQL, which shows no session another's
    LISTENs, by a probe NOTIFY on every channel (the nodes that hear it are those that LISTEN),
    and each bus's count of confirmed LISTENs
  4 each hub's counters add up (opened = open + closed; zero per principal with nothing open)
  5 notifications per stream and key <= changes after its ack + gaps it lived through

A failure prints the seed, the step, the invariant and the evidence; the exit code is 1 (2 when the
run itself could not be carried out). The same seed replays the same schedule of operations and
faults; the timing of a real machine, and so the interleavings, may differ between replays.

Options:
  --seed N            the schedule's seed (default 1)
  --steps N           client operations per run (default 300; --quick: 60)
  --quick             the CI size
  --cluster           the Redis Cluster mode
  --postgres          the PostgreSQL mode (PG_BIN: PostgreSQL's binaries, default
                      /usr/lib/postgresql/15/bin)
  --runs N            run seeds N, N+1, ... N+runs-1 one after the other (default 1)
  --verbose           print every step as it is launched
  --print-schedule    print the seed's schedule and exit, starting nothing
  --json FILE         write every run's report (failures with their evidence) to FILE
  --help              this text`;

function intFlag(name: string, value: string | undefined, fallback: number, min: number): number {
  if (value === undefined) return fallback;
  const parsed = /^\d+$/.test(value) ? Number(value) : Number.NaN;
  if (!Number.isSafeInteger(parsed) || parsed < min) {
    console.error(`chaos: --${name} expects an integer of at least ${min}, got ${JSON.stringify(value)}`);
    process.exit(2);
  }
  return parsed;
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      seed: { type: 'string' },
      steps: { type: 'string' },
      runs: { type: 'string' },
      cluster: { type: 'boolean', default: false },
      postgres: { type: 'boolean', default: false },
      quick: { type: 'boolean', default: false },
      verbose: { type: 'boolean', default: false },
      'print-schedule': { type: 'boolean', default: false },
      json: { type: 'string' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    console.log(HELP);
    return 0;
  }
  const seed = intFlag('seed', values.seed, 1, 0);
  const steps = intFlag('steps', values.steps, values.quick ? 60 : 300, 1);
  const runs = intFlag('runs', values.runs, 1, 1);
  if (values.cluster && values.postgres) {
    console.error('chaos: --cluster and --postgres are two engines: pick one');
    return 2;
  }
  const engine: Engine = values.postgres ? 'postgres' : values.cluster ? 'cluster' : 'redis';
  const flag = engine === 'redis' ? '' : ` --${engine}`;
  if (values['print-schedule']) {
    for (const step of schedule({ seed, steps, engine })) console.log(describeStep(step));
    return 0;
  }
  const reports: ChaosReport[] = [];
  for (let run = 0; run < runs; run++) {
    const current = seed + run;
    const mode = { redis: 'single Redis', cluster: 'Redis Cluster', postgres: 'PostgreSQL' }[engine];
    console.log(`chaos: seed ${current}, ${steps} steps, ${mode}`);
    const report = await runChaos({ seed: current, steps, engine, verbose: values.verbose });
    reports.push(report);
    const { counts } = report;
    const faults = Object.entries(counts.faults)
      .map(([kind, count]) => `${kind} ${count}`)
      .join(', ');
    console.log(
      `chaos: seed ${current}: ${counts.listens} listens (${counts.acknowledged} acknowledged), ${counts.changes} changes, ` +
        `${counts.notifications} notifications, faults: ${faults || 'none'}, ${counts.quiescences} checks, ` +
        `${(report.durationMs / 1000).toFixed(1)} s: ${report.failures.length === 0 ? 'ok' : `${report.failures.length} FAILED`}`,
    );
    if (report.failures.length > 0) {
      console.log(`chaos: replay with: npm run chaos -- --seed ${current} --steps ${steps}${flag}`);
    }
  }
  const failed = reports.filter((report) => report.failures.length > 0);
  const byInvariant = new Map<Invariant, number>();
  for (const report of reports) {
    for (const failure of report.failures)
      byInvariant.set(failure.invariant, (byInvariant.get(failure.invariant) ?? 0) + 1);
  }
  if (values.json !== undefined) writeFileSync(values.json, `${JSON.stringify(reports, null, 2)}\n`);
  if (failed.length === 0) {
    console.log(`chaos: all invariants held (${reports.length} run(s))`);
    return 0;
  }
  const summary = [...byInvariant]
    .sort(([a], [b]) => a - b)
    .map(([invariant, count]) => `${invariant} (${INVARIANT_NAMES[invariant]}): ${count}`)
    .join('; ');
  console.log(`chaos: ${failed.length} of ${reports.length} run(s) FAILED; violations by invariant: ${summary}`);
  console.log(`chaos: failing seeds: ${failed.map((report) => report.seed).join(', ')}`);
  return 1;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error('chaos: the run itself failed:', error);
    process.exit(2);
  },
);
