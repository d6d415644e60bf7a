/**
 * The sample apps' configuration, read from the environment once at startup (see the contract's
 * "Starting" table). Framework-free: the Express and the Nest sample both start from {@link loadConfig}.
 */

/** What a sample app is configured with. */
export interface SampleConfig {
  /** TCP port; `0` picks a free one. @default 3000 */
  readonly port: number;
  /** Bind address. @default '127.0.0.1' */
  readonly host: string;
  /** SSE keepalive comment interval on listen streams, or `false` for none (`KEEPALIVE_MS=0`). @default 15000 */
  readonly keepAliveMs: number | false;
  /** Open listen streams per process; the next one is refused with HTTP 503. @default 1024 */
  readonly maxSubscriptions: number;
  /**
   * Open listen streams per principal; the next one of that principal is refused with HTTP 503 and
   * `Retry-After` while others still open theirs. `undefined` takes the library's default.
   * @default undefined (the library's default)
   */
  readonly maxSubscriptionsPerPrincipal: number | undefined;
  /**
   * How long a listen stream whose client accepts no byte may stay open, in milliseconds, or `false` to
   * keep it (`STALL_TIMEOUT_MS=0`). `undefined` takes the library's default.
   * @default undefined (the library's default)
   */
  readonly stallTimeoutMs: number | false | undefined;
  /**
   * `MAX_BUFFER` as set, passed to the hub as `maxBuffer`, which the library removed (a stream's queue
   * holds one entry per key it follows): a set value stops the app at start with the library's
   * message. `undefined` when unset: nothing is passed.
   * @default undefined
   */
  readonly maxBuffer: string | undefined;
  /**
   * When set (`redis://` or `rediss://`), the hub is bridged over Redis (`RedisBus`), so that every
   * instance sharing that Redis delivers every event and every cancellation. @default unset
   */
  readonly redisUrl: string | undefined;
  /**
   * When set, the seed nodes of a Redis Cluster (`REDIS_CLUSTER=127.0.0.1:7000,127.0.0.1:7001`, each
   * `host:port` or a `redis://`/`rediss://` URL): the hub is bridged over that cluster instead, with
   * sharded pub/sub. Exclusive with {@link redisUrl}. @default unset
   */
  readonly redisCluster: readonly string[] | undefined;
  /**
   * When set (`postgres://` or `postgresql://`), the hub is bridged over PostgreSQL's LISTEN/NOTIFY
   * (`PostgresBus`), so that every instance sharing that database delivers every event and every
   * cancellation. Exclusive with {@link redisUrl} and {@link redisCluster}. @default unset
   */
  readonly databaseUrl: string | undefined;
  /**
   * Register the MCP conformance suite's fixture tools and serve `/mcp` requests that carry no
   * `Authorization` header as the principal `conformance`. @default false
   */
  readonly conformance: boolean;
  /**
   * When set, the port of `host` on which the app also serves its metrics to a Prometheus scraper
   * (`GET /metrics`, text exposition format, no auth): the library's OpenTelemetry instruments, through a
   * `MeterProvider` registered before the hub is built (shared/metrics.ts). `undefined`: no metrics are
   * served, and the OpenTelemetry SDK is not even loaded. @default unset
   */
  readonly metricsPort: number | undefined;
  /**
   * `MAX_STREAM_DURATION_MS`: the hub's `maxStreamDurationMs`, a listen stream's longest life (ended
   * gracefully after 0.75 to 1 times it, so that its client listens again). `undefined`: no limit.
   * @default undefined (no limit)
   */
  readonly maxStreamDurationMs: number | undefined;
  /**
   * `DRAIN_MS`: on SIGTERM or SIGINT, the open listen streams are ended spread over this many
   * milliseconds (`hub.drain({ overMs })`, new listens refused meanwhile with 503 and `Retry-After`)
   * before the app closes; `0` ends them all at once. @default 0
   */
  readonly drainMs: number;
}

/** The configuration with every variable unset. */
export const DEFAULT_CONFIG: SampleConfig = Object.freeze({
  port: 3000,
  host: '127.0.0.1',
  keepAliveMs: 15_000,
  maxSubscriptions: 1024,
  maxSubscriptionsPerPrincipal: undefined,
  stallTimeoutMs: undefined,
  maxBuffer: undefined,
  redisUrl: undefined,
  redisCluster: undefined,
  databaseUrl: undefined,
  conformance: false,
  metricsPort: undefined,
  maxStreamDurationMs: undefined,
  drainMs: 0,
});

