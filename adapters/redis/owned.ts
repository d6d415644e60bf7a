/**
 * The url form: loads a client library with a dynamic `import()` (neither is a dependency of this
 * package) and creates the bus's two connections, configured for a bus that must never buffer without
 * bound nor deliver twice:
 *
 * - no offline queue: while disconnected a command fails at once instead of waiting in memory;
 * - ioredis: no retry of commands in flight when the connection drops (`maxRetriesPerRequest: 0`,
 *   `autoResendUnfulfilledCommands: false`): a PUBLISH whose reply was lost may have been delivered, and
 *   sending it again could deliver it twice;
 * - ioredis: no auto-pipelining on the publisher: it holds a burst's PUBLISHes until the burst's tick is
 *   over (`setImmediate`), and a second batch until Redis answered the first, so the first event of 100
 *   published back to back reached another node's streams 2–3 ms later than the node's own. Instead the
 *   bus corks the publisher's socket for the rest of the tick on a publish (connection.ts): a burst still
 *   goes out in one write, at the end of its tick (docs/performance.md);
 * - a connection name, `<prefix>:<node>:pub` / `:sub`, for `CLIENT LIST`.
 *
 * The cluster form creates one cluster client (ioredis `Cluster`, node-redis `createCluster()`) from the
 * seed nodes, configured the same way (ioredis: no failover retry either, `retryDelayOnFailover: 0`),
 * which serves as publisher and subscriber: the subscriber's
 * connections to the masters are opened by `ClusterConnection` with the cluster's settings.
 */
import { ErrorCode, OptionsError } from '../../lib/internal.ts';
import { ClusterConnection } from './cluster-connection.ts';
import { wrap, type Connection } from './connection.ts';
import type { ClusterSeed, IoRedisClient, NodeRedisClient, RedisClientLibrary } from './options.ts';

/** The bus's own connections, not yet connecting: `start()` connects them once the bus listens to them. */
export interface OwnedConnections {
  readonly publisher: Connection;
  readonly subscriber: Connection;
  start(): void;
}

type IoRedisConstructor = new (
  url: string,
  options: Record<string, unknown>,
) => IoRedisClient & {
  connect(): Promise<unknown>;
};
type CreateClient = (options: Record<string, unknown>) => NodeRedisClient & { connect(): Promise<unknown> };

function isMissingModule(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND';
}

/** The module's export named `name`, or its default export's, or the default export itself (CommonJS interop). */
function exported(module: unknown, name: string): unknown {
  const namespace = module as Record<string, unknown>;
  const fallback = namespace.default as Record<string, unknown> | ((...args: never[]) => unknown) | undefined;
  const candidates = [namespace[name], (fallback as Record<string, unknown> | undefined)?.[name], fallback];
  return candidates.find((candidate) => typeof candidate === 'function');
}

/** A connection name Redis accepts (`CLIENT SETNAME` refuses spaces and control characters). */
function connectionName(prefix: string, nodeId: string, role: 'pub' | 'sub'): string {
  return `${prefix}:${nodeId}:${role}`.replace(/[^\x21-\x7e]/g, '_');
}

/** The loaded `library` module's export `name` (see {@link exported}), or a TypeError saying it has none. */
function required<T>(module: unknown, library: RedisClientLibrary, name: string): T {
  const found = exported(module, name);
  if (found === undefined) throw new TypeError(`the ${library} module exports no ${name}`);
  return found as T;
}

async function loadIoRedis(): Promise<IoRedisConstructor> {
  return required(await import('ioredis'), 'ioredis', 'Redis');
}

async function loadNodeRedis(): Promise<CreateClient> {
  return required(await import('redis'), 'redis', 'createClient');
}

function missing(library: RedisClientLibrary | undefined, cause: unknown): OptionsError {
  const error = new OptionsError(
    ErrorCode.RedisClientMissing,
    library === undefined
      ? 'RedisBus({ url }) needs a Redis client library, and neither `ioredis` nor `redis` is installed: `npm install ioredis` (or `redis`)'
      : `RedisBus({ url, client: '${library}' }) needs \`${library}\`, which is not installed: \`npm install ${library}\``,
  );
  (error as { cause?: unknown }).cause = cause;
  return error;
}

/**
 * Loads `library`, or the first installed of ioredis and redis, with `load` (which picks what the form
 * needs from the module). Rejects with an `OptionsError` (`ERR_MCP_SUBSCRIPTIONS_REDIS_CLIENT_MISSING`)
 * when it is not installed, and with the loader's error when it is installed but fails to load.
 */
async function loadLibrary<I, N>(
  library: RedisClientLibrary | undefined,
  loadIo: () => Promise<I>,
  loadNode: () => Promise<N>,
): Promise<{ library: 'ioredis'; io: I } | { library: 'redis'; node: N }> {
  try {
    if (library !== 'redis') return { library: 'ioredis', io: await loadIo() };
    return { library: 'redis', node: await loadNode() };
  } catch (error) {
    if (!isMissingModule(error)) throw error;
    if (library !== undefined) throw missing(library, error);
    try {
      return { library: 'redis', node: await loadNode() };
    } catch (second) {
      throw isMissingModule(second) ? missing(undefined, second) : second;
    }
  }
}

