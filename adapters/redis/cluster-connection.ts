/**
 * The bus's connection to a Redis Cluster, whichever library made the cluster client: an ioredis
 * `Cluster` or a node-redis `createCluster()` client. On a cluster the bus uses sharded pub/sub
 * (Redis 7): SPUBLISH goes through the cluster client, which routes it to the master of the channel's
 * slot; SSUBSCRIBE is done here, on a connection of the bus's own to each master that owns a slot of a
 * channel the bus follows, so that a message stays on its shard.
 *
 * Why not the libraries' own sharded subscribers: ioredis uses them only when the `Cluster` was made
 * with `shardedSubscribers: true` (without it an SSUBSCRIBE goes to one random node, and is refused
 * with MOVED by the others), and node-redis 6.3 re-subscribes after a failover with promises nobody
 * awaits, which reach the process as unhandled rejections (and end it, by Node's default). Keeping
 * the subscriber connections here makes both libraries behave alike, and lets the bus know exactly
 * when its subscriptions are back.
 *
 * Recovery, shard by shard: a subscriber connection that closes (its master died), or that Redis
 * unsubscribes from a channel (its slot moved to another master), reports the channels it held as lost
 * (and only those: the other shards' subscriptions stand) and starts a repair: read the slot map again
 * (CLUSTER SLOTS), close the connections to nodes that no longer serve a slot, and report ready, on
 * which the bus's reconciler subscribes the lost channels again where the slot map puts them (retrying
 * with its backoff while a failover is under way). This connection keeps where each channel is
 * subscribed, learned from Redis's replies, only to route them: what is wanted is the reconciler's. And
 * every second the subscriber compares the slot map with where its channels are: a master replaced while
 * its connections stayed open (a partition) is found there.
 */
import { attempt, endIoRedis, endNodeRedis, type Connection, type ConnectionEvents } from './connection.ts';
import type { RedisClientLibrary } from './options.ts';

/** The number of hash slots of a Redis Cluster. */
export const CLUSTER_SLOTS = 16384;