/** An environment variable with a value the app cannot start with. Its message is one line. */
export class ConfigError extends Error {
  /** The offending variable, e.g. `PORT`. */
  readonly variable: string;

  constructor(variable: string, message: string) {
    super(`${variable}: ${message}`);
    this.name = 'ConfigError';
    this.variable = variable;
  }
}

type Env = Readonly<Record<string, string | undefined>>;

/** A variable's value, with an empty or blank value read as unset (`PORT= npm start`). */
function read(env: Env, name: string): string | undefined {
  const value = env[name];
  return value === undefined || value.trim() === '' ? undefined : value.trim();
}

// Quoted with JSON.stringify so that a value with control characters still prints on one line.
function shown(value: string): string {
  return JSON.stringify(value.length > 80 ? `${value.slice(0, 80)}…` : value);
}

function integer<F extends number | undefined>(
  env: Env,
  name: string,
  fallback: F,
  min: number,
  max: number,
): number | F {
  const raw = read(env, name);
  if (raw === undefined) return fallback;
  // Digits only: Number() would accept '1e3', '0x10' and ' ' and parseInt() would accept '80abc'.
  const value = /^\d+$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new ConfigError(name, `expected an integer from ${min} to ${max}, got ${shown(raw)}`);
  }
  return value;
}

/**
 * A variable whose value must be one of `allowed` (exactly, case included), or `fallback` when unset.
 * Throws a {@link ConfigError} naming the variable and the values it takes otherwise.
 */
export function oneOfVariable<const T extends string>(env: Env, name: string, allowed: readonly T[], fallback: T): T {
  const raw = read(env, name);
  if (raw === undefined) return fallback;
  if ((allowed as readonly string[]).includes(raw)) return raw as T;
  throw new ConfigError(name, `expected ${allowed.join(' or ')}, got ${shown(raw)}`);
}

/** A Redis URL the bus can connect to; its credentials are never echoed in an error. */
function redisUrl(env: Env): string | undefined {
  const raw = read(env, 'REDIS_URL');
  if (raw === undefined) return undefined;
  let url: URL | undefined;
  try {
    url = new URL(raw);
  } catch {
    url = undefined;
  }
  if (url === undefined || (url.protocol !== 'redis:' && url.protocol !== 'rediss:') || url.hostname === '') {
    throw new ConfigError('REDIS_URL', 'expected a URL like redis://127.0.0.1:6379 (redis: or rediss:)');
  }
  return raw;
}

/**
 * A PostgreSQL URL the bus can connect to (`postgres://` or `postgresql://`, as `pg` and libpq take
 * them); its credentials are never echoed in an error. A URL without a host is refused as well: `pg`
 * would fall back to a Unix socket, which no instance on another machine shares.
 */
