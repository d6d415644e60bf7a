/**
 * One Redis connection as the bus sees it, whichever library made it: ioredis or node-redis (v4 and
 * later). The two differ in how they subscribe, report their state, and close; the bus sees one face.
 *
 * Both libraries reconnect by themselves, and both re-subscribe a subscribed connection when it is
 * back (ioredis unless `autoResubscribe: false`); the bus subscribes again on every `'ready'` all the
 * same, which is harmless (Redis keeps a connection's subscriptions as a set) and makes it independent
 * of that option.
 */
import type { IoRedisClient, NodeRedisClient, RedisClientLibrary } from './options.ts';

/** What a connection tells the bus: it became ready, or lost readiness (with the error, when there was one). */
export interface ConnectionEvents {
  ready(): void;
  down(error?: unknown): void;
}

/** A connection, whichever library. No method throws: failures come back as rejections or events. */
export interface Connection {
  readonly library: RedisClientLibrary;
  /** Whether the bus created the connection (and so closes it). */
  readonly owned: boolean;
  /** Whether commands go out now (not into an offline queue). */
  isReady(): boolean;
  /** Sends a PUBLISH; resolves with Redis's reply. */
  publish(channel: string, payload: string): Promise<unknown>;
  /** Subscribes to `channel`, delivering its messages to `onMessage`. May be called again (re-subscribe). */
  subscribe(channel: string, onMessage: (message: string) => void): Promise<unknown>;
  /** Stops delivering `channel` and unsubscribes (unless another bus on this connection still listens). */
  unsubscribe(channel: string): Promise<unknown>;
  /** Reports readiness changes and errors to `events` until {@link detach}. */
  watch(events: ConnectionEvents): void;
  /** Removes every listener the bus put on the client. */
  detach(): void;
  /** Ends an owned connection: QUIT when it is up (within `timeoutMs`), then a hard close. */
  end(timeoutMs: number): Promise<void>;
}

type Listener = (...args: never[]) => void;

/** The client methods the bus calls beyond the public option types, looked up defensively. */
interface Emitter {
  on(event: string, listener: Listener): unknown;
  removeListener(event: string, listener: Listener): unknown;
}

/** A promise that settles within `ms`; what it settles to does not matter to the caller. */
export function within(promise: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms);
    timer.unref();
  });
  return Promise.race([promise.then(noop, noop), timeout]).finally(() => clearTimeout(timer));
}

function noop(): void {}

/** Calls `run`, turning a synchronous throw into a rejection. */
function attempt(run: () => unknown): Promise<unknown> {
  return new Promise((resolve) => resolve(run()));
}

/**
 * Channels an ioredis connection is subscribed to for the buses using it, with how many buses each: two
 * buses (two prefixes, or two nodes in one process) may share a caller's subscriber, and one closing
 * must not unsubscribe the other. (node-redis counts per listener itself.)
 */
const ioredisChannels = new WeakMap<object, Map<string, number>>();

abstract class BaseConnection implements Connection {
  abstract readonly library: RedisClientLibrary;
  private readonly attached: [string, Listener][] = [];

  constructor(
    protected readonly client: Emitter,
    readonly owned: boolean,
  ) {}

  abstract isReady(): boolean;
  abstract publish(channel: string, payload: string): Promise<unknown>;
  abstract subscribe(channel: string, onMessage: (message: string) => void): Promise<unknown>;
  abstract unsubscribe(channel: string): Promise<unknown>;
  abstract end(timeoutMs: number): Promise<void>;
  /** The client's events that mean "ready", and those that mean "no longer ready". */
  protected abstract readonly readyEvents: readonly string[];
  protected abstract readonly downEvents: readonly string[];

  protected listen(event: string, listener: Listener): void {
    this.client.on(event, listener);
    this.attached.push([event, listener]);
  }

  watch(events: ConnectionEvents): void {
    for (const name of this.readyEvents) this.listen(name, () => events.ready());
    for (const name of this.downEvents) this.listen(name, () => events.down());
    // An 'error' listener is what keeps a client's errors from crashing the process (node-redis) or
    // from being printed as unhandled (ioredis). An error while still ready is no outage: the client
    // recovers or reports more.
    this.listen('error', (error: unknown) => {
      if (!this.isReady()) events.down(error);
    });
  }

  detach(): void {
    for (const [event, listener] of this.attached.splice(0)) this.client.removeListener(event, listener);
  }
}

interface IoRedisInternal extends Omit<IoRedisClient, 'on'>, Emitter {
  unsubscribe(...channels: string[]): Promise<unknown>;
  quit(): Promise<unknown>;
  disconnect(): void;
}

