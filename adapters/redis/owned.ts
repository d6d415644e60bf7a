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
 */
import { ErrorCode, OptionsError } from '../../lib/internal.ts';
import { wrap, type Connection } from './connection.ts';
import type { IoRedisClient, NodeRedisClient, RedisClientLibrary } from './options.ts';

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

async function loadIoRedis(): Promise<IoRedisConstructor> {
  const Redis = exported(await import('ioredis'), 'Redis');
  if (Redis === undefined) throw new TypeError('the ioredis module exports no Redis class');
  return Redis as IoRedisConstructor;
}

async function loadNodeRedis(): Promise<CreateClient> {
  const createClient = exported(await import('redis'), 'createClient');
  if (createClient === undefined) throw new TypeError('the redis module exports no createClient()');
  return createClient as CreateClient;
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
  let chosen: RedisClientLibrary = library ?? 'ioredis';
  let Redis: IoRedisConstructor | undefined;
  let createClient: CreateClient | undefined;
  try {
    if (chosen === 'ioredis') Redis = await loadIoRedis();
    else createClient = await loadNodeRedis();
  } catch (error) {
    if (!isMissingModule(error)) throw error;
    if (library !== undefined) throw missing(library, error);
    chosen = 'redis';
    try {
      createClient = await loadNodeRedis();
    } catch (second) {
      throw isMissingModule(second) ? missing(undefined, second) : second;
    }
  }

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
