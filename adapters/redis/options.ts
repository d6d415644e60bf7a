/**
 * The options of `new RedisBus()`: their types, defaults and checks. A mistake throws an `OptionsError`
 * with the code of its check when the bus is built, never at the first publish.
 */
import { randomUUID } from 'node:crypto';
import {
  consoleLogger,
  describeValue,
  ErrorCode,
  booleanOption,
  given,
  knownKeys,
  loggerOption,
  MAX_NODE_ID_LENGTH,
  oneOf,
  optionKeys,
  OptionsError,
  optionsObject,
  type Logger,
} from '../../lib/internal.ts';

/**
 * An ioredis client (`new Redis(url)`, ioredis 5 or 6), as far as the bus relies on its shape. Only
 * what tells the libraries apart is typed here, so that the package needs neither library's types.
 */
export interface IoRedisClient {
  /** `'ready'` while connected. */
  readonly status: string;
  publish(channel: string, message: string): Promise<unknown>;
  subscribe(...channels: string[]): Promise<unknown>;
  on(event: string, listener: (...args: unknown[]) => void): unknown;
}

/** A node-redis client (`createClient({ url })` of `redis` 4.6 or later), connected by the caller. */
export interface NodeRedisClient {
  /** `true` while connected. */
  readonly isReady: boolean;
  publish(channel: string, message: string): Promise<unknown>;
  subscribe(channel: string, listener: (message: string, channel: string) => unknown): Promise<unknown>;
  on(event: string, listener: (...args: unknown[]) => void): unknown;
}

/**
 * An ioredis `Cluster` (`new Cluster(seeds)`, ioredis 5.3 or later), as far as the bus relies on its
 * shape. The bus publishes with SPUBLISH through it and opens its own subscriber connections to the
 * masters with the cluster's per-node settings (`redisOptions`: credentials, TLS).
 */
export interface IoRedisClusterClient {
  /** Always `true`: what tells a `Cluster` from a `Redis`. */
  readonly isCluster: true;
  /** `'ready'` while connected. */
  readonly status: string;
  spublish(channel: string, message: string): Promise<unknown>;
  on(event: string, listener: (...args: unknown[]) => void): unknown;
}

/**
 * A node-redis cluster client (`createCluster({ rootNodes })` of `redis` 4.6 or later), connected by the
 * caller. The bus publishes with `sPublish` through it and opens its own subscriber connections to the
 * masters with the cluster's `defaults` (credentials, TLS).
 */
export interface NodeRedisClusterClient {
  /** `true` while connected. */
  readonly isReady: boolean;
  /** The cluster's masters, as the client knows them. */
  readonly masters: readonly unknown[];
  sPublish(channel: string, message: string): Promise<unknown>;
  sSubscribe(...args: never[]): unknown;
  on(event: string, listener: (...args: unknown[]) => void): unknown;
}

/** A Redis Cluster client the caller owns: an ioredis `Cluster` or a node-redis cluster client. */
export type RedisClusterClient = IoRedisClusterClient | NodeRedisClusterClient;

/** A connection the caller owns to one Redis server: an ioredis client or a node-redis client (told apart by shape). */
export type RedisClient = IoRedisClient | NodeRedisClient;

/** How events travel between nodes: see {@link RedisBusCommonOptions.routing}. */
export type RedisBusRouting = 'interest' | 'broadcast' | { readonly buckets: number };

/** The routing after validation. */
export type ResolvedRouting =
  | { readonly mode: 'interest' }
  | { readonly mode: 'broadcast' }
  | { readonly mode: 'buckets'; readonly buckets: number };

/** The most buckets `routing: { buckets }` takes. */
export const MAX_BUCKETS = 65536;

/** The client library a bus built from a `url` loads. */
export type RedisClientLibrary = 'ioredis' | 'redis';