/** CRC16/XMODEM (polynomial 0x1021), the checksum Redis Cluster maps keys, and shard channels, to slots with. */
function crc16(bytes: Uint8Array): number {
  let crc = 0;
  for (const byte of bytes) {
    crc ^= byte << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc;
}

const encoder = new TextEncoder();

/** The slot of a key or shard channel: the CRC16 of its hash tag (`{…}`, when non-empty) or of the whole name, mod 16384. */
export function slotOf(name: string): number {
  const open = name.indexOf('{');
  if (open !== -1) {
    const close = name.indexOf('}', open + 1);
    if (close > open + 1) name = name.slice(open + 1, close);
  }
  return crc16(encoder.encode(name)) % CLUSTER_SLOTS;
}

/**
 * Channels grouped by slot, in first-seen order: one SSUBSCRIBE (or SUNSUBSCRIBE) may name several
 * channels only when they share a slot (Redis refuses the others with CROSSSLOT).
 */
export function groupBySlot(channels: Iterable<string>): Map<number, string[]> {
  const groups = new Map<number, string[]>();
  for (const channel of channels) {
    const slot = slotOf(channel);
    const group = groups.get(slot);
    if (group === undefined) groups.set(slot, [channel]);
    else group.push(channel);
  }
  return groups;
}

/** The lowest Redis version with sharded pub/sub. */
const SHARDED_PUBSUB_MAJOR = 7;

/** `redis_version` of an `INFO server` reply, or `undefined` when it has none. */
export function redisVersion(info: string): string | undefined {
  return /^redis_version:([^\r\n]+)/m.exec(info)?.[1]?.trim();
}

/**
 * Why a server is not usable for sharded pub/sub (its version is below 7), or `undefined` when it is.
 * A reply without a version (a proxy that hides it) is given the benefit of the doubt.
 */
export function shardedPubSubRefusal(info: string, address: string): string | undefined {
  const version = redisVersion(info);
  if (version === undefined) return undefined;
  const major = Number(version.split('.')[0]);
  if (!Number.isFinite(major) || major >= SHARDED_PUBSUB_MAJOR) return undefined;
  return `the Redis Cluster node ${address} runs Redis ${version}; the bus needs Redis 7 or later on a cluster (sharded pub/sub: SPUBLISH, SSUBSCRIBE)`;
}

/** Which master serves each slot: `host:port` per slot, from a CLUSTER SLOTS reply. */
export function parseClusterSlots(reply: unknown): (string | undefined)[] {
  const owners = new Array<string | undefined>(CLUSTER_SLOTS).fill(undefined);
  if (!Array.isArray(reply)) throw new TypeError('CLUSTER SLOTS did not answer an array');
  for (const range of reply as unknown[]) {
    if (!Array.isArray(range)) continue;
    const [first, last, master] = range as [unknown, unknown, unknown];
    if (!Array.isArray(master)) continue;
    const [host, port] = master as [unknown, unknown];
    if (typeof host !== 'string' || host === '' || host === '?') continue;
    const address = `${host}:${Number(port)}`;
    for (let slot = Number(first); slot <= Number(last) && slot < CLUSTER_SLOTS; slot++) owners[slot] = address;
  }
  return owners;
}

type Listener = (...args: never[]) => void;

interface Emitter {
  on(event: string, listener: Listener): unknown;
  removeListener(event: string, listener: Listener): unknown;
}

function noop(): void {}

/** Whether `error` is a cluster redirect (MOVED or ASK): the slot map the command was routed by is stale. */
function isRedirect(error: unknown): boolean {
  return error instanceof Error && /^(MOVED|ASK) \d+ /.test(error.message);
}

/** Rejects when `promise` has not settled within `ms`. */
function bounded<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} took longer than ${ms} ms`)), ms);
    timer.unref();
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** What a subscriber connection to one master reports. */
interface ShardHandlers {
  message(channel: string, message: string): void;
  /** The connection closed: repair elsewhere. */
  lost(error?: unknown): void;
  /** Redis unsubscribed the connection from a channel, unasked: its slot moved to another master. */
  moved(): void;
}

/** One connection of the bus's own to one master, for SSUBSCRIBE only. */
interface ShardClient {
  /** Connects and checks the server's version (Redis 7 or later). */
  connect(): Promise<void>;
  ssubscribe(channels: readonly string[]): Promise<unknown>;
  sunsubscribe(channels: readonly string[]): Promise<unknown>;
  /** Sends a command (before any SSUBSCRIBE: a subscribed connection takes no other). */
  command(args: readonly string[]): Promise<unknown>;
  /** Closes at once; reports nothing more. */
  close(): void;
}

/** What the bus needs of a library's cluster client. */
interface ClusterDriver {
  readonly library: RedisClientLibrary;
  readonly client: Emitter;
  readonly readyEvents: readonly string[];
  readonly downEvents: readonly string[];
  isReady(): boolean;
  spublish(channel: string, payload: string): Promise<unknown>;
  command(args: readonly string[]): Promise<unknown>;
  /** A connection to the node at `host:port` with the cluster client's settings (credentials, TLS), not yet connected. */
  openShard(host: string, port: number, handlers: ShardHandlers): Promise<ShardClient>;
  /** Closes the cluster client (an owned one): QUIT when it is up (within `timeoutMs`), then a hard close. */
  end(timeoutMs: number): Promise<void>;
}

/** The ioredis `Cluster` methods the bus calls. */
interface IoRedisCluster extends Emitter {
  readonly status: string;
  readonly isCluster: true;
  spublish(channel: string, message: string): Promise<unknown>;
  call(command: string, ...args: string[]): Promise<unknown>;
  refreshSlotsCache?(callback?: (error?: unknown) => void): void;
  nodes(role?: 'all' | 'master' | 'slave'): IoRedisNode[];
  quit(): Promise<unknown>;
  disconnect(): void;
}

/** An ioredis `Redis` (one node of a `Cluster`, or a connection the bus made from one). */
interface IoRedisNode extends Emitter {
  readonly status: string;
  duplicate(override: Record<string, unknown>): IoRedisNode;
  connect(): Promise<unknown>;
  info(section: string): Promise<string>;
  ssubscribe(...channels: string[]): Promise<unknown>;
  sunsubscribe(...channels: string[]): Promise<unknown>;
  call(command: string, ...args: string[]): Promise<unknown>;
  disconnect(): void;
}

class IoRedisShard implements ShardClient {
  private closed = false;

  constructor(
    private readonly redis: IoRedisNode,
    private readonly address: string,
    handlers: ShardHandlers,
  ) {
    redis.on('smessage', (channel: string, message: string) => {
      if (!this.closed) handlers.message(channel, message);
    });
    // ioredis emits 'moved' when Redis unsubscribes the connection from a shard channel unasked
    // (its slot moved to another master).
    redis.on('moved', () => {
      if (!this.closed) handlers.moved();
    });
    redis.on('end', () => {
      if (!this.closed) handlers.lost(new Error(`the subscriber connection to ${this.address} closed`));
    });
    redis.on('error', noop);
  }

  async connect(): Promise<void> {
    await this.redis.connect();
    const refusal = shardedPubSubRefusal(await this.redis.info('server'), this.address);
    if (refusal !== undefined) throw new Error(refusal);
  }

  ssubscribe(channels: readonly string[]): Promise<unknown> {
    return attempt(() => this.redis.ssubscribe(...channels));
  }

  sunsubscribe(channels: readonly string[]): Promise<unknown> {
    return attempt(() => this.redis.sunsubscribe(...channels));
  }

  command(args: readonly string[]): Promise<unknown> {
    const [name, ...rest] = args;
    return attempt(() => this.redis.call(name as string, ...rest));
  }

  close(): void {
    this.closed = true;
    this.redis.disconnect();
  }
}

class IoRedisClusterDriver implements ClusterDriver {
  readonly library = 'ioredis';
  readonly readyEvents = ['ready'];
  readonly downEvents = ['close', 'reconnecting', 'end'];

  constructor(
    readonly client: IoRedisCluster,
    private readonly connectionName: string | undefined,
  ) {}

  isReady(): boolean {
    return this.client.status === 'ready';
  }

  spublish(channel: string, payload: string): Promise<unknown> {
    return attempt(() => this.client.spublish(channel, payload)).catch((error: unknown) => {
      // ioredis follows a MOVED (and reads the slot map again) for a command alone, and for an automatic
      // pipeline only when every command in it got the same reply. Publishes to two slots that moved
      // off one master, sent in one tick, got two different MOVED replies: neither was followed, the
      // slot map stayed stale, and every later try of either failed the same way. The bus tries again
      // (its backlog); this makes the try find the slot's new master.
      if (isRedirect(error)) this.client.refreshSlotsCache?.();
      throw error;
    });
  }

  command(args: readonly string[]): Promise<unknown> {
    const [name, ...rest] = args;
    return attempt(() => this.client.call(name as string, ...rest));
  }

  openShard(host: string, port: number, handlers: ShardHandlers): Promise<ShardClient> {
    return attempt(() => {
      // Any node of the cluster carries the cluster's per-node settings (credentials, TLS).
      const template = this.client.nodes('all')[0];
      if (template === undefined) throw new Error('the ioredis Cluster knows no node yet');
      const redis = template.duplicate({
        host,
        port,
        lazyConnect: true,
        readOnly: false,
        enableReadyCheck: true,
        enableOfflineQueue: false,
        // No reconnection: a closed subscriber connection is repaired against the current slot map.
        retryStrategy: () => null,
        autoResubscribe: false,
        maxRetriesPerRequest: 0,
        ...(this.connectionName === undefined ? {} : { connectionName: this.connectionName }),
      });
      return new IoRedisShard(redis, `${host}:${port}`, handlers);
    });
  }

  end(timeoutMs: number): Promise<void> {
    return endIoRedis(this.client, timeoutMs);
  }
}

/** The node-redis cluster client methods the bus calls (`createCluster()` of `redis` 4.6 and later). */
interface NodeRedisCluster extends Emitter {
  readonly isReady: boolean;
  readonly isOpen: boolean;
  readonly masters: readonly { readonly client?: NodeRedisNode }[];
  sPublish(channel: string, message: string): Promise<unknown>;
  sendCommand(firstKey: string | undefined, isReadonly: boolean | undefined, args: string[]): Promise<unknown>;
  nodeClient(node: unknown): NodeRedisNode | Promise<NodeRedisNode>;
  close?(): Promise<unknown>;
  destroy?(): unknown;
  quit?(): Promise<unknown>;
  disconnect?(): Promise<unknown>;
}

/** A node-redis client of one node. */
interface NodeRedisNode extends Emitter {
  readonly isReady: boolean;
  readonly options?: { readonly socket?: Record<string, unknown> };
  duplicate(overrides: Record<string, unknown>): NodeRedisNode;
  connect(): Promise<unknown>;
  info(section: string): Promise<string>;
  sSubscribe(channels: string[], listener: (message: string, channel: string) => void): Promise<unknown>;
  sUnsubscribe(channels: string[], listener: (message: string, channel: string) => void): Promise<unknown>;
  sendCommand(args: string[]): Promise<unknown>;
  destroy?(): unknown;
  disconnect?(): Promise<unknown>;
}

class NodeRedisShard implements ShardClient {
  private closed = false;
  private readonly listener: (message: string, channel: string) => void;

  constructor(
    private readonly client: NodeRedisNode,
    private readonly address: string,
    handlers: ShardHandlers,
  ) {
    this.listener = (message, channel) => {
      if (!this.closed) handlers.message(channel, message);
    };
    // node-redis emits 'sharded-channel-moved' when Redis unsubscribes the connection from a shard
    // channel unasked (its slot moved); the channel's listeners are gone from the client by then.
    client.on('sharded-channel-moved', () => {
      if (!this.closed) handlers.moved();
    });
    client.on('end', () => {
      if (!this.closed) handlers.lost(new Error(`the subscriber connection to ${this.address} closed`));
    });
    client.on('error', (error: unknown) => {
      if (!this.closed && !this.client.isReady) handlers.lost(error);
    });
  }

  async connect(): Promise<void> {
    await this.client.connect();
    const refusal = shardedPubSubRefusal(await this.client.info('server'), this.address);
    if (refusal !== undefined) throw new Error(refusal);
  }

  ssubscribe(channels: readonly string[]): Promise<unknown> {
    return attempt(() => this.client.sSubscribe([...channels], this.listener));
  }

  sunsubscribe(channels: readonly string[]): Promise<unknown> {
    return attempt(() => this.client.sUnsubscribe([...channels], this.listener));
  }

  command(args: readonly string[]): Promise<unknown> {
    return attempt(() => this.client.sendCommand([...args]));
  }

  close(): void {
    this.closed = true;
    const client = this.client;
    attempt(() => (client.destroy ? client.destroy() : client.disconnect?.())).catch(noop);
  }
}

class NodeRedisClusterDriver implements ClusterDriver {
  readonly library = 'redis';
  readonly readyEvents = ['connect'];
  readonly downEvents = ['disconnect'];

  constructor(
    readonly client: NodeRedisCluster,
    private readonly connectionName: string | undefined,
  ) {}

  isReady(): boolean {
    return this.client.isReady;
  }

  spublish(channel: string, payload: string): Promise<unknown> {
    return attempt(() => this.client.sPublish(channel, payload));
  }

  command(args: readonly string[]): Promise<unknown> {
    return attempt(() => this.client.sendCommand(undefined, true, [...args]));
  }

  async openShard(host: string, port: number, handlers: ShardHandlers): Promise<ShardClient> {
    // A node client that is up carries the cluster's per-node settings (credentials, TLS).
    const masters = this.client.masters;
    let template = masters.find((master) => master.client?.isReady === true)?.client;
    if (template === undefined) {
      const first = masters[0];
      if (first === undefined) throw new Error('the node-redis cluster knows no master yet');
      template = await this.client.nodeClient(first);
    }
    const client = template.duplicate({
      socket: { ...template.options?.socket, host, port, reconnectStrategy: false },
      disableOfflineQueue: true,
      readonly: false,
      ...(this.connectionName === undefined ? {} : { name: this.connectionName }),
    });
    return new NodeRedisShard(client, `${host}:${port}`, handlers);
  }

  end(timeoutMs: number): Promise<void> {
    return endNodeRedis(this.client, timeoutMs);
  }
}

/** Tells a cluster client's library by shape: ioredis's `Cluster` says `isCluster`, node-redis's has `masters` and `sSubscribe`. */
export function clusterLibrary(client: unknown): RedisClientLibrary | undefined {
  const loose = client as Record<string, unknown> | null;
  if (typeof loose !== 'object' || loose === null) return undefined;
  if (loose.isCluster === true) return 'ioredis';
  if (Array.isArray(loose.masters) && typeof loose.sSubscribe === 'function') return 'redis';
  return undefined;
}

/** A shard connection, once connected (or connecting). */
interface Shard {
  readonly client: ShardClient;
  readonly connected: Promise<void>;
}

/** How long one step of a repair (reading the slot map, connecting, subscribing) may take. */
const STEP_MS = 5000;
/** How long asking one node for the slot map may take: a dead master must not hold a repair up for long. */
const PROBE_MS = 1000;
/**
 * How often a subscriber compares where its channels are subscribed with the slot map (one CLUSTER
 * SLOTS): a safety net for a master that stops answering without closing its connections (a network
 * partition), and for a failed master restarted with its old view of the slots, which may take a
 * SSUBSCRIBE before it learns it was replaced. Two checks in a row must agree, so a channel placed on
 * the wrong node is found within about two seconds.
 */
const CHECK_MS = 1000;
const FIRST_RETRY_MS = 50;
const MAX_RETRY_MS = 500;

/**
 * A cluster client as the bus's publisher or subscriber. As the publisher it publishes with SPUBLISH
 * through the cluster client; as the subscriber it keeps a connection of its own to each master that
 * owns a slot of a followed channel (see the module's comment for why and how it recovers). One
 * cluster client may serve both roles: they are two `ClusterConnection`s on it.
 */
export class ClusterConnection implements Connection {
  readonly sharded = true;
  readonly library: RedisClientLibrary;

  /** Every channel subscribed, and the master (`host:port`) it is subscribed on, `undefined` until it is. */
  private readonly channels = new Map<string, string | undefined>();
  private readonly shards = new Map<string, Shard>();
  /** The master of each slot, as last read; empty until the first repair. */
  private owners: (string | undefined)[] = [];
  private handler: ((channel: string, message: string) => void) | undefined;
  private events: ConnectionEvents | undefined;
  private readonly attached: [string, Listener][] = [];
  /** Subscriptions in place on the current slot map (the subscriber is "ready"). */
  private up = false;
  private repairing: Promise<void> | undefined;
  /** Something was lost while a repair ran: it must run again. */
  private lostAgain = false;
  private lastError: unknown;
  private closed = false;
  private checkTimer: NodeJS.Timeout | undefined;
  private checking = false;
  /** A channel the last check found away from its slot's master (`channel owner`), to confirm. */
  private suspect: string | undefined;

  private constructor(
    private readonly driver: ClusterDriver,
    readonly owned: boolean,
    private readonly role: 'publisher' | 'subscriber',
  ) {
    this.library = driver.library;
  }

  /**
   * Wraps a caller's cluster client, or one the bus created (`owned`), for one role. `connectionName`
   * names the subscriber connections the bus opens to the masters (else they keep the cluster's).
   */
  static wrap(
    client: unknown,
    owned: boolean,
    role: 'publisher' | 'subscriber',
    connectionName?: string,
  ): ClusterConnection {
    const library = clusterLibrary(client);
    if (library === undefined) throw new TypeError('not a Redis Cluster client');
    const driver =
      library === 'ioredis'
        ? new IoRedisClusterDriver(client as IoRedisCluster, connectionName)
        : new NodeRedisClusterDriver(client as NodeRedisCluster, connectionName);
    return new ClusterConnection(driver, owned, role);
  }

  isReady(): boolean {
    return this.driver.isReady() && (this.up || this.role === 'publisher');
  }

  /** Whether the bus let go of the connection (`end()` or `detach()`). */
  get ended(): boolean {
    return this.closed;
  }

  publish(channel: string, payload: string): Promise<unknown> {
    return this.driver.spublish(channel, payload);
  }

  command(args: readonly string[]): Promise<unknown> {
    return this.driver.command(args);
  }

  onMessage(handler: (channel: string, message: string) => void): void {
    this.handler = handler;
  }

  /**
   * SSUBSCRIBEs `channels` on their masters, one command per slot. While a repair runs it only records
   * them (the repair subscribes them) and rejects: the bus subscribes again on the next ready().
   */
  subscribe(channels: readonly string[]): Promise<unknown> {
    for (const channel of channels) if (!this.channels.has(channel)) this.channels.set(channel, undefined);
    if (this.closed) return Promise.reject(new Error('the connection is closed'));
    if (!this.up) {
      this.repair(undefined);
      return Promise.reject(new Error('the Redis Cluster subscriptions are being restored', { cause: this.lastError }));
    }
    // A master that cannot be reached (a failover under way, a stale slot map): this SSUBSCRIBE fails,
    // the slot map is read again, and the reconciler tries again; the other shards stand.
    return this.place(channels).catch((error: unknown) => {
      this.repair(error, true);
      throw error;
    });
  }

  unsubscribe(channels: readonly string[]): Promise<unknown> {
    const byShard = new Map<string, string[]>();
    for (const channel of channels) {
      if (!this.channels.has(channel)) continue;
      const address = this.channels.get(channel);
      this.channels.delete(channel);
      if (address === undefined) continue;
      const list = byShard.get(address) ?? [];
      list.push(channel);
      byShard.set(address, list);
    }
    const sent: Promise<unknown>[] = [];
    for (const [address, list] of byShard) {
      const shard = this.shards.get(address);
      if (shard === undefined) continue;
      for (const group of groupBySlot(list).values()) sent.push(shard.client.sunsubscribe(group));
    }
    return Promise.all(sent);
  }

  watch(events: ConnectionEvents): void {
    this.events = events;
    const listen = (event: string, listener: Listener): void => {
      this.driver.client.on(event, listener);
      this.attached.push([event, listener]);
    };
    for (const name of this.driver.readyEvents)
      listen(name, () => {
        if (this.role === 'publisher') events.ready();
        else this.repair(undefined);
      });
    for (const name of this.driver.downEvents)
      listen(name, () => {
        this.up = false;
        events.down();
      });
    // The listener that keeps a cluster client's errors from crashing the process (node-redis) or
    // being printed as unhandled (ioredis). ioredis reports every failed node connection while the
    // cluster as a whole is ready: only an error while not ready is an outage.
    listen('error', (error: unknown) => {
      if (!this.driver.isReady()) events.down(error);
    });
    if (this.role === 'subscriber') {
      this.checkTimer = setInterval(() => void this.check(), CHECK_MS);
      this.checkTimer.unref();
      if (this.driver.isReady()) this.repair(undefined);
    }
  }

  /** Removes the listeners put on the cluster client and closes the subscriber connections (the bus's own). */
  detach(): void {
    for (const [event, listener] of this.attached.splice(0)) this.driver.client.removeListener(event, listener);
    this.closeShards();
  }

  /**
   * Closes the subscriber connections to the masters; an owned publisher also closes the cluster
   * client (which an owned publisher and subscriber share).
   */
  async end(timeoutMs: number): Promise<void> {
    this.closeShards();
    if (this.owned && this.role === 'publisher') await this.driver.end(timeoutMs);
  }

  private closeShards(): void {
    this.closed = true;
    this.up = false;
    clearInterval(this.checkTimer);
    for (const shard of this.shards.values()) shard.client.close();
    this.shards.clear();
  }

  /** The connection to the master at `address`, opened (and connected) when there is none. */
  private shard(address: string): Shard {
    const existing = this.shards.get(address);
    if (existing !== undefined) return existing;
    const colon = address.lastIndexOf(':');
    const host = address.slice(0, colon);
    const port = Number(address.slice(colon + 1));
    let client: ShardClient | undefined;
    let dropped = false;
    const close = (): void => {
      dropped = true;
      client?.close();
    };
    const forget = (): void => {
      if (this.shards.get(address) !== shard) return;
      this.shards.delete(address);
      for (const [channel, on] of this.channels) if (on === address) this.channels.set(channel, undefined);
    };
    const handlers: ShardHandlers = {
      message: (channel, message) => this.handler?.(channel, message),
      // This shard's channels only: the others' subscriptions stand.
      lost: (error) => {
        const lost = this.channelsOn(address);
        forget();
        close();
        this.lose(lost, error);
        this.repair(error, true);
      },
      // The connection is fine and keeps its other channels, but which ones moved is not always said
      // (ioredis): the repair reads the slot map again and reports lost exactly the channels it puts on
      // another master, without reporting an outage (a resharding moves slots one by one).
      moved: () => this.repair(undefined, true),
    };
    const connected = this.driver.openShard(host, port, handlers).then(async (opened) => {
      client = opened;
      if (dropped || this.closed) {
        opened.close();
        throw new Error('the connection is closed');
      }
      await bounded(opened.connect(), STEP_MS, `connecting to ${address}`);
    });
    const shard: Shard = {
      connected,
      client: {
        connect: () => connected,
        ssubscribe: (channels) => connected.then(() => (client as ShardClient).ssubscribe(channels)),
        sunsubscribe: (channels) => connected.then(() => (client as ShardClient).sunsubscribe(channels)),
        command: (args) => connected.then(() => (client as ShardClient).command(args)),
        close,
      },
    };
    this.shards.set(address, shard);
    connected.catch(() => {
      forget();
      close();
    });
    return shard;
  }

  /** The channels subscribed on the master at `address`. */
  private channelsOn(address: string): string[] {
    const on: string[] = [];
    for (const [channel, at] of this.channels) if (at === address) on.push(channel);
    return on;
  }

  /** Tells the bus that `channels` lost their subscription (the connection as a whole stands). */
  private lose(channels: readonly string[], error: unknown): void {
    if (channels.length > 0 && !this.closed) this.events?.lost?.(channels, error);
  }

  /**
   * SSUBSCRIBEs `channels` on the masters that own their slots now, one command per slot; those
   * already subscribed there are left as they are (the connection keeps them), so that the bus's
   * re-subscription after a repair, and a repair after one master's failover, cost only the channels
   * that lost their subscription.
   */
  private async place(channels: Iterable<string>): Promise<void> {
    const byOwner = new Map<string, string[]>();
    for (const channel of channels) {
      if (!this.channels.has(channel)) continue;
      const owner = this.owners[slotOf(channel)];
      if (owner === undefined) throw new Error(`no master serves the slot of ${channel}`);
      if (this.channels.get(channel) === owner && this.shards.has(owner)) continue;
      const list = byOwner.get(owner) ?? [];
      list.push(channel);
      byOwner.set(owner, list);
    }
    const sent: Promise<void>[] = [];
    for (const [owner, list] of byOwner) {
      const shard = this.shard(owner);
      for (const group of groupBySlot(list).values()) {
        sent.push(
          shard.client.ssubscribe(group).then(() => {
            for (const channel of group) {
              const before = this.channels.get(channel);
              if (!this.channels.has(channel)) continue;
              // Moved off a master that is still up: leave it there (Redis has usually done so already).
              if (before !== undefined && before !== owner)
                this.shards.get(before)?.client.sunsubscribe([channel]).catch(noop);
              this.channels.set(channel, owner);
            }
          }),
        );
      }
    }
    await bounded(Promise.all(sent), STEP_MS, 'SSUBSCRIBE');
  }

  /**
   * CLUSTER SLOTS, asked on a connection of its own to a master this connection knows (the cluster
   * client may route a keyless command to the node that just died, and wait for it), else through the
   * cluster client.
   */
  private async readSlots(): Promise<unknown> {
    const known = [...new Set(this.owners)].filter((address): address is string => address !== undefined);
    // The masters whose subscriber connection is up first: they answered last.
    known.sort((a, b) => Number(this.shards.has(b)) - Number(this.shards.has(a)));
    for (const address of known.slice(0, 3)) {
      const colon = address.lastIndexOf(':');
      let probe: ShardClient | undefined;
      try {
        probe = await this.driver.openShard(address.slice(0, colon), Number(address.slice(colon + 1)), {
          message: noop,
          lost: noop,
          moved: noop,
        });
        const opened = probe;
        return await bounded(
          opened.connect().then(() => opened.command(['CLUSTER', 'SLOTS'])),
          PROBE_MS,
          `CLUSTER SLOTS on ${address}`,
        );
      } catch (error) {
        this.lastError = error;
      } finally {
        probe?.close();
      }
    }
    return bounded(this.driver.command(['CLUSTER', 'SLOTS']), PROBE_MS, 'CLUSTER SLOTS');
  }

  /**
   * Reads the slot map and starts a repair when a channel is subscribed elsewhere than on its slot's
   * master, in two checks in a row. Skipped while a repair runs, or while nothing is subscribed; a
   * failure to read is no finding (the cluster client reports its own outages).
   */
  private async check(): Promise<void> {
    if (this.checking || this.repairing !== undefined || !this.up || this.channels.size === 0) return;
    this.checking = true;
    try {
      const owners = parseClusterSlots(
        await bounded(this.driver.command(['CLUSTER', 'SLOTS']), PROBE_MS, 'CLUSTER SLOTS'),
      );
      let found: string | undefined;
      for (const [channel, on] of this.channels) {
        const owner = owners[slotOf(channel)];
        if (on !== undefined && owner !== undefined && on !== owner) {
          found = `${channel} ${owner}`;
          // Seen twice in a row: not a node's view lagging behind the cluster's for a moment.
          if (found === this.suspect) {
            this.suspect = undefined;
            // Every channel subscribed on that node may be on a replaced master: subscribed again
            // where the slot map says, the rest of the cluster untouched.
            const lost = this.channelsOn(on);
            for (const moved of lost) this.channels.set(moved, undefined);
            const error = new Error(`the slot of a channel subscribed on ${on} is served by ${owner} now`);
            this.lose(lost, error);
            this.repair(error, true);
            return;
          }
          break;
        }
      }
      this.suspect = found;
    } catch {
      // The next check, or the cluster client's own events, will tell.
    } finally {
      this.checking = false;
    }
  }

  /**
   * Marks the subscriptions down (reporting it, unless `quiet`: a slot moved, the rest stands) and
   * repairs them: reads the slot map, closes the connections to nodes that no longer serve a slot,
   * subscribes every channel on its master, and tries again with a backoff until all of it
   * succeeds; then reports ready.
   */
  private repair(error: unknown, quiet = false): void {
    if (this.closed) return;
    if (error !== undefined) this.lastError = error;
    if (this.up && !quiet) {
      this.up = false;
      this.events?.down(error);
    }
    this.lostAgain = true;
    if (this.repairing !== undefined) return;
    this.repairing = this.repairLoop().finally(() => {
      this.repairing = undefined;
    });
  }

  private async repairLoop(): Promise<void> {
    let delay = FIRST_RETRY_MS;
    while (!this.closed) {
      this.lostAgain = false;
      try {
        if (!this.driver.isReady()) throw new Error('the cluster client is not ready');
        this.owners = parseClusterSlots(await this.readSlots());
        const masters = new Set(this.owners);
        for (const [address, shard] of this.shards) {
          if (masters.has(address)) continue;
          this.shards.delete(address);
          shard.client.close();
        }
        // Every channel subscribed elsewhere than on its slot's master now (a failover, a moved slot, a
        // master that is no master any more) is lost; the others stand.
        const lost: string[] = [];
        for (const [channel, on] of this.channels) {
          if (on === undefined || (on === this.owners[slotOf(channel)] && this.shards.has(on))) continue;
          this.channels.set(channel, undefined);
          lost.push(channel);
        }
        this.lose(lost, undefined);
        // Ready once every master that serves a channel's slot answers: while a failover is under way
        // the dead master is still in the map, and this waits for its replica's promotion. The channels
        // themselves are subscribed again by the bus's reconciler, on ready().
        const owners = new Set<string>();
        for (const channel of this.channels.keys()) {
          const owner = this.owners[slotOf(channel)];
          if (owner === undefined) throw new Error(`no master serves the slot of ${channel}`);
          owners.add(owner);
        }
        await bounded(
          Promise.all([...owners].map((owner) => this.shard(owner).connected)),
          STEP_MS,
          'connecting to the masters',
        );
        if (!this.lostAgain) break;
      } catch (error) {
        // Tried again with a backoff. Only the lost channels are down meanwhile (the bus counts and
        // reports them); the cluster client's own events say when the whole cluster is unreachable.
        this.lastError = error;
      }
      await new Promise((resolve) => setTimeout(resolve, delay).unref());
      delay = Math.min(delay * 2, MAX_RETRY_MS);
    }
    if (this.closed) return;
    this.up = true;
    this.events?.ready();
  }
}
