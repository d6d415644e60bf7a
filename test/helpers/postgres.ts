/**
 * Real PostgreSQL for the PostgreSQL bus's tests (15 on 127.0.0.1:5432, trust auth, database `test`,
 * user `postgres`): whether it answers (started when it does not and this machine can), a channel
 * prefix and a spill table of each test's own, and the backends a test terminates to make outages.
 * Nothing touches anything but the channels and tables a test names.
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import pg from 'pg';

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