/** Options every form takes. */
export interface RedisBusCommonOptions {
  /**
   * Starts the name of the one channel the bus uses, `${channelPrefix}:bus`. Apps (or tenants, or test
   * runs) that share one Redis and must not see each other's events use different prefixes. A prefix
   * is not an access control: see docs/redis.md on ACLs. A non-empty string.
   * @default 'mcp-subscriptions'
   */
  readonly channelPrefix?: string;
  /**
   * This node's identity on the bus: each message carries it, and a node ignores its own. It must be
   * unique among the buses that share a channel (two buses with one id would not hear each other). A
   * non-empty string of at most 200 characters.
   * @default a random UUID
   */
  readonly nodeId?: string;
  /**
   * How events travel between nodes (see docs/redis.md and docs/scaling.md):
   * - `'interest'`: a channel per followed key (a resource URI, a task id, a list kind, a principal's
   *   cancellations), subscribed by a node while one of its streams follows that key: a node receives
   *   only what its own streams follow.
   * - `{ buckets: n }`: resource updates, task statuses and cancellations spread over `n` channels by a
   *   hash of their key (lists keep a channel each): at most `n + 3` subscriptions per node, at the
   *   price of receiving the other keys of each bucket it follows.
   * - `'broadcast'`: one channel that every node hears, as the first release did: cheapest when every
   *   node follows most keys anyway (a handful of nodes).
   * Every node sharing a `channelPrefix` must use the same routing; a node that sees another routing
   * on its prefix reports it (`logger.error`, once).
   * @default 'interest'
   */
  readonly routing?: RedisBusRouting;
  /**
   * Whether nothing goes unnoticed (docs/redis.md, "Nothing unnoticed"): after a gap (an outage, a
   * failover, a slot move, a SUBSCRIBE not answered in time) this node's streams are told once per key
   * they follow that it may have changed, and the changes this node could not publish are published
   * once Redis is back. `false`: pure at-most-once, as the first release was: what is missed is missed.
   * @default true
   */
  readonly resync?: boolean;
  /**
   * Where an outage (once per outage), a message refused on receipt (the first one) and similar runtime
   * failures are reported.
   * @default console, prefixed `[mcp-subscriptions]`
   */
  readonly logger?: Logger;
}

/**
 * The caller's own connections: the bus uses them and never closes them. On one Redis server the
 * subscriber is dedicated: once subscribed it cannot publish (`publisher.duplicate()` makes one). On a
 * Redis Cluster both are cluster clients of one library, and may be the same object: the bus publishes
 * through it and subscribes on connections of its own to the masters (see docs/redis.md).
 */
export interface RedisBusClientOptions extends RedisBusCommonOptions {
  /** The connection the bus publishes on (it may be your app's general-purpose client). Required. */
  readonly publisher: RedisClient | RedisClusterClient;
  /** A connection the bus subscribes with; not the publisher, unless both are one cluster client. Required. */
  readonly subscriber: RedisClient | RedisClusterClient;
  readonly url?: never;
  readonly cluster?: never;
  readonly client?: never;
}

/**
 * A URL: the bus creates, configures and owns its two connections, and quits them in `close()`. The
 * library is loaded with a dynamic `import()`, so the constructor cannot know whether it is installed:
 * a missing one is reported through `logger.error` (an `OptionsError` with code
 * `ERR_MCP_SUBSCRIPTIONS_REDIS_CLIENT_MISSING`) right after construction, and the bus stays
 * disconnected.
 */
export interface RedisBusUrlOptions extends RedisBusCommonOptions {
  /** `redis://[[user]:password@]host[:port][/db]` or `rediss://…` (TLS). Required in this form. */
  readonly url: string;
  /**
   * Which library to connect with.
   * @default `'ioredis'` when it is installed, else `'redis'`
   */
  readonly client?: RedisClientLibrary;
  readonly cluster?: never;
  readonly publisher?: never;
  readonly subscriber?: never;
}

/**
 * Seed nodes of a Redis Cluster (Redis 7 or later): the bus creates and owns a cluster client of the
 * library it loads (as the url form does), publishes with SPUBLISH and subscribes on connections of its
 * own to the masters, and closes all of them in `close()`.
 */
export interface RedisBusClusterOptions extends RedisBusCommonOptions {
  /**
   * Some nodes of the cluster, from which the client learns the rest: `host:port`, or
   * `redis://[[user]:password@]host:port` (`rediss://` for TLS, on every seed or none). 1 to 100 of them.
   * Required in this form.
   * @example ['10.0.0.1:7000', '10.0.0.2:7000']
   */
  readonly cluster: readonly string[];
  /**
   * Which library to connect with.
   * @default `'ioredis'` when it is installed, else `'redis'`
   */
  readonly client?: RedisClientLibrary;
  readonly url?: never;
  readonly publisher?: never;
  readonly subscriber?: never;
}

/**
 * Options of `new RedisBus(options)`: the caller's connections, a URL, or a cluster's seed nodes.
 * Unknown keys are refused.
 */
export type RedisBusOptions = RedisBusClientOptions | RedisBusUrlOptions | RedisBusClusterOptions;

