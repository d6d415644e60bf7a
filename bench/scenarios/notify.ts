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
 *
 * Then what a listener's own channels cost the server: each listening session reads every notification
 * of the queue and, in PostgreSQL 15, compares its channel with each channel it LISTENs to, one by one.
 * The same load at `channelsAt` sessions, with each listener LISTENing to `channels` more channels that
 * are never notified (as a node of interest routing LISTENs to every key its streams follow).
 *
 * Last, what `publishIn()` does to a host's own writes: transactions that insert a row (as a host's
 * change does), with synchronous commit, at 1 and 8 sessions, then the same with a NOTIFY in each
 * transaction. A transaction that NOTIFYs holds the cluster-wide lock through its commit's WAL flush,
 * so those no longer share a flush (group commit): they are as many a second as the disk has flushes.
 * (The bus's own NOTIFYs write nothing else, and their commit does not wait for a flush.)
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

type Params = {
  levels: number[];
  perLevel: number;
  listeners: number;
  payloadBytes: number;
  /** Channels each listener also LISTENs to (none of them notified), at `channelsAt` sessions, synchronous_commit off. */
  channels: number[];
  channelsAt: number;
  /** Sessions of the last measure: transactions that write a row, with and without a NOTIFY. */
  writers: number[];
  /** How long each writing level runs, in seconds. */
  writeSeconds: number;
};

const CHANNEL = 'mcp-subscriptions-bench:notify';
const MODES = ['on', 'off'] as const;
type Mode = (typeof MODES)[number];

export const notify: Scenario<Params> = {
  name: 'notify',
  title:
    "notify: PostgreSQL's NOTIFY ceiling (no server of ours): 1 to 32 sessions publishing one notification per transaction, 2 sessions LISTENing; synchronous_commit on and off",
  full: {
    levels: [1, 2, 4, 8, 16, 32],
    perLevel: 6000,
    listeners: 2,
    payloadBytes: 200,
    channels: [0, 1000, 5000],
    channelsAt: 4,
    writers: [1, 8],
    writeSeconds: 5,
  },
  quick: {
    levels: [1, 4, 16],
    perLevel: 800,
    listeners: 2,
    payloadBytes: 200,
    channels: [0, 1000],
    channelsAt: 4,
    writers: [1, 8],
    writeSeconds: 1,
  },
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
      label: `notify: synchronous_commit ${mode}: the ceiling, and the sessions it was reached at`,
      unit: '',
      value: (f) => `${num(f[`${mode} ceilingPerSec`]).toFixed(0)}/s at ${String(f[`${mode} peakAt`])}`,
    })),
    {
      label: `notify: PostgreSQL CPU per 1,000 NOTIFYs when each of the ${p.listeners} listeners also LISTENs to ${p.channels.join(' / ')} other channels (${p.channelsAt} sessions)`,
      unit: 'ms',
      value: (f) => p.channels.map((k) => num(f[`channels ${k} cpuMsPer1k`]).toFixed(1)).join(' / '),
    },
    {
      label: `notify: NOTIFY/s, the same`,
      unit: '/s',
      value: (f) => p.channels.map((k) => num(f[`channels ${k} perSec`]).toFixed(0)).join(' / '),
    },
    ...MODES.map((mode): RowSpec => ({
      label: `notify: synchronous_commit ${mode}: PostgreSQL CPU per 1,000 NOTIFYs, and the cores it kept busy, at ${p.levels.at(-1)} sessions (its processes, /proc)`,
      unit: '',
      value: (f) =>
        `${num(f[`${mode} cpuMsPer1k`]).toFixed(1)} ms; ${((num(f[`${mode} cpuMsPer1k`]) * num(f[`${mode} ${p.levels.at(-1)} perSec`])) / 1e6).toFixed(2)} cores`,
    })),
    {
      label: `notify: transactions writing a row (synchronous commit), ${p.writers.join(' / ')} sessions: alone / with a NOTIFY each (publishIn's case)`,
      unit: '/s',
      value: (f) =>
        p.writers
          .map((n) => `${num(f[`write ${n}`]).toFixed(0)} / ${num(f[`write+notify ${n}`]).toFixed(0)}`)
          .join('; '),
    },
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
      let peakAt = p.levels[0] as number;
      for (const level of p.levels) {
        const { perSec, cpuMsPer1k, complete } = await measure(postgres, p, level, mode, 0);
        figures[`${mode} ${level} perSec`] = perSec;
        figures['complete'] = figures['complete'] === true && complete;
        if (perSec > ceiling) [ceiling, peakAt] = [perSec, level];
        if (level === p.levels.at(-1)) figures[`${mode} cpuMsPer1k`] = cpuMsPer1k;
      }
      figures[`${mode} ceilingPerSec`] = ceiling;
      figures[`${mode} peakAt`] = `${peakAt} session(s)`;
    }
    for (const channels of p.channels) {
      const { perSec, cpuMsPer1k, complete } = await measure(postgres, p, p.channelsAt, 'off', channels);
      figures[`channels ${channels} perSec`] = perSec;
      figures[`channels ${channels} cpuMsPer1k`] = cpuMsPer1k;
      figures['complete'] = figures['complete'] === true && complete;
    }
    await writeRates(postgres, p, figures);
    return { ours: figures };
  },
};