function databaseUrl(env: Env): string | undefined {
  const raw = read(env, 'DATABASE_URL');
  if (raw === undefined) return undefined;
  let url: URL | undefined;
  try {
    url = new URL(raw);
  } catch {
    url = undefined;
  }
  if (url === undefined || (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') || url.hostname === '') {
    throw new ConfigError(
      'DATABASE_URL',
      'expected a URL like postgres://127.0.0.1:5432/test (postgres: or postgresql:, with a host)',
    );
  }
  return raw;
}

/** One seed node of `REDIS_CLUSTER`: `host:port`, or a Redis URL with a host (credentials never echoed). */
function clusterSeed(seed: string): boolean {
  if (/^rediss?:\/\//i.test(seed)) {
    try {
      return new URL(seed).hostname !== '';
    } catch {
      return false;
    }
  }
  const match = /^(\[[0-9a-fA-F:.]+\]|[^\s:/[\]]+):(\d{1,5})$/.exec(seed);
  return match !== null && Number(match[2]) >= 1 && Number(match[2]) <= 65_535;
}

/** The seed nodes of a Redis Cluster, comma-separated. */
function redisCluster(env: Env): string[] | undefined {
  const raw = read(env, 'REDIS_CLUSTER');
  if (raw === undefined) return undefined;
  const seeds = raw.split(',').map((seed) => seed.trim());
  if (seeds.some((seed) => seed === '' || !clusterSeed(seed))) {
    throw new ConfigError(
      'REDIS_CLUSTER',
      'expected comma-separated seed nodes like 127.0.0.1:7000,127.0.0.1:7001 (host:port or redis:// URLs)',
    );
  }
  return seeds;
}

/**
 * Reads and validates the configuration from `env`. Throws a {@link ConfigError} naming the variable
 * for a value it cannot use.
 *
 * @example
 * ```ts
 * const config = loadConfig(process.env); // { port: 3000, host: '127.0.0.1', ... }
 * ```
 */
export function loadConfig(env: Env = process.env): SampleConfig {
  const host = read(env, 'HOST') ?? DEFAULT_CONFIG.host;
  if (/[\s/]/.test(host)) {
    throw new ConfigError('HOST', `expected a host name or IP address, got ${shown(host)}`);
  }
  const keepAliveMs = integer(env, 'KEEPALIVE_MS', 15_000, 0, 2_147_483_647);
  const stallTimeoutMs = integer(env, 'STALL_TIMEOUT_MS', undefined, 0, 2_147_483_647);
  const conformance = read(env, 'MCP_CONFORMANCE');
  const url = redisUrl(env);
  const cluster = redisCluster(env);
  if (url !== undefined && cluster !== undefined) {
    throw new ConfigError(
      'REDIS_URL',
      'cannot be set together with REDIS_CLUSTER: set REDIS_URL for one Redis server, or REDIS_CLUSTER for a Redis Cluster',
    );
  }
  const database = databaseUrl(env);
  if (database !== undefined && (url !== undefined || cluster !== undefined)) {
    const redis = url !== undefined ? 'REDIS_URL' : 'REDIS_CLUSTER';
    throw new ConfigError(
      'DATABASE_URL',
      `cannot be set together with ${redis}: the hub has one bus; set DATABASE_URL for PostgreSQL, or ${redis} for Redis`,
    );
  }
  if (conformance !== undefined && conformance !== '1' && conformance !== '0') {
    throw new ConfigError('MCP_CONFORMANCE', `expected 1 (on) or 0 (off), got ${shown(conformance)}`);
  }
  const port = integer(env, 'PORT', DEFAULT_CONFIG.port, 0, 65_535);
  const metricsPort = metricsPortOf(env, port);
  return Object.freeze({
    port,
    host,
    keepAliveMs: keepAliveMs === 0 ? false : keepAliveMs,
    maxSubscriptions: integer(env, 'MAX_SUBSCRIPTIONS', DEFAULT_CONFIG.maxSubscriptions, 1, 1_000_000),
    maxSubscriptionsPerPrincipal: integer(env, 'MAX_SUBSCRIPTIONS_PER_PRINCIPAL', undefined, 1, 1_000_000),
    stallTimeoutMs: stallTimeoutMs === 0 ? false : stallTimeoutMs,
    maxBuffer: read(env, 'MAX_BUFFER'),
    redisUrl: url,
    redisCluster: cluster === undefined ? undefined : Object.freeze(cluster),
    databaseUrl: database,
    conformance: conformance === '1',
    metricsPort,
    maxStreamDurationMs: integer(env, 'MAX_STREAM_DURATION_MS', undefined, 1, 2_147_483_647),
    drainMs: integer(env, 'DRAIN_MS', DEFAULT_CONFIG.drainMs, 0, 2_147_483_647),
  });
}

/**
 * `METRICS_PORT`: a port of its own, which a scraper is told of. Not `0`, unlike `PORT`: a port picked at
 * random could not be scraped, since the app prints only its MCP URL. Not `PORT` either: the two servers
 * would collide, and that is better said now than as an `EADDRINUSE` after the app has started.
 */
function metricsPortOf(env: Env, port: number): number | undefined {
  const metricsPort = integer(env, 'METRICS_PORT', undefined, 1, 65_535);
  if (metricsPort !== undefined && metricsPort === port) {
    throw new ConfigError(
      'METRICS_PORT',
      `must differ from PORT (both ${port}): the metrics have a server of their own`,
    );
  }
  return metricsPort;
}