/** Every key of either form, checked against the interfaces by the compiler. */
export const REDIS_BUS_OPTION_KEYS = optionKeys<{
  [K in keyof RedisBusClientOptions | keyof RedisBusUrlOptions | keyof RedisBusClusterOptions]: unknown;
}>({
  publisher: true,
  subscriber: true,
  url: true,
  cluster: true,
  client: true,
  channelPrefix: true,
  nodeId: true,
  routing: true,
  resync: true,
  logger: true,
});

/** Which library a caller's connection comes from, and whether it is a cluster client. */
export type ClientShape =
  | { readonly library: 'ioredis'; readonly cluster: false; readonly client: IoRedisClient }
  | { readonly library: 'redis'; readonly cluster: false; readonly client: NodeRedisClient }
  | { readonly library: RedisClientLibrary; readonly cluster: true; readonly client: RedisClusterClient };

/** One seed node of the cluster form, parsed. */
export interface ClusterSeed {
  readonly host: string;
  readonly port: number;
  readonly username: string | undefined;
  readonly password: string | undefined;
  /** `rediss://`: TLS (the same for every seed). */
  readonly tls: boolean;
}

/** The options after defaults and validation. */
export interface ResolvedRedisBusOptions {
  readonly connections:
    | { readonly form: 'clients'; readonly publisher: ClientShape; readonly subscriber: ClientShape }
    | { readonly form: 'url'; readonly url: string; readonly client: RedisClientLibrary | undefined }
    | {
        readonly form: 'cluster';
        readonly seeds: readonly ClusterSeed[];
        readonly client: RedisClientLibrary | undefined;
      };
  readonly channelPrefix: string;
  readonly nodeId: string;
  readonly routing: ResolvedRouting;
  readonly resync: boolean;
  readonly logger: Logger;
}

/** The longest `nodeId`: it travels in every message. */
export { MAX_NODE_ID_LENGTH };

const WHERE = 'new RedisBus()';

type Loose = Record<string, unknown>;

const isFunction = (value: unknown): boolean => typeof value === 'function';

/**
 * Tells an ioredis client from a node-redis one by what each alone has: ioredis a `status` string,
 * node-redis (v4 and later) an `isReady` boolean; and a cluster client from a single-server one:
 * ioredis's `Cluster` says `isCluster`, node-redis's cluster client has `masters` and `sSubscribe`.
 */
function clientShape(name: 'publisher' | 'subscriber', value: unknown): ClientShape {
  const client = value as Loose | null;
  if (typeof client !== 'object' || client === null) {
    throw new OptionsError(
      value === undefined ? ErrorCode.MissingOption : ErrorCode.InvalidRedisClient,
      `Expected \`${name}\` to be an ioredis or node-redis client, got ${describeValue(value)}`,
    );
  }
  if (client.isCluster === true) {
    if (isFunction(client.spublish) && isFunction(client.on) && typeof client.status === 'string')
      return { library: 'ioredis', cluster: true, client: value as IoRedisClusterClient };
    throw new OptionsError(
      ErrorCode.InvalidRedisClient,
      `Expected \`${name}\` to be an ioredis \`Cluster\` with sharded pub/sub (\`spublish\`: ioredis 5.3 or later), got ${describeValue(value)}`,
    );
  }
  if (Array.isArray(client.masters)) {
    if (isFunction(client.sPublish) && isFunction(client.sSubscribe) && typeof client.isReady === 'boolean')
      return { library: 'redis', cluster: true, client: value as NodeRedisClusterClient };
    throw new OptionsError(
      ErrorCode.InvalidRedisClient,
      `Expected \`${name}\` to be a node-redis cluster client with sharded pub/sub (\`sPublish\`, \`sSubscribe\`: redis 4.6 or later), got ${describeValue(value)}`,
    );
  }
  const pubSub = isFunction(client.publish) && isFunction(client.subscribe) && isFunction(client.on);
  if (pubSub && typeof client.status === 'string')
    return { library: 'ioredis', cluster: false, client: value as IoRedisClient };
  if (pubSub && typeof client.isReady === 'boolean')
    return { library: 'redis', cluster: false, client: value as NodeRedisClient };
  throw new OptionsError(
    ErrorCode.InvalidRedisClient,
    `Expected \`${name}\` to be an ioredis client (\`new Redis(url)\`) or a node-redis v4+ client (\`createClient({ url })\`), got ${describeValue(value)}`,
  );
}