/**
 * Loads `library` (or the first installed of ioredis and redis) and creates the two connections.
 * Rejects with an `OptionsError` (`ERR_MCP_SUBSCRIPTIONS_REDIS_CLIENT_MISSING`) when it is not
 * installed, and with the loader's error when it is installed but fails to load.
 */
export async function createOwnedConnections(
  url: string,
  library: RedisClientLibrary | undefined,
  prefix: string,
  nodeId: string,
): Promise<OwnedConnections> {
  const loaded = await loadLibrary(library, loadIoRedis, loadNodeRedis);
  const chosen = loaded.library;
  const Redis = loaded.library === 'ioredis' ? loaded.io : undefined;
  const createClient = loaded.library === 'redis' ? loaded.node : undefined;

  if (Redis !== undefined) {
    const IoRedis = Redis;
    const common = {
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      autoResendUnfulfilledCommands: false,
    };
    const publisher = new IoRedis(url, {
      ...common,
      enableAutoPipelining: false,
      connectionName: connectionName(prefix, nodeId, 'pub'),
    });
    const subscriber = new IoRedis(url, { ...common, connectionName: connectionName(prefix, nodeId, 'sub') });
    return {
      publisher: wrap('ioredis', publisher, true),
      subscriber: wrap('ioredis', subscriber, true),
      start: () => {
        // Failures arrive as 'error' events too, which the bus listens to.
        for (const client of [publisher, subscriber]) client.connect().catch(() => {});
      },
    };
  }
  const create = createClient as CreateClient;
  const publisher = create({ url, disableOfflineQueue: true, name: connectionName(prefix, nodeId, 'pub') });
  const subscriber = create({ url, disableOfflineQueue: true, name: connectionName(prefix, nodeId, 'sub') });
  return {
    publisher: wrap(chosen, publisher, true),
    subscriber: wrap(chosen, subscriber, true),
    start: () => {
      for (const client of [publisher, subscriber]) client.connect().catch(() => {});
    },
  };
}

type IoRedisClusterConstructor = new (
  nodes: { host: string; port: number }[],
  options: Record<string, unknown>,
) => { connect(): Promise<unknown> };
type CreateCluster = (options: Record<string, unknown>) => { connect(): Promise<unknown> };

async function loadIoRedisCluster(): Promise<IoRedisClusterConstructor> {
  return required(await import('ioredis'), 'ioredis', 'Cluster');
}

async function loadNodeRedisCluster(): Promise<CreateCluster> {
  return required(await import('redis'), 'redis', 'createCluster');
}

/**
 * The cluster form: loads `library` (or the first installed of ioredis and redis) and creates one
 * cluster client from the seed nodes, which the publisher and the subscriber share. Rejects as
 * {@link createOwnedConnections} does.
 */
export async function createOwnedCluster(
  seeds: readonly ClusterSeed[],
  library: RedisClientLibrary | undefined,
  prefix: string,
  nodeId: string,
): Promise<OwnedConnections> {
  const loaded = await loadLibrary(library, loadIoRedisCluster, loadNodeRedisCluster);
  const first = seeds[0] as ClusterSeed;
  const credentials = {
    ...(first.username === undefined ? {} : { username: first.username }),
    ...(first.password === undefined ? {} : { password: first.password }),
  };
  let client: { connect(): Promise<unknown> };
  if (loaded.library === 'ioredis') {
    client = new loaded.io(
      seeds.map(({ host, port }) => ({ host, port })),
      {
        lazyConnect: true,
        enableOfflineQueue: false,
        enableAutoPipelining: true,
        // No resend of a command whose connection closed before its reply (ioredis's failover retry): a
        // SPUBLISH the dying master had taken may have been delivered, and sending it again could
        // deliver it twice.
        retryDelayOnFailover: 0,
        redisOptions: {
          ...credentials,
          ...(first.tls ? { tls: {} } : {}),
          maxRetriesPerRequest: 0,
          autoResendUnfulfilledCommands: false,
          connectionName: connectionName(prefix, nodeId, 'pub'),
        },
      },
    );
  } else {
    client = loaded.node({
      rootNodes: seeds.map(({ host, port }) => ({ socket: { host, port } })),
      defaults: {
        ...credentials,
        ...(first.tls ? { socket: { tls: true } } : {}),
        disableOfflineQueue: true,
        name: connectionName(prefix, nodeId, 'pub'),
      },
    });
  }
  const publisher = ClusterConnection.wrap(client, true, 'publisher');
  const nodeRedis = loaded.library === 'redis';
  return {
    publisher,
    // Ending the publisher quits the shared cluster client; ending the subscriber closes its own
    // connections to the masters.
    subscriber: ClusterConnection.wrap(client, true, 'subscriber', connectionName(prefix, nodeId, 'sub')),
    start: () => {
      // ioredis retries a cluster it cannot reach by itself (clusterRetryStrategy); node-redis gives up
      // when no seed answers the first time, so it is asked again, backing off to 5 s, until it
      // connects or the bus closes. The failures reach the bus as 'error' events.
      let delay = 100;
      const connect = (): void => {
        client.connect().catch(() => {
          if (!nodeRedis || publisher.ended) return;
          setTimeout(connect, delay).unref();
          delay = Math.min(delay * 2, 5000);
        });
      };
      connect();
    },
  };
}
