/**
 * `mcp-subscriptions/redis`: `RedisBus`, the `SubscriptionBus` that joins the hubs of several processes
 * over Redis pub/sub (or a Redis Cluster's sharded pub/sub). It works with ioredis (5, 6) and node-redis
 * (`redis` 4.6 and later), neither of
 * which this package depends on: pass your own connections, or a URL and have whichever is installed
 * loaded. docs/redis.md says what it guarantees, what it does not, and how to write another bus.
 */
export { RedisBus, RedisBusChannel } from './redis-bus.ts';
export type { RedisBusStats, RedisConnectionMessage } from './redis-bus.ts';
export type {
  IoRedisClient,
  IoRedisClusterClient,
  NodeRedisClient,
  NodeRedisClusterClient,
  RedisBusClientOptions,
  RedisBusClusterOptions,
  RedisBusCommonOptions,
  RedisBusOptions,
  RedisBusRouting,
  RedisBusUrlOptions,
  RedisClient,
  RedisClientLibrary,
  RedisClusterClient,
} from './options.ts';
