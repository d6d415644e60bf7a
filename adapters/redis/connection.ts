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
  /**
   * Some channels lost their subscription while the connection as a whole stands (a cluster shard
   * failed, or their slot moved): they are subscribed again on the next ready().
   */
  lost?(channels: readonly string[], error?: unknown): void;
}

/** A connection, whichever library. No method throws: failures come back as rejections or events. */
export interface Connection {
  readonly library: RedisClientLibrary;
  /** Whether the bus created the connection (and so closes it). */
  readonly owned: boolean;
  /**
   * Whether the connection speaks sharded pub/sub (a Redis Cluster): `publish` is an SPUBLISH and
   * `subscribe` an SSUBSCRIBE, each reaching only the shard that owns the channel's slot.
   */
  readonly sharded: boolean;
  /** Whether commands go out now (not into an offline queue). */
  isReady(): boolean;
  /** Sends a PUBLISH (SPUBLISH when sharded); resolves with Redis's reply. */
  publish(channel: string, payload: string): Promise<unknown>;
  /**
   * Subscribes to `channels` in one command where the server allows it, delivering their messages to the
   * handler given to {@link onMessage}. May be called again for channels already subscribed (re-subscribe).
   */
  subscribe(channels: readonly string[]): Promise<unknown>;
  /** Stops delivering `channels` and unsubscribes them (unless another bus on this connection still listens). */
  unsubscribe(channels: readonly string[]): Promise<unknown>;
  /** Where the messages of every subscribed channel go. Set once, before the first subscribe. */
  onMessage(handler: (channel: string, message: string) => void): void;
  /** Sends one command (`['PUBSUB', 'NUMSUB', …]`) and resolves with the reply. */
  command(args: readonly string[]): Promise<unknown>;
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
export function attempt<T>(run: () => T | Promise<T>): Promise<T> {
  return new Promise((resolve) => resolve(run()));
}

/** What ending a node-redis client takes, of one server or a cluster: v5 and later `close()` and `destroy()`, v4 `quit()` and `disconnect()`. */
export interface NodeRedisClosable {
  readonly isOpen: boolean;
  readonly isReady: boolean;
  close?(): Promise<unknown>;
  destroy?(): unknown;
  quit?(): Promise<unknown>;
  disconnect?(): Promise<unknown>;
}

/** What ending an ioredis client takes, of one server or a cluster. */
export interface IoRedisClosable {
  readonly status: string;
  quit(): Promise<unknown>;
  disconnect(): void;
}

/** Ends an ioredis client: QUIT when it is up (within `timeoutMs`), then a hard close if it did not end. */
export async function endIoRedis(client: IoRedisClosable, timeoutMs: number): Promise<void> {
  if (client.status === 'end') return;
  if (client.status === 'ready')
    await within(
      attempt(() => client.quit()),
      timeoutMs,
    );
  // Not up, or QUIT did not finish in time: stop reconnecting and close the socket now.
  if (client.status !== 'end') client.disconnect();
}

/** Ends a node-redis client: gracefully when it is up (within `timeoutMs`), then hard if it is still open. */
export async function endNodeRedis(client: NodeRedisClosable, timeoutMs: number): Promise<void> {
  if (!client.isOpen) return;
  if (client.isReady)
    await within(
      attempt(() => (client.close ? client.close() : client.quit?.())),
      timeoutMs,
    );
  // Not up (reconnecting), or the graceful close did not finish in time.
  if (client.isOpen)
    await within(
      attempt(() => (client.destroy ? client.destroy() : client.disconnect?.())),
      timeoutMs,
    );
}

/**
 * Channels an ioredis connection is subscribed to for the buses using it, with how many buses each: two
 * buses (two prefixes, or two nodes in one process) may share a caller's subscriber, and one closing
 * must not unsubscribe the other. (node-redis counts per listener itself.)
 */
const ioredisChannels = new WeakMap<object, Map<string, number>>();

/** A socket whose writes can be held and let go (`net.Socket`). */
interface Corkable {
  cork(): void;
  uncork(): void;
}

/** The most PUBLISHes the bus's own ioredis publisher holds before writing them (see `corkForTick`). */
const CORKED_PUBLISHES = 16;

abstract class BaseConnection implements Connection {
  abstract readonly library: RedisClientLibrary;
  readonly sharded = false;
  private readonly attached: [string, Listener][] = [];
  /** The bus's message handler; messages before it is set go nowhere. */
  protected handler: (channel: string, message: string) => void = noop;

  constructor(
    protected readonly client: Emitter,
    readonly owned: boolean,
  ) {}

  abstract isReady(): boolean;
  abstract publish(channel: string, payload: string): Promise<unknown>;
  abstract subscribe(channels: readonly string[]): Promise<unknown>;
  abstract unsubscribe(channels: readonly string[]): Promise<unknown>;
  abstract command(args: readonly string[]): Promise<unknown>;
  abstract end(timeoutMs: number): Promise<void>;
  /** The client's events that mean "ready", and those that mean "no longer ready". */
  protected abstract readonly readyEvents: readonly string[];
  protected abstract readonly downEvents: readonly string[];

  onMessage(handler: (channel: string, message: string) => void): void {
    this.handler = handler;
  }

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
  call(command: string, ...args: string[]): Promise<unknown>;
  /** The connection's socket (ioredis 5 and 6). */
  readonly stream?: Partial<Corkable>;
  quit(): Promise<unknown>;
  disconnect(): void;
}

class IoRedisConnection extends BaseConnection {
  readonly library = 'ioredis';
  protected readonly readyEvents = ['ready'];
  protected readonly downEvents = ['close', 'reconnecting', 'end'];
  private readonly io: IoRedisInternal;
  /** The channels this bus subscribed on the client (each counted once in `ioredisChannels`). */
  private readonly counted = new Set<string>();
  private listening = false;
  /** PUBLISHes held in the corked socket in this tick (see {@link corkForTick}). */
  private corked = 0;

