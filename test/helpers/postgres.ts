/**
 * Real PostgreSQL for the PostgreSQL bus's tests (15 on 127.0.0.1:5432, trust auth, database `test`,
 * user `postgres`): whether it answers (started when it does not and this machine can), a channel
 * prefix and a spill table of each test's own, and the backends a test terminates to make outages.
 * Nothing touches anything but the channels and tables a test names. A test that restarts PostgreSQL
 * runs a server of its own ({@link OwnPostgres}), never the shared one.
 */
import { execFile, spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { freePort } from './free-port.ts';

const run = promisify(execFile);

export const PG_HOST = '127.0.0.1';
export const PG_PORT = 5432;
export const PG_URL = `postgres://postgres@${PG_HOST}:${PG_PORT}/test`;

async function ready(): Promise<boolean> {
  try {
    await run('pg_isready', ['-h', PG_HOST, '-p', String(PG_PORT), '-t', '2']);
    return true;
  } catch {
    return false;
  }
}

/**
 * Why the PostgreSQL suites cannot run here, or `undefined` when they can: PostgreSQL answers, or was
 * started (`pg_ctlcluster 15 main start`) and answers within 20 s. Decided once, at a suite file's
 * load; pair it with `failUnderCi`, so that CI fails rather than skips.
 */
export async function postgresMissing(): Promise<string | undefined> {
  if (await ready()) return undefined;
  try {
    await run('pg_ctlcluster', ['--skip-systemctl-redirect', '15', 'main', 'start']);
  } catch {
    // Not installed, or not ours to start: the wait below says so.
  }
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    if (await ready()) return undefined;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return `PostgreSQL does not answer on ${PG_HOST}:${PG_PORT} (pg_isready) and could not be started with \`pg_ctlcluster --skip-systemctl-redirect 15 main start\`; CI never skips these`;
}

let made = 0;

/** A channel prefix no other test, run or user of the database has (within the 36 bytes the bus takes). */
export function uniquePrefix(): string {
  return `t${process.pid % 100_000}-${++made}-${randomUUID().slice(0, 8)}`;
}

/** A spill table name no other test or run has (dropped by {@link PgAdmin.close}). */
export function uniqueTable(): string {
  return `mcp_test_spill_${process.pid}_${++made}_${randomUUID().slice(0, 8).replace(/-/g, '')}`;
}

/** A pool of the test's own, for what a test does to PostgreSQL directly, and its cleanup. */
export class PgAdmin {
  readonly pool = new pg.Pool({ connectionString: PG_URL, max: 2 });
  private readonly tables = new Set<string>();

  constructor() {
    this.pool.on('error', () => {});
  }

  /** A table the cleanup drops. */
  table(): string {
    const name = uniqueTable();
    this.tables.add(name);
    return name;
  }

  /**
   * Terminates the backends whose last statement LISTENed or UNLISTENed a channel of `prefix`: the
   * listening connection of each bus on it. Resolves with how many.
   */
  async terminateListeners(prefix: string): Promise<number> {
    const { rows } = await this.pool.query(
      `SELECT pg_terminate_backend(pid) AS done FROM pg_stat_activity
        WHERE pid <> pg_backend_pid() AND (position($1 in query) > 0 OR position($2 in query) > 0)`,
      [`LISTEN "${prefix}:`, `UNLISTEN "${prefix}:`],
    );
    return rows.filter((row: { done: boolean }) => row.done).length;
  }

  /** The listening backends of `prefix` (see {@link terminateListeners}). */
  async listeners(prefix: string): Promise<number> {
    const { rows } = await this.pool.query(
      `SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE pid <> pg_backend_pid() AND (position($1 in query) > 0 OR position($2 in query) > 0)`,
      [`LISTEN "${prefix}:`, `UNLISTEN "${prefix}:`],
    );
    return (rows[0] as { n: number }).n;
  }

  /** Rows in a spill table. */
  async rows(table: string): Promise<number> {
    const { rows } = await this.pool.query(`SELECT count(*)::int AS n FROM "${table}"`);
    return (rows[0] as { n: number }).n;
  }

  /** Drops the tables it handed out and ends its pool. */
  async close(): Promise<void> {
    for (const table of this.tables) await this.pool.query(`DROP TABLE IF EXISTS "${table}"`);
    await this.pool.end();
  }
}

/** Where the PostgreSQL server binaries are (Debian's layout first, then PATH). */
function postgresBin(tool: string): string {
  for (const version of ['17', '16', '15', '14', '13']) {
    const candidate = `/usr/lib/postgresql/${version}/bin/${tool}`;
    if (existsSync(candidate)) return candidate;
  }
  return tool;
}

/** Why a PostgreSQL of the test's own cannot be run here (no `initdb`), or `undefined`. Never under CI. */
export function ownPostgresSkipReason(toRun: string): string | undefined {
  if (process.env.CI !== undefined) return undefined;
  return existsSync(postgresBin('initdb')) || spawnSync('initdb', ['--version']).status === 0
    ? undefined
    : `initdb is not installed (postgresql-15 does): it runs ${toRun}`;
}

/**
 * A PostgreSQL server of the test's own, in a fresh data directory on a free loopback port (trust auth,
 * user `postgres`, no fsync): stopped and started again to make outages that touch nothing shared.
 * Run as the `postgres` user when the tests run as root (PostgreSQL refuses root).
 */
export class OwnPostgres {
  private running = false;

  private constructor(
    readonly port: number,
    private readonly dir: string,
  ) {}

  static async start(): Promise<OwnPostgres> {
    const dir = mkdtempSync(path.join(tmpdir(), 'mcp-subscriptions-pg-'));
    const asRoot = process.getuid?.() === 0;
    if (asRoot) await run('chown', ['postgres:postgres', dir]);
    await OwnPostgres.as(asRoot, postgresBin('initdb'), [
      '-D',
      path.join(dir, 'data'),
      '-U',
      'postgres',
      '--auth=trust',
      '-E',
      'UTF8',
      '--no-sync',
    ]);
    const server = new OwnPostgres(await freePort(), dir);
    await server.start();
    return server;
  }

  private static async as(root: boolean, command: string, args: string[]): Promise<void> {
    if (root) await run('runuser', ['-u', 'postgres', '--', command, ...args]);
    else await run(command, args);
  }

  get url(): string {
    return `postgres://postgres@${PG_HOST}:${this.port}/postgres`;
  }

  /** Starts the server (again), and waits until it takes connections. */
  async start(): Promise<void> {
    if (this.running) return;
    const options = `-p ${this.port} -k ${this.dir} -c listen_addresses=${PG_HOST} -c fsync=off`;
    await OwnPostgres.as(process.getuid?.() === 0, postgresBin('pg_ctl'), [
      '-D',
      path.join(this.dir, 'data'),
      '-o',
      options,
      '-l',
      path.join(this.dir, 'log'),
      '-w',
      'start',
    ]);
    this.running = true;
  }

  /** Stops the server: `immediate` (a crash, every session cut) by default, or `fast` (a clean shutdown). */
  async stop(mode: 'immediate' | 'fast' = 'immediate'): Promise<void> {
    if (!this.running) return;
    this.running = false;
    await OwnPostgres.as(process.getuid?.() === 0, postgresBin('pg_ctl'), [
      '-D',
      path.join(this.dir, 'data'),
      '-m',
      mode,
      '-w',
      'stop',
    ]);
  }

  /** Stops it for good and removes its data directory. */
  async dispose(): Promise<void> {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
