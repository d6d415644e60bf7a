/**
 * The samples' bus: in memory (the hub's default) unless `REDIS_URL`, `REDIS_CLUSTER` or `DATABASE_URL`
 * is set, then a `RedisBus` on connections of its own (to one Redis server, or to the cluster the seed
 * nodes belong to), or a `PostgresBus` on a pool of its own (LISTEN/NOTIFY on that database), so that
 * every instance sharing that Redis or that database delivers every event and every
 * `notifications/cancelled`. Framework-free: every sample builds it here.
 */
import type { HubStats, SubscriptionBus, SubscriptionHubOptions } from 'mcp-subscriptions';
import { PostgresBus, type PostgresBusStats } from 'mcp-subscriptions/postgres';
import { RedisBus, type RedisBusStats } from 'mcp-subscriptions/redis';
import type { SampleConfig } from './config.ts';

/** The counters of the bus in use: a Redis bus's or a PostgreSQL bus's, as each reports them. */
export type SampleBusStats = RedisBusStats | PostgresBusStats;

/** The bus to hand the hub, and how to close it (after the hub: the hub leaves it first). */
export interface SampleBus {
  /** `undefined`: the hub's in-memory default. */
  readonly bus: SubscriptionBus | undefined;
  /**
   * Resolves once the bus is connected (at once for the in-memory one), or after `timeoutMs`: an
   * instance that announces it is listening must already receive what the others publish. A Redis or a
   * PostgreSQL that is down at start-up does not keep the app from serving its own streams; the bus
   * says so in the log.
   */
  ready(timeoutMs?: number): Promise<void>;
  /** The Redis or PostgreSQL bus's counters, or `undefined` for the in-memory bus. */
  stats(): SampleBusStats | undefined;
  close(): Promise<void>;
}

/**
 * The channels' prefix. Every release of the samples uses this one: a rolling deploy from one release
 * to the next (test/system/rolling-upgrade.test.ts) needs both on the same channels. The PostgreSQL bus
 * takes the same prefix for its NOTIFY channels.
 */
const CHANNEL_PREFIX = 'mcp-subscriptions-sample';

/** The bus `config` asks for. */
export function createSampleBus(config: Pick<SampleConfig, 'redisUrl' | 'redisCluster' | 'databaseUrl'>): SampleBus {
  let bus: RedisBus | PostgresBus;
  // loadConfig() refuses DATABASE_URL beside REDIS_URL or REDIS_CLUSTER: at most one of these is set.
  if (config.databaseUrl !== undefined) {
    bus = new PostgresBus({ url: config.databaseUrl, channelPrefix: CHANNEL_PREFIX });
  } else if (config.redisCluster !== undefined) {
    bus = new RedisBus({ cluster: [...config.redisCluster], client: 'ioredis', channelPrefix: CHANNEL_PREFIX });
  } else if (config.redisUrl !== undefined) {
    bus = new RedisBus({ url: config.redisUrl, client: 'ioredis', channelPrefix: CHANNEL_PREFIX });
  } else {
    return {
      bus: undefined,
      ready: () => Promise.resolve(),
      stats: () => undefined,
      close: () => Promise.resolve(),
    };
  }
  return {
    bus,
    ready: async (timeoutMs = 5000) => {
      const deadline = Date.now() + timeoutMs;
      while (!bus.stats().connected && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    },
    stats: () => bus.stats(),
    close: () => bus.close(),
  };
}

/** What the stats route answers: the hub's statistics, and the Redis or PostgreSQL bus's counters under `bus`. */
export type SampleStats = HubStats & { bus?: SampleBusStats };

/**
 * The stats route's body: `hub.stats()`, plus `bus` when a Redis or PostgreSQL bus is in use. Counts only: neither
 * holds a principal's name, a URI or a task id.
 */
export function sampleStats(hubStats: HubStats, sampleBus: SampleBus): SampleStats {
  const bus = sampleBus.stats();
  return bus === undefined ? hubStats : { ...hubStats, bus };
}

/** The hub's options for `config`, on `bus`: what both samples build their hub from. */
export function sampleHubOptions(config: SampleConfig, bus: SubscriptionBus | undefined): SubscriptionHubOptions {
  // MAX_BUFFER is passed through as the library defines it: the library removed `maxBuffer`, so a set
  // MAX_BUFFER stops the app at start with the library's own message (what replaced it), not silently.
  const passedThrough: Record<string, unknown> = config.maxBuffer === undefined ? {} : { maxBuffer: config.maxBuffer };
  return {
    ...passedThrough,
    maxSubscriptions: config.maxSubscriptions,
    ...(config.stallTimeoutMs === undefined ? {} : { stallTimeoutMs: config.stallTimeoutMs }),
    ...(config.maxStreamDurationMs === undefined ? {} : { maxStreamDurationMs: config.maxStreamDurationMs }),
    ...(config.maxSubscriptionsPerPrincipal === undefined
      ? {}
      : { maxSubscriptionsPerPrincipal: config.maxSubscriptionsPerPrincipal }),
    ...(bus === undefined ? {} : { bus }),
  };
}