function redisUrl(value: unknown): string {
  let protocol: string | undefined;
  if (typeof value === 'string') {
    try {
      protocol = new URL(value).protocol;
    } catch {
      protocol = undefined;
    }
  }
  if (protocol !== 'redis:' && protocol !== 'rediss:') {
    throw new OptionsError(
      ErrorCode.InvalidRedisUrl,
      // The URL is not quoted: it may carry a password.
      `Expected \`url\` to be a redis:// or rediss:// URL, got ${typeof value === 'string' ? 'another string' : describeValue(value)}`,
    );
  }
  return value as string;
}

/** The most seed nodes `cluster` takes: a few are enough, the client learns the rest from them. */
export const MAX_CLUSTER_SEEDS = 100;

const HOST_PORT = /^(\[[0-9a-fA-F:.]+\]|[^\s:/@[\]]+):(\d{1,5})$/;

function clusterSeedError(detail: string): OptionsError {
  return new OptionsError(
    ErrorCode.InvalidClusterNodes,
    `Expected \`cluster\` to be a non-empty array of at most ${MAX_CLUSTER_SEEDS} seed nodes, \`host:port\` or \`redis://host:port\` strings, ${detail}`,
  );
}

/** One seed: `host:port`, or a `redis://` / `rediss://` URL with a host and a port. */
function clusterSeed(value: unknown, index: number): ClusterSeed {
  // Never quote a URL: it may carry a password.
  const shown = typeof value === 'string' && !value.includes('@') ? `\`${value}\`` : describeValue(value);
  const refuse = (): OptionsError =>
    clusterSeedError(
      `got ${typeof value === 'string' && value.includes('@') ? 'another string' : shown} at index ${index}`,
    );
  if (typeof value !== 'string') throw refuse();
  const bare = HOST_PORT.exec(value);
  if (bare !== null) {
    const port = Number(bare[2]);
    if (port < 1 || port > 65535) throw refuse();
    return {
      host: (bare[1] as string).replace(/^\[|\]$/g, ''),
      port,
      username: undefined,
      password: undefined,
      tls: false,
    };
  }
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw refuse();
  }
  if ((url.protocol !== 'redis:' && url.protocol !== 'rediss:') || url.hostname === '' || url.port === '')
    throw refuse();
  if ((url.pathname !== '' && url.pathname !== '/') || url.search !== '' || url.hash !== '') throw refuse();
  return {
    host: url.hostname.replace(/^\[|\]$/g, ''),
    port: Number(url.port),
    username: url.username === '' ? undefined : decodeURIComponent(url.username),
    password: url.password === '' ? undefined : decodeURIComponent(url.password),
    tls: url.protocol === 'rediss:',
  };
}

/** Validates the `cluster` option's seed nodes. */
export function clusterSeeds(value: unknown): readonly ClusterSeed[] {
  if (!Array.isArray(value) || value.length === 0 || value.length > MAX_CLUSTER_SEEDS) {
    throw clusterSeedError(`got ${Array.isArray(value) ? `an array of ${value.length}` : describeValue(value)}`);
  }
  const seeds = (value as unknown[]).map(clusterSeed);
  if (seeds.some((seed) => seed.tls !== seeds[0]?.tls)) {
    throw clusterSeedError(
      'got some `rediss://` (TLS) seeds and some not: a cluster is reached with TLS or without, on every node',
    );
  }
  return Object.freeze(seeds.map((seed) => Object.freeze(seed)));
}

function routingOption(value: unknown): ResolvedRouting {
  if (value === undefined || value === 'interest') return { mode: 'interest' };
  if (value === 'broadcast') return { mode: 'broadcast' };
  if (typeof value === 'object' && value !== null && !Array.isArray(value)) {
    const keys = Object.keys(value);
    const buckets = (value as Loose).buckets;
    if (keys.length === 1 && keys[0] === 'buckets') {
      if (Number.isInteger(buckets) && (buckets as number) >= 1 && (buckets as number) <= MAX_BUCKETS) {
        return { mode: 'buckets', buckets: buckets as number };
      }
      throw new OptionsError(
        ErrorCode.InvalidRouting,
        `Expected \`routing.buckets\` to be an integer from 1 to ${MAX_BUCKETS}, got ${describeValue(buckets)}`,
      );
    }
  }
  throw new OptionsError(
    ErrorCode.InvalidRouting,
    `Expected \`routing\` to be 'interest', 'broadcast' or { buckets: n }, got ${describeValue(value)}`,
  );
}

/**
 * Applies defaults to the bus's options and validates them; never mutates its input. Unknown keys are
 * refused, with the nearest known one suggested.
 */
