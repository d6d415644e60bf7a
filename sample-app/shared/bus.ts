/**
 * The samples' bus: in memory (the hub's default) unless `REDIS_URL` is set, then a `RedisBus` on its
 * own two connections, so that every instance sharing that Redis delivers every event and every
 * `notifications/cancelled`. Framework-free: both samples build it here.
 */
import type { SubscriptionBus, SubscriptionHubOptions } from 'mcp-subscriptions';
import { RedisBus } from 'mcp-subscriptions/redis';
import type { SampleConfig } from './config.ts';

/** The bus to hand the hub, and how to close it (after the hub: the hub leaves it first). */
export interface SampleBus {
  /** `undefined`: the hub's in-memory default. */
  readonly bus: SubscriptionBus | undefined;
  /**
   * Resolves once the bus is connected (at once for the in-memory one), or after `timeoutMs`: an
   * instance that announces it is listening must already receive what the others publish. A Redis that
   * is down at start-up does not keep the app from serving its own streams; the bus says so in the log.
   */
  ready(timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

/** The bus `config` asks for. */
export function createSampleBus(config: Pick<SampleConfig, 'redisUrl'>): SampleBus {
  if (config.redisUrl === undefined) {
    return { bus: undefined, ready: () => Promise.resolve(), close: () => Promise.resolve() };
  }
  const bus = new RedisBus({ url: config.redisUrl, client: 'ioredis', channelPrefix: 'mcp-subscriptions-sample' });
  return {
    bus,
    ready: async (timeoutMs = 5000) => {
      const deadline = Date.now() + timeoutMs;
      while (!bus.stats().connected && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    },
    close: () => bus.close(),
  };
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
    ...(config.maxSubscriptionsPerPrincipal === undefined
      ? {}
      : { maxSubscriptionsPerPrincipal: config.maxSubscriptionsPerPrincipal }),
    ...(bus === undefined ? {} : { bus }),
  };
}
