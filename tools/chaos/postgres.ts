/**
 * A PostgreSQL server of a run's own: a private cluster (`initdb` into a temporary directory) whose
 * postmaster listens on a free loopback port, so that a chaos run, a bench or a fault test can
 * `kill -9` it, restart it, terminate its backends and limit its roles without ever disturbing the
 * shared server on 5432 that the other suites use. PostgreSQL 15's binaries from Debian's packages
 * (`/usr/lib/postgresql/15/bin`, or `PG_BIN`). As root, the server runs as the `postgres` user:
 * PostgreSQL refuses to run as root.
 *
 * Queries go through `pg` (a client of the harness's own, apart from any bus's): the harness judges
 * the bus from outside, by what the server says.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { chownSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { freePort } from '../../test/helpers/free-port.ts';

/** Where PostgreSQL's binaries are: `PG_BIN`, or Debian's PostgreSQL 15. */
export const PG_BIN = process.env['PG_BIN'] ?? '/usr/lib/postgresql/15/bin';

/** Why a private PostgreSQL cannot be run here, or `undefined` when it can. */
export function privatePostgresMissing(): string | undefined {
  if (!existsSync(path.join(PG_BIN, 'initdb')) || !existsSync(path.join(PG_BIN, 'postgres'))) {
    return `PostgreSQL's initdb and postgres are not in ${PG_BIN} (apt-get install postgresql-15, or set PG_BIN)`;
  }
  if (process.getuid?.() === 0 && spawnSync('id', ['-u', 'postgres'], { stdio: 'ignore' }).status !== 0) {
    return 'running as root, and there is no `postgres` user to run a private PostgreSQL as';
  }
  return undefined;
}

/** The user and group a private server runs as: `postgres` when this process is root, else this process's own. */
function serverIds(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const uid = Number(spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).stdout.trim());
  const gid = Number(spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).stdout.trim());
  return { uid, gid };
}

export interface PostgresProcessOptions {
  /**
   * `max_connections` of the server. A few per node is plenty: a small number also makes "every slot
   * taken" a fault that can be reached. @default 100
   */
  readonly maxConnections?: number;
  /**
   * Skip fsync and WAL flushes at commit: a chaos run restarts the server often and measures nothing.
   * A bench leaves them on, as a production server has them. @default false
   */
  readonly durable?: boolean;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A private PostgreSQL cluster: `start()` runs its postmaster (initdb on the first start), `kill()` is
 * `kill -9` of the postmaster (a crash: every backend ends, every LISTEN is gone, the NOTIFY queue is
 * lost; the next `start()` runs crash recovery), `stop()` kills it and removes its directory.
 */
export class PostgresProcess {
  private child: ChildProcess | undefined;
  private readonly dir = mkdtempSync(path.join(os.tmpdir(), 'mcp-subscriptions-pg-'));
  private readonly ids = serverIds();
  private initialized = false;

  private constructor(
    readonly port: number,
    private readonly options: PostgresProcessOptions,
  ) {
    if (this.ids !== undefined) chownSync(this.dir, this.ids.uid, this.ids.gid);
  }

  /** Starts a new private cluster on a free loopback port, with database `test`. */
  static async start(options: PostgresProcessOptions = {}): Promise<PostgresProcess> {
    // A port found free may be taken before the postmaster binds it: try a few.
    let last: unknown;
    for (let attempt = 0; attempt < 5; attempt++) {
      const server = new PostgresProcess(await freePort(), options);
      try {
        await server.start();
        await server.query('CREATE DATABASE test', [], 'postgres');
        return server;
      } catch (error) {
        last = error;
        await server.stop();
      }
    }
    throw new Error(`could not start a private PostgreSQL on a free loopback port: ${String(last)}`);
  }

  /** `postgres://<user>@127.0.0.1:<port>/<database>`. */
  url(user = 'postgres', database = 'test'): string {
    return `postgres://${encodeURIComponent(user)}@127.0.0.1:${this.port}/${database}`;
  }

  /** The postmaster's pid while it runs. */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  private get data(): string {
    return path.join(this.dir, 'data');
  }

  private run(command: string, args: readonly string[]): void {
    const result = spawnSync(path.join(PG_BIN, command), args, {
      encoding: 'utf8',
      ...(this.ids === undefined ? {} : { uid: this.ids.uid, gid: this.ids.gid }),
      cwd: this.dir,
    });
    if (result.status !== 0) throw new Error(`${command} failed: ${result.stderr || result.stdout}`);
  }