  constructor(client: IoRedisClient, owned: boolean) {
    const io = client as unknown as IoRedisInternal;
    super(io, owned);
    this.io = io;
  }

  isReady(): boolean {
    return this.io.status === 'ready';
  }

  publish(channel: string, payload: string): Promise<unknown> {
    if (this.owned) this.corkForTick();
    return attempt(() => this.io.publish(channel, payload));
  }

  /**
   * Holds the socket's writes for a few PUBLISHes at most, and no longer than this tick, so that a burst
   * goes out in a few system calls instead of one per PUBLISH: what auto-pipelining saves in CPU,
   * without its wait for `setImmediate` and for the previous batch's replies. The bound keeps the first
   * event of a long burst (whose tick also writes every local stream) from waiting for the last one
   * (docs/performance.md). Only on the bus's own connections, whose client it configured; a caller's
   * client is used as it is.
   */
  private corkForTick(): void {
    const stream = this.io.stream;
    if (typeof stream?.cork !== 'function' || typeof stream.uncork !== 'function') return;
    const socket = stream as Corkable;
    if (this.corked > 0) {
      if (++this.corked <= CORKED_PUBLISHES) return;
      // The batch is full: out it goes, and the next one starts.
      socket.uncork();
      socket.cork();
      this.corked = 1;
      return;
    }
    socket.cork();
    this.corked = 1;
    process.nextTick(() => {
      this.corked = 0;
      socket.uncork();
    });
  }

  command(args: readonly string[]): Promise<unknown> {
    const [name, ...rest] = args;
    return attempt(() => this.io.call(name as string, ...rest));
  }

  subscribe(channels: readonly string[]): Promise<unknown> {
    if (!this.listening) {
      this.listening = true;
      // Another bus may share the client: hand on only the channels this one subscribed.
      this.listen('message', (from: string, message: string) => {
        if (this.counted.has(from)) this.handler(from, message);
      });
    }
    const counts = ioredisChannels.get(this.io) ?? new Map<string, number>();
    ioredisChannels.set(this.io, counts);
    for (const channel of channels) {
      if (this.counted.has(channel)) continue;
      this.counted.add(channel);
      counts.set(channel, (counts.get(channel) ?? 0) + 1);
    }
    if (channels.length === 0) return Promise.resolve();
    return attempt(() => this.io.subscribe(...channels));
  }

  unsubscribe(channels: readonly string[]): Promise<unknown> {
    const counts = ioredisChannels.get(this.io);
    const last: string[] = [];
    for (const channel of channels) {
      if (!this.counted.delete(channel)) continue;
      const left = (counts?.get(channel) ?? 1) - 1;
      if (left > 0) {
        counts?.set(channel, left);
      } else {
        counts?.delete(channel);
        last.push(channel);
      }
    }
    if (last.length === 0) return Promise.resolve();
    return attempt(() => this.io.unsubscribe(...last));
  }

  end(timeoutMs: number): Promise<void> {
    return endIoRedis(this.io, timeoutMs);
  }
}

interface NodeRedisInternal extends Omit<NodeRedisClient, 'on' | 'subscribe'>, Emitter, NodeRedisClosable {
  subscribe(channels: string[], listener: (message: string, channel: string) => unknown): Promise<unknown>;
  unsubscribe(channels: string[], listener: (message: string, channel: string) => unknown): Promise<unknown>;
  sendCommand(args: string[]): Promise<unknown>;
}

class NodeRedisConnection extends BaseConnection {
  readonly library = 'redis';
  protected readonly readyEvents = ['ready'];
  protected readonly downEvents = ['end', 'reconnecting'];
  private readonly nr: NodeRedisInternal;
  /**
   * The bus's one listener, for every channel and the bus's lifetime: node-redis keeps a channel's
   * listeners in a set, so subscribing it again adds nothing, and unsubscribing it removes exactly the
   * bus's (the channel is unsubscribed when no other listener of it is left).
   */
  private readonly listener = (message: string, channel: string): void => this.handler(channel, message);
  private readonly subscribed = new Set<string>();

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

  command(args: readonly string[]): Promise<unknown> {
    return attempt(() => this.nr.sendCommand([...args]));
  }

  subscribe(channels: readonly string[]): Promise<unknown> {
    if (channels.length === 0) return Promise.resolve();
    for (const channel of channels) this.subscribed.add(channel);
    return attempt(() => this.nr.subscribe([...channels], this.listener));
  }

  unsubscribe(channels: readonly string[]): Promise<unknown> {
    const mine = channels.filter((channel) => this.subscribed.delete(channel));
    if (mine.length === 0) return Promise.resolve();
    return attempt(() => this.nr.unsubscribe(mine, this.listener));
  }

  end(timeoutMs: number): Promise<void> {
    return endNodeRedis(this.nr, timeoutMs);
  }
}

/** Wraps a client of `library` (a caller's, already told apart by shape, or one the bus created). */
export function wrap(library: RedisClientLibrary, client: IoRedisClient | NodeRedisClient, owned: boolean): Connection {
  return library === 'ioredis'
    ? new IoRedisConnection(client as IoRedisClient, owned)
    : new NodeRedisConnection(client as NodeRedisClient, owned);
}
