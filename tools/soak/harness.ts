/**
 * What both soak runs (`run.ts`, `stuck/`) share: the server process and its control channel, the
 * checks of what must be left once every client is gone, and the printed table.
 */
import { fork, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Ready, Reply, Request, ServerConfig, Snapshot } from './messages.ts';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

export const sum = (values: Iterable<number>): number => {
  let total = 0;
  for (const value of values) total += value;
  return total;
};

/** An integer flag of at least `min`, or `fallback` when absent; exit 2 on anything else. */
export function intFlag(name: string, value: string | undefined, fallback: number, min: number): number {
  if (value === undefined) return fallback;
  const parsed = /^\d+$/.test(value) ? Number(value) : Number.NaN;
  if (!Number.isSafeInteger(parsed) || parsed < min) {
    console.error(`soak: --${name} expects an integer of at least ${min}, got ${JSON.stringify(value)}`);
    process.exit(2);
  }
  return parsed;
}

// -------------------------------------------------------------------------------------------------
// The server process and its control channel
// -------------------------------------------------------------------------------------------------

type ReplyOf<T extends Request['type']> = Extract<Reply, { type: T }>;

export class ServerProcess {
  private seq = 0;
  private readonly waiting = new Map<number, (reply: Reply) => void>();
  readonly exited: Promise<number | null>;

  private constructor(
    readonly child: ChildProcess,
    readonly port: number,
  ) {
    child.on('message', (reply: Reply) => {
      this.waiting.get(reply.seq)?.(reply);
      this.waiting.delete(reply.seq);
    });
    this.exited = new Promise((resolve) => child.once('exit', (code) => resolve(code)));
  }

  static start(config: ServerConfig, traceTimers = false): Promise<ServerProcess> {
    const child = fork(path.join(ROOT, 'tools/soak/server.ts'), [], {
      cwd: ROOT,
      execArgv: ['--expose-gc', '--conditions=mcp-subscriptions-source', '--import', 'tsx'],
      env: {
        ...process.env,
        SOAK_SERVER_CONFIG: JSON.stringify(config),
        SOAK_TRACE_TIMERS: traceTimers ? '1' : '0',
      },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    process.once('exit', () => child.kill('SIGKILL'));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('the soak server did not start within 30 s')), 30_000);
      child.once('exit', (code) => reject(new Error(`the soak server exited with code ${code} before listening`)));
      child.once('message', (message: Ready) => {
        clearTimeout(timer);
        resolve(new ServerProcess(child, message.port));
      });
    });
  }

  call<T extends Request['type']>(
    type: T,
    fields: Omit<Extract<Request, { type: T }>, 'seq' | 'type'> = {} as never,
  ): Promise<ReplyOf<T>> {
    const seq = ++this.seq;
    return new Promise((resolve) => {
      this.waiting.set(seq, (reply) => resolve(reply as ReplyOf<T>));
      this.child.send({ ...fields, seq, type });
    });
  }
}

// -------------------------------------------------------------------------------------------------
// Checks and report
// -------------------------------------------------------------------------------------------------

export interface Check {
  readonly name: string;
  readonly observed: string;
  readonly expected: string;
  readonly ok: boolean;
}

/** Keys whose counts differ between two tallies, as `key a→b`. */
export function changed(before: Readonly<Record<string, number>>, after: Readonly<Record<string, number>>): string[] {
  const keys = new Set([...Object.keys(before), ...Object.keys(after)]);
  return [...keys]
    .filter((key) => (before[key] ?? 0) !== (after[key] ?? 0))
    .map((key) => `${key} ${before[key] ?? 0}→${after[key] ?? 0}`);
}

export const mib = (bytes: number): string => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;