class IoRedisConnection extends BaseConnection {
  readonly library = 'ioredis';
  protected readonly readyEvents = ['ready'];
  protected readonly downEvents = ['close', 'reconnecting', 'end'];
  private readonly io: IoRedisInternal;
  private readonly handlers = new Map<string, (message: string) => void>();
  private readonly counted = new Set<string>();
  private listening = false;

  constructor(client: IoRedisClient, owned: boolean) {
    const io = client as unknown as IoRedisInternal;
    super(io, owned);
    this.io = io;
  }

  isReady(): boolean {
    return this.io.status === 'ready';
  }

  publish(channel: string, payload: string): Promise<unknown> {
    return attempt(() => this.io.publish(channel, payload));
  }

  subscribe(channel: string, onMessage: (message: string) => void): Promise<unknown> {
    if (!this.listening) {
      this.listening = true;
      this.listen('message', (from: string, message: string) => this.handlers.get(from)?.(message));
    }
    this.handlers.set(channel, onMessage);
    if (!this.counted.has(channel)) {
      this.counted.add(channel);
      const counts = ioredisChannels.get(this.io) ?? new Map<string, number>();
      ioredisChannels.set(this.io, counts);
      counts.set(channel, (counts.get(channel) ?? 0) + 1);
    }
    return attempt(() => this.io.subscribe(channel));
  }

  unsubscribe(channel: string): Promise<unknown> {
    this.handlers.delete(channel);
    if (!this.counted.delete(channel)) return Promise.resolve();
    const counts = ioredisChannels.get(this.io);
    const left = (counts?.get(channel) ?? 1) - 1;
    if (left > 0) {
      counts?.set(channel, left);
      return Promise.resolve();
    }
    counts?.delete(channel);
    return attempt(() => this.io.unsubscribe(channel));
  }

  async end(timeoutMs: number): Promise<void> {
    if (this.io.status === 'end') return;
    if (this.isReady())
      await within(
        attempt(() => this.io.quit()),
        timeoutMs,
      );
    // Not up, or QUIT did not finish in time: stop reconnecting and close the socket now.
    if (this.io.status !== 'end') this.io.disconnect();
  }
}

interface NodeRedisInternal extends Omit<NodeRedisClient, 'on'>, Emitter {
  readonly isOpen: boolean;
  unsubscribe(channel: string, listener: (message: string, channel: string) => unknown): Promise<unknown>;
  // v5 and later: close() and destroy(); v4: quit() and disconnect().
  close?(): Promise<unknown>;
  destroy?(): void;
  quit?(): Promise<unknown>;
  disconnect?(): Promise<unknown>;
}

class NodeRedisConnection extends BaseConnection {
  readonly library = 'redis';
  protected readonly readyEvents = ['ready'];
  protected readonly downEvents = ['end', 'reconnecting'];
  private readonly nr: NodeRedisInternal;
  private readonly listeners = new Map<string, (message: string, channel: string) => void>();

  constructor(client: NodeRedisClient, owned: boolean) {
    const nr = client as unknown as NodeRedisInternal;
    super(nr, owned);
    this.nr = nr;
  }

  isReady(): boolean {
    return this.nr.isReady;
  }

  publish(channel: string, payload: string): Promise<unknown> {
    return attempt(() => this.nr.publish(channel, payload));
  }

  subscribe(channel: string, onMessage: (message: string) => void): Promise<unknown> {
    // One listener per channel for the bus's lifetime: node-redis keeps listeners in a set, so
    // subscribing it again adds nothing, and unsubscribing it removes exactly the bus's.
    let listener = this.listeners.get(channel);
    if (listener === undefined) {
      listener = (message: string) => onMessage(message);
      this.listeners.set(channel, listener);
    }
    const registered = listener;
    return attempt(() => this.nr.subscribe(channel, registered));
  }

  unsubscribe(channel: string): Promise<unknown> {
    const listener = this.listeners.get(channel);
    if (listener === undefined) return Promise.resolve();
    this.listeners.delete(channel);
    return attempt(() => this.nr.unsubscribe(channel, listener));
  }

  async end(timeoutMs: number): Promise<void> {
    const nr = this.nr;
    if (!nr.isOpen) return;
    if (nr.isReady)
      await within(
        attempt(() => (nr.close ? nr.close() : nr.quit?.())),
        timeoutMs,
      );
    // Not up (reconnecting), or the graceful close did not finish in time.
    if (nr.isOpen)
      await within(
        attempt(() => (nr.destroy ? nr.destroy() : nr.disconnect?.())),
        timeoutMs,
      );
  }
}

/** Wraps a client of `library` (a caller's, already told apart by shape, or one the bus created). */
export function wrap(library: RedisClientLibrary, client: IoRedisClient | NodeRedisClient, owned: boolean): Connection {
  return library === 'ioredis'
    ? new IoRedisConnection(client as IoRedisClient, owned)
    : new NodeRedisConnection(client as NodeRedisClient, owned);
}
