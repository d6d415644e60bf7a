/**
 * notify: PostgreSQL's own NOTIFY ceiling on this machine, without any server of ours: where a fleet on
 * `PostgresBus` stops scaling. `sessions` publishing connections (1, 2, 4, …) each send their share of
 * `perLevel` notifications back to back, one transaction each (`SELECT pg_notify(channel, payload)` in
 * autocommit, as the bus publishes an event), with a payload the size of a bus message. The publishers
 * are pgbench's (`-c sessions -j 2`), a C client, so that the client is not what limits the rate (a
 * node-postgres client in one process tops out near 4,000 queries a second here); `listeners` sessions of
 * node-postgres LISTEN on the channel and count, as a bus's listening connections do. A level ends when
 * every listener has every notification. Run twice per level: with `synchronous_commit` on and off.
 *
 * Why it stops scaling: a notifying transaction takes one lock for the whole cluster at commit
 * (`PreCommit_Notify` locks the notification queue, held until the commit is done, so that queue order
 * is commit order), so notifying commits are serialized. With synchronous commit each holds it through
 * its WAL flush, and NOTIFY gets none of group commit's batching: the ceiling is about one flush per
 * notification, whatever the number of sessions. Without it the lock is held for microseconds, and the
 * ceiling is CPU (the server's, for the parse, the commit and each listener's read of the queue).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { PG_BIN } from '../../tools/chaos/postgres.ts';
import { now } from '../../tools/shared/clock.ts';
import { postgresCpuMs } from '../lib/postgres.ts';
import { num } from './rows.ts';
import type { BenchPostgres, Figures, RowSpec, Scenario } from '../scenario.ts';

type Params = { levels: number[]; perLevel: number; listeners: number; payloadBytes: number };

const CHANNEL = 'mcp-subscriptions-bench:notify';
const MODES = ['on', 'off'] as const;
type Mode = (typeof MODES)[number];

export const notify: Scenario<Params> = {
  name: 'notify',
  title:
    "notify: PostgreSQL's NOTIFY ceiling (no server of ours): 1 to 32 sessions publishing one notification per transaction, 2 sessions LISTENing; synchronous_commit on and off",
  full: { levels: [1, 2, 4, 8, 16, 32], perLevel: 6000, listeners: 2, payloadBytes: 200 },
  quick: { levels: [1, 4, 16], perLevel: 800, listeners: 2, payloadBytes: 200 },
  targets: [],
  postgresServer: true,
  timeoutMs: 300_000,
  rows: (p) => [
    ...MODES.map((mode): RowSpec => ({
      label: `notify: NOTIFY/s with synchronous_commit ${mode}, ${p.levels.join(' / ')} publishing sessions`,
      unit: '/s',
      value: (f) => p.levels.map((level) => num(f[`${mode} ${level} perSec`]).toFixed(0)).join(' / '),
    })),
    ...MODES.map((mode): RowSpec => ({
      label: `notify: synchronous_commit ${mode}: the ceiling, and the sessions past which more added < 10%`,
      unit: '',
      value: (f) => `${num(f[`${mode} ceilingPerSec`]).toFixed(0)}/s; saturated at ${String(f[`${mode} saturatesAt`])}`,
    })),
    ...MODES.map((mode): RowSpec => ({
      label: `notify: synchronous_commit ${mode}: PostgreSQL CPU per 1,000 NOTIFYs, and the cores it kept busy, at ${p.levels.at(-1)} sessions (its processes, /proc)`,
      unit: '',
      value: (f) =>
        `${num(f[`${mode} cpuMsPer1k`]).toFixed(1)} ms; ${((num(f[`${mode} cpuMsPer1k`]) * num(f[`${mode} ${p.levels.at(-1)} perSec`])) / 1e6).toFixed(2)} cores`,
    })),
    {
      label: 'notify: every listener got every notification, every level',
      unit: '',
      value: (f) => f['complete'],
    },
  ],
  async run(_ports, _targets, p, _nodes, _fleet, postgres) {
    if (postgres === undefined) throw new Error('notify: needs the bench PostgreSQL (postgresServer)');
    const figures: Figures = { complete: true };
    for (const mode of MODES) {
      let ceiling = 0;
      let saturatesAt: number | undefined;
      let previous = 0;
      for (const [i, level] of p.levels.entries()) {
        const { perSec, cpuMsPer1k, complete } = await measure(postgres, p, level, mode);
        figures[`${mode} ${level} perSec`] = perSec;
        figures['complete'] = figures['complete'] === true && complete;
        if (perSec > ceiling) ceiling = perSec;
        // The level past which more sessions first added less than 10%.
        if (i > 0 && perSec < previous * 1.1) saturatesAt ??= p.levels[i - 1];
        previous = perSec;
        if (level === p.levels.at(-1)) figures[`${mode} cpuMsPer1k`] = cpuMsPer1k;
      }
      figures[`${mode} ceilingPerSec`] = ceiling;
      figures[`${mode} saturatesAt`] =
        saturatesAt === undefined ? `still rising at ${p.levels.at(-1)} sessions` : `${saturatesAt} session(s)`;
    }
    return { ours: figures };
  },
};

async function connect(url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  return client;
}

/** Runs pgbench against `url` with `args`; resolves once it exits, rejects with its output on a failure. */
function pgbench(url: string, args: readonly string[], env: Record<string, string>): Promise<void> {
  const { hostname, port, pathname, username } = new URL(url);
  const child = spawn(
    path.join(PG_BIN, 'pgbench'),
    ['-h', hostname, '-p', port, '-U', decodeURIComponent(username), '-n', ...args, pathname.slice(1)],
    { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`pgbench exited ${code}: ${output}`))));
  });
}

/** One level: `sessions` pgbench publishers, `p.listeners` listeners, `p.perLevel` notifications. */
async function measure(
  postgres: BenchPostgres,
  p: Params,
  sessions: number,
  mode: Mode,
): Promise<{ perSec: number; cpuMsPer1k: number; complete: boolean }> {
  const listeners = await Promise.all(Array.from({ length: p.listeners }, () => connect(postgres.url)));
  const dir = mkdtempSync(path.join(os.tmpdir(), 'mcp-subscriptions-bench-notify-'));
  try {
    const counts = listeners.map(() => 0);
    let last = 0;
    listeners.forEach((client, i) => {
      client.on('notification', () => {
        counts[i]!++;
        last = now();
      });
    });
    await Promise.all(listeners.map((client) => client.query(`LISTEN "${CHANNEL}"`)));
    const script = path.join(dir, 'notify.sql');
    writeFileSync(script, `SELECT pg_notify('${CHANNEL}', '${'x'.repeat(p.payloadBytes)}');\n`);
    const share = Math.ceil(p.perLevel / sessions);
    const total = share * sessions;
    const cpu0 = postgresCpuMs(postgres.pid);
    const start = now();
    await pgbench(
      postgres.url,
      ['-f', script, '-c', String(sessions), '-j', String(Math.min(sessions, 2)), '-t', String(share)],
      { PGOPTIONS: `-c synchronous_commit=${mode}` },
    );
    const deadline = now() + 30_000;
    while (counts.some((count) => count < total) && now() < deadline) await new Promise((r) => setTimeout(r, 2));
    const cpu1 = postgresCpuMs(postgres.pid);
    return {
      perSec: total / ((last - start) / 1000),
      cpuMsPer1k: ((cpu1 - cpu0) / total) * 1000,
      complete: counts.every((count) => count >= total),
    };
  } finally {
    await Promise.all(listeners.map((client) => client.end().catch(() => {})));
    rmSync(dir, { recursive: true, force: true });
  }
}