async function connect(url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  return client;
}

/** Transactions a second that insert a row, alone and with a NOTIFY, at each of `p.writers` sessions. */
async function writeRates(postgres: BenchPostgres, p: Params, figures: Figures): Promise<void> {
  const admin = await connect(postgres.url);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'mcp-subscriptions-bench-write-'));
  try {
    await admin.query('CREATE TABLE IF NOT EXISTS bench_notes (id bigserial PRIMARY KEY, text text)');
    const scripts = {
      write: "INSERT INTO bench_notes (text) VALUES ('x');\n",
      'write+notify': `BEGIN;\nINSERT INTO bench_notes (text) VALUES ('x');\nSELECT pg_notify('${CHANNEL}', 'x');\nCOMMIT;\n`,
    };
    for (const [name, script] of Object.entries(scripts)) {
      const file = path.join(dir, `${name}.sql`);
      writeFileSync(file, script);
      for (const sessions of p.writers) {
        const output = await pgbench(
          postgres.url,
          ['-f', file, '-c', String(sessions), '-j', String(Math.min(sessions, 2)), '-T', String(p.writeSeconds)],
          { PGOPTIONS: '-c synchronous_commit=on' },
        );
        figures[`${name} ${sessions}`] = Number(/tps = ([0-9.]+)/.exec(output)?.[1] ?? Number.NaN);
      }
    }
  } finally {
    await admin.query('DROP TABLE IF EXISTS bench_notes').catch(() => {});
    await admin.end();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Runs pgbench against `url` with `args`; resolves with its output once it exits, rejects with it on a failure. */
function pgbench(url: string, args: readonly string[], env: Record<string, string>): Promise<string> {
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
    child.once('exit', (code) =>
      code === 0 ? resolve(output) : reject(new Error(`pgbench exited ${code}: ${output}`)),
    );
  });
}

/** One level: `sessions` pgbench publishers, `p.listeners` listeners, `p.perLevel` notifications. */
async function measure(
  postgres: BenchPostgres,
  p: Params,
  sessions: number,
  mode: Mode,
  channels: number,
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
    // Channels never notified, LISTENed before the measured one's traffic: in batches, as the bus does.
    for (let from = 0; from < channels; from += 500) {
      const batch = Array.from({ length: Math.min(500, channels - from) }, (_, i) => `LISTEN "${CHANNEL}:${from + i}"`);
      await Promise.all(listeners.map((client) => client.query(batch.join(';'))));
    }
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