/** What must hold once every client is gone (after the cycles, and again after `hub.close()`). */
export function leftovers(label: string, baseline: Snapshot, snap: Snapshot, closedHub: boolean): Check[] {
  const { stats } = snap;
  const closedTotal = sum(Object.values(stats.closed));
  const indexEntries = sum(Object.values(stats.listening));
  // The hub's own event listeners and bus membership are not per stream: as at the baseline (the bus
  // is left on close).
  const expectedInternals: Record<string, number> = {
    ...Object.fromEntries(Object.keys(snap.internals).map((key) => [key, 0])),
    'hub listeners': baseline.internals['hub listeners'] ?? 0,
    'bus members': closedHub ? 0 : (baseline.internals['bus members'] ?? 0),
  };
  const internalsLeft = changed(expectedInternals, snap.internals);
  const resourcesLeft = changed(baseline.activeResources, snap.activeResources);
  const listenersLeft = [
    ...changed(baseline.processListeners, snap.processListeners).map((s) => `process ${s}`),
    ...changed(baseline.serverListeners, snap.serverListeners).map((s) => `server ${s}`),
  ];
  const d = snap.diagnostics;
  const row = (name: string, observed: string, expected: string, ok: boolean): Check => ({
    name: `${label}: ${name}`,
    observed,
    expected,
    ok,
  });
  return [
    row('server idle when measured', String(snap.quiesced), 'true', snap.quiesced),
    row('open streams (stats)', String(stats.openStreams), '0', stats.openStreams === 0),
    row('pending listens (stats)', String(stats.pendingStreams), '0', stats.pendingStreams === 0),
    row('principals with streams (stats)', String(stats.principals), '0', stats.principals === 0),
    row('index entries (stats.listening)', String(indexEntries), '0', indexEntries === 0),
    row('queued events (stats)', String(stats.queued), '0', stats.queued === 0),
    row(
      'hub internals left (indexes, per-principal, clocks, batch, listeners)',
      internalsLeft.length === 0 ? 'none' : internalsLeft.join(', '),
      'none',
      internalsLeft.length === 0,
    ),
    row('opened = closed (stats)', `${stats.opened} = ${closedTotal}`, 'equal', stats.opened === closedTotal),
    row('stream:open = stream:close (diagnostics)', `${d.opens} = ${d.closes}`, 'equal', d.opens === d.closes),
    row(
      'diagnostics agree with stats (empty streams are not registered)',
      `${d.opens} = ${stats.opened - stats.closed.empty}`,
      'equal',
      d.opens === stats.opened - stats.closed.empty && d.closes === closedTotal - stats.closed.empty,
    ),
    row(
      'streams closed exactly once (per stream)',
      `${d.closedOnce} once; ${d.closedTwice} twice, ${d.neverClosed} never, ${d.closedUnopened} unopened`,
      'all once',
      d.closedTwice === 0 && d.neverClosed === 0 && d.closedUnopened === 0 && d.closedOnce === d.opens,
    ),
    row(
      'timers created since the baseline, still live',
      String(snap.timersSinceBaseline),
      '0',
      snap.timersSinceBaseline === 0,
    ),
    row(
      'active handles vs baseline',
      resourcesLeft.length === 0 ? 'same' : resourcesLeft.join(', '),
      'same',
      resourcesLeft.length === 0,
    ),
    row(
      'listeners on process and server vs baseline',
      listenersLeft.length === 0 ? 'same' : listenersLeft.join(', '),
      'same',
      listenersLeft.length === 0,
    ),
    row('open connections', String(snap.connections), '0', snap.connections === 0),
    row('host checks in flight', String(snap.checksInFlight), '0', snap.checksInFlight === 0),
    row(
      'errors logged by the engine',
      snap.logged.error === 0 ? '0' : `${snap.logged.error}: ${snap.logged.firstError ?? ''}`,
      '0',
      snap.logged.error === 0,
    ),
  ];
}

/** A cell of at most `max` characters. */
export const cell = (text: string, max = 90): string => (text.length > max ? `${text.slice(0, max - 1)}…` : text);

export function table(rows: readonly (readonly string[])[]): string {
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => (row[column] ?? '').length)));
  return rows
    .map((row, index) => {
      const line = row.map((cell, column) => cell.padEnd(widths[column]!)).join('  ');
      return index === 0 ? `${line}\n${widths.map((w) => '-'.repeat(w)).join('  ')}` : line;
    })
    .join('\n');
}