export function resolveRedisBusOptions(options: RedisBusOptions): ResolvedRedisBusOptions {
  optionsObject(options);
  knownKeys(options, REDIS_BUS_OPTION_KEYS, WHERE);
  const loose = options as unknown as Loose;

  let connections: ResolvedRedisBusOptions['connections'];
  if (loose.cluster !== undefined) {
    if (loose.url !== undefined || loose.publisher !== undefined || loose.subscriber !== undefined) {
      throw new OptionsError(
        ErrorCode.ConflictingOptions,
        `Expected either \`cluster\` (seed nodes: the bus owns its cluster client) or ${loose.url !== undefined ? '`url`' : '`publisher` and `subscriber` (yours)'}, not both`,
      );
    }
    const client =
      loose.client === undefined ? undefined : oneOf<RedisClientLibrary>('client', loose.client, ['ioredis', 'redis']);
    connections = { form: 'cluster', seeds: clusterSeeds(loose.cluster), client };
  } else if (loose.url !== undefined) {
    if (loose.publisher !== undefined || loose.subscriber !== undefined) {
      throw new OptionsError(
        ErrorCode.ConflictingOptions,
        'Expected either `url` (the bus owns its connections) or `publisher` and `subscriber` (yours), not both',
      );
    }
    const client =
      loose.client === undefined ? undefined : oneOf<RedisClientLibrary>('client', loose.client, ['ioredis', 'redis']);
    connections = { form: 'url', url: redisUrl(loose.url), client };
  } else {
    if (loose.client !== undefined) {
      throw new OptionsError(
        ErrorCode.ConflictingOptions,
        '`client` picks the library of the connections the bus creates from `url` or `cluster`; with `publisher` and `subscriber`, leave it out',
      );
    }
    if (loose.publisher === undefined && loose.subscriber === undefined) {
      throw new OptionsError(
        ErrorCode.MissingOption,
        'Expected `publisher` and `subscriber` (your ioredis or node-redis connections), or `url`',
      );
    }
    const publisher = clientShape('publisher', loose.publisher);
    const subscriber = clientShape('subscriber', loose.subscriber);
    if (publisher.cluster !== subscriber.cluster) {
      throw new OptionsError(
        ErrorCode.InvalidRedisClient,
        `Expected \`publisher\` and \`subscriber\` to be both cluster clients or both clients of one Redis server, got ${publisher.cluster ? 'a cluster publisher and a single-server subscriber' : 'a single-server publisher and a cluster subscriber'}`,
      );
    }
    if (publisher.cluster && publisher.library !== subscriber.library) {
      throw new OptionsError(
        ErrorCode.InvalidRedisClient,
        `Expected \`publisher\` and \`subscriber\` to be cluster clients of one library, got ${publisher.library} and ${subscriber.library}: pass one cluster client as both`,
      );
    }
    // A cluster client publishes through its node connections and the bus subscribes on connections
    // of its own: one cluster client serves as both.
    if (!publisher.cluster && publisher.client === subscriber.client) {
      throw new OptionsError(
        ErrorCode.SameRedisConnection,
        'Expected `subscriber` to be a connection of its own, not the `publisher`: a subscribed connection cannot publish (use `publisher.duplicate()`)',
      );
    }
    connections = { form: 'clients', publisher, subscriber };
  }

  const channelPrefix = given<unknown>(loose.channelPrefix, 'mcp-subscriptions');
  if (typeof channelPrefix !== 'string' || channelPrefix === '') {
    throw new OptionsError(
      ErrorCode.InvalidChannelPrefix,
      `Expected \`channelPrefix\` to be a non-empty string, got ${describeValue(channelPrefix)}`,
    );
  }
  const nodeId = loose.nodeId === undefined ? randomUUID() : loose.nodeId;
  if (typeof nodeId !== 'string' || nodeId === '' || nodeId.length > MAX_NODE_ID_LENGTH) {
    throw new OptionsError(
      ErrorCode.InvalidNodeId,
      `Expected \`nodeId\` to be a non-empty string of at most ${MAX_NODE_ID_LENGTH} characters, got ${describeValue(nodeId)}`,
    );
  }
  const routing = routingOption(loose.routing);
  const resync = booleanOption('resync', given<unknown>(loose.resync, true));
  const logger = loggerOption('logger', given<unknown>(loose.logger, consoleLogger));
  return Object.freeze({ connections, channelPrefix, nodeId, routing, resync, logger });
}
