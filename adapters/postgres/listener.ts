/**
 * The bus's one listening connection: a dedicated node-postgres client that LISTENs, made again after
 * every loss (a client cannot connect twice), with a backoff. What it LISTENed to dies with its
 * session, so a loss is reported as such and the interest reconciler LISTENs again once it is ready.
 */
import type { PostgresListenClient } from './options.ts';

/** What the connection tells the bus. */
export interface ListenerEvents {
  /** Connected (first, or again): nothing is LISTENed on it yet. */
  ready(): void;
  /** The session is gone, with the error when there was one; every LISTEN with it. */
  down(error?: unknown): void;
  /** A notification on a channel this session LISTENs to. Must not throw. */
  notification(channel: string, payload: string): void;
}

/** The first reconnection delay, doubling to {@link MAX_RETRY_MS}. */
const FIRST_RETRY_MS = 100;
/** The longest wait between two connection attempts while PostgreSQL stays away. */
const MAX_RETRY_MS = 5000;

function noop(): void {}

/** A promise that settles within `ms`; what it settles to does not matter to the caller. */
export function within(promise: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms);
    timer.unref();
  });
  return Promise.race([promise.then(noop, noop), timeout]).finally(() => clearTimeout(timer));
}

/** Calls `run`, turning a synchronous throw into a rejection. */
function attempt<T>(run: () => T | Promise<T>): Promise<T> {
  return new Promise((resolve) => resolve(run()));
}

/** The dedicated LISTEN connection, reconnecting by itself until closed. */
export class ListeningConnection {
  private client: PostgresListenClient | undefined;
  private up = false;
  /** Which client is current: events of an older one (lost, replaced) are ignored. */
  private generation = 0;
  private retryMs = FIRST_RETRY_MS;
  private retryTimer: NodeJS.Timeout | undefined;
  private closed = false;
  /**
   * The last query handed to the current client: the next one goes after it. node-postgres queues
   * overlapping queries itself but deprecates it (pg 9 refuses them), and the reconciler may send a
   * LISTEN batch while an UNLISTEN batch is out.
   */
  private tail: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly make: () => PostgresListenClient,
    private readonly events: ListenerEvents,
  ) {}

  /** Connects the first client. */
  start(): void {
    this.connect();
  }

  /** Whether the session is up: LISTEN and UNLISTEN go out now. */
  isReady(): boolean {
    return this.up && !this.closed;
  }

  /** Runs `sql` on the current session, after the queries before it; rejects when there is none. */
  query(sql: string): Promise<unknown> {
    const client = this.client;
    if (!this.up || client === undefined) return Promise.reject(new Error('the listening connection is down'));
    const generation = this.generation;
    const run = this.tail.then(() =>
      // The session may have been lost while this query waited: it is not sent on another.
      generation === this.generation
        ? client.query(sql)
        : Promise.reject(new Error('the listening connection was lost')),
    );
    this.tail = run.catch(noop);
    return run;
  }

  /** Ends the session (its LISTENs with it) within `timeoutMs`, and makes no other. Idempotent. */
  async close(timeoutMs: number): Promise<void> {
    this.closed = true;
    clearTimeout(this.retryTimer);
    const client = this.client;
    this.client = undefined;
    this.up = false;
    this.generation++;
    if (client !== undefined)
      await within(
        attempt(() => client.end()),
        timeoutMs,
      );
  }

  private connect(): void {
    if (this.closed) return;
    const generation = ++this.generation;
    let client: PostgresListenClient;
    try {
      client = this.make();
    } catch (error) {
      this.events.down(error);
      this.scheduleRetry();
      return;
    }
    this.client = client;
    // Kept for the client's whole life: pg emits 'error' on a broken connection, and an 'error' without a
    // listener would throw out of the process.
    client.on('error', (error: unknown) => this.lose(generation, client, error));
    client.on('end', () => this.lose(generation, client));
    client.on('notification', (message: unknown) => {
      if (generation !== this.generation) return;
      const { channel, payload } = message as { channel?: unknown; payload?: unknown };
      if (typeof channel === 'string') this.events.notification(channel, typeof payload === 'string' ? payload : '');
    });
    attempt(() => client.connect()).then(
      () => {
        if (generation !== this.generation || this.closed) return;
        this.tail = Promise.resolve();
        this.up = true;
        this.retryMs = FIRST_RETRY_MS;
        this.events.ready();
      },
      (error: unknown) => this.lose(generation, client, error),
    );
  }

  /** The client of `generation` is gone (an error, its end, a failed connect): once per client. */
  private lose(generation: number, client: PostgresListenClient, error?: unknown): void {
    if (generation !== this.generation || this.closed) return;
    this.generation++;
    this.up = false;
    this.client = undefined;
    client.removeAllListeners('notification');
    attempt(() => client.end()).catch(noop);
    this.events.down(error);
    this.scheduleRetry();
  }

  private scheduleRetry(): void {
    if (this.closed || this.retryTimer !== undefined) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      this.connect();
    }, this.retryMs);
    this.retryTimer.unref();
    this.retryMs = Math.min(this.retryMs * 2, MAX_RETRY_MS);
  }
}