  /** Starts the postmaster (after initdb, the first time); resolves once it accepts queries. */
  async start(): Promise<void> {
    if (this.child !== undefined) return;
    if (!this.initialized) {
      this.run('initdb', [
        '-D',
        this.data,
        '-U',
        'postgres',
        '--auth=trust',
        '-E',
        'UTF8',
        '--no-sync',
        '--no-instructions',
      ]);
      this.initialized = true;
    }
    const settings = {
      listen_addresses: '127.0.0.1',
      port: String(this.port),
      unix_socket_directories: this.dir,
      max_connections: String(this.options.maxConnections ?? 100),
      shared_buffers: '32MB',
      log_min_messages: 'fatal',
      ...(this.options.durable === true ? {} : { fsync: 'off', synchronous_commit: 'off', full_page_writes: 'off' }),
    };
    const args = ['-D', this.data, ...Object.entries(settings).flatMap(([name, value]) => ['-c', `${name}=${value}`])];
    // A postmaster killed a moment ago may leave backends that have not noticed yet, holding its
    // shared memory: the new one refuses to start until they are gone. Try again for a while.
    const deadline = Date.now() + 20_000;
    for (;;) {
      const child = spawn(path.join(PG_BIN, 'postgres'), args, {
        cwd: this.dir,
        stdio: ['ignore', 'ignore', 'pipe'],
        ...(this.ids === undefined ? {} : { uid: this.ids.uid, gid: this.ids.gid }),
      });
      let stderr = '';
      child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
      this.child = child;
      child.once('exit', () => {
        if (this.child === child) this.child = undefined;
      });
      if (await this.accepting(child)) return;
      this.child = undefined;
      if (child.exitCode === null && child.signalCode === null) {
        const exited = once(child, 'exit');
        child.kill('SIGKILL');
        await exited;
      }
      if (Date.now() > deadline) throw new Error(`postgres did not start on port ${this.port}:\n${stderr}`);
      await sleep(100);
    }
  }

  /** Whether `child` came to accept queries (false once it exited, or after 10 s). */
  private async accepting(child: ChildProcess): Promise<boolean> {
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline) {
      if (child.exitCode !== null || child.signalCode !== null) return false;
      try {
        await this.query('SELECT 1', [], 'postgres', 1000);
        return true;
      } catch {
        await sleep(25);
      }
    }
    return false;
  }

  /** `kill -9` of the postmaster: a crash. Its backends notice and exit by themselves. */
  async kill(): Promise<void> {
    const child = this.child;
    this.child = undefined;
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, 'exit');
    child.kill('SIGKILL');
    await exited;
  }

  /**
   * A fast shutdown (SIGINT to the postmaster: every session is ended "due to administrator command",
   * then a checkpoint), as `pg_ctl stop -m fast` and `pg_ctlcluster … restart` do; `start()` again to
   * complete a restart.
   */
  async shutdown(): Promise<void> {
    const child = this.child;
    this.child = undefined;
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, 'exit');
    child.kill('SIGINT');
    await exited;
  }

  /** Kills the server and removes its directory. */
  async stop(): Promise<void> {
    const child = this.child;
    this.child = undefined;
    if (child !== undefined && child.exitCode === null && child.signalCode === null) {
      // A fast shutdown, so that no backend outlives it; SIGKILL when it takes long.
      const exited = once(child, 'exit');
      child.kill('SIGINT');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(this.dir, { recursive: true, force: true });
  }

  /** One query on a connection of its own, as `user` (a superuser by default), on `database`. */
  async query<R extends pg.QueryResultRow = pg.QueryResultRow>(
    sql: string,
    values: readonly unknown[] = [],
    database = 'test',
    timeoutMs = 5000,
  ): Promise<pg.QueryResult<R>> {
    const client = new pg.Client({
      host: '127.0.0.1',
      port: this.port,
      user: 'postgres',
      database,
      connectionTimeoutMillis: timeoutMs,
      query_timeout: timeoutMs,
    });
    // A server that goes away mid-query: the query's own rejection says so.
    client.on('error', () => {});
    await client.connect();
    try {
      return await client.query<R>(sql, values as unknown[]);
    } finally {
      await client.end().catch(() => {});
    }
  }
}
