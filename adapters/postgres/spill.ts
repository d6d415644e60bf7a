/**
 * The spill table: where a message too large for a NOTIFY payload waits for its readers. The
 * notification carries the row's id (a `ref` message); each receiving node reads the row through its
 * pool. Rows live `spillTtlMs` from their INSERT: a node that spills deletes the expired ones, at most
 * once per that interval, so the table holds about one interval's spills and never grows without bound
 * while anyone spills (and stays as it is, small, when nobody does).
 */
import type { PostgresQueryable, SpillTableName } from './options.ts';

/** A NOTIFY payload must be shorter than this, in bytes (PostgreSQL's default build: 8000). */
export const MAX_NOTIFY_PAYLOAD_BYTES = 7999;

/** The table's definition (docs/postgres.md gives it as a migration). */
export function spillTableDdl(table: SpillTableName): string {
  return `CREATE TABLE IF NOT EXISTS ${table.sql} (id bigserial PRIMARY KEY, payload text NOT NULL, created_at timestamptz NOT NULL DEFAULT now())`;
}

/** The SQLSTATE of a table that does not exist. */
const UNDEFINED_TABLE = '42P01';

/** SQLSTATEs of a table created by another session at the same moment: it is there, which is what was asked. */
const CREATED_MEANWHILE = new Set(['42P07', '23505']);

/** The SQLSTATE of a PostgreSQL error, when it is one. */
export function sqlState(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

/**
 * Whether a failure is the statement's own (a missing privilege, a missing schema: SQLSTATE class 42,
 * or 22 for data) rather than the connection's: trying again will not help, and it is no outage.
 */
export function isStatementError(error: unknown): boolean {
  const state = sqlState(error);
  return state !== undefined && (state.startsWith('42') || state.startsWith('22'));
}

/** One bus's view of its spill table. */
export class SpillTable {
  private ensured: Promise<void> | undefined;
  private lastCleanup = 0;

  constructor(
    private readonly table: SpillTableName,
    private readonly ttlMs: number,
  ) {}

  /**
   * Makes sure the table exists, through `pool` (never a caller's transaction, which a rollback would
   * take the table away with): looked up first, so that a table made by the migration needs no CREATE
   * privilege; created when missing. Once per bus when it succeeds; tried again after a failure.
   */
  ensure(pool: PostgresQueryable): Promise<void> {
    this.ensured ??= this.create(pool).catch((error: unknown) => {
      this.ensured = undefined;
      throw error;
    });
    return this.ensured;
  }

  /**
   * Stores `message` and NOTIFYs `channel` of it in one statement, on `client` (the pool, or the
   * caller's transaction: then the row and its notification commit or roll back together). The
   * notification is `refHead`, the row's id and `"}`: the wire's `ref` message.
   */
  async publish(client: PostgresQueryable, channel: string, message: string, refHead: string): Promise<void> {
    await client.query(
      `WITH spilled AS (INSERT INTO ${this.table.sql} (payload) VALUES ($2) RETURNING id) SELECT pg_notify($1, $3 || spilled.id::text || '"}') FROM spilled`,
      [channel, message, refHead],
    );
  }

  /** The message of row `id`, or `undefined` when it is gone (expired, deleted, or no table: a forged reference). */
  async read(pool: PostgresQueryable, id: string): Promise<string | undefined> {
    let rows: readonly unknown[];
    try {
      ({ rows } = await pool.query(`SELECT payload FROM ${this.table.sql} WHERE id = $1`, [id]));
    } catch (error) {
      if (sqlState(error) === UNDEFINED_TABLE) return undefined;
      throw error;
    }
    const payload = (rows[0] as { payload?: unknown } | undefined)?.payload;
    return typeof payload === 'string' ? payload : undefined;
  }

  /**
   * Deletes the expired rows when the last cleanup of this bus is a `ttlMs` ago or more; resolves with
   * whether it ran. Called after a spill: whoever spills cleans up.
   */
  async cleanUp(pool: PostgresQueryable, now = Date.now()): Promise<boolean> {
    if (now - this.lastCleanup < this.ttlMs) return false;
    this.lastCleanup = now;
    await pool.query(`DELETE FROM ${this.table.sql} WHERE created_at < now() - make_interval(secs => $1)`, [
      this.ttlMs / 1000,
    ]);
    return true;
  }

  private async create(pool: PostgresQueryable): Promise<void> {
    const { rows } = await pool.query('SELECT to_regclass($1) IS NOT NULL AS present', [this.table.sql]);
    if ((rows[0] as { present?: unknown } | undefined)?.present === true) return;
    try {
      await pool.query(spillTableDdl(this.table));
    } catch (error) {
      if (!CREATED_MEANWHILE.has(sqlState(error) ?? '')) throw error;
    }
  }
}
