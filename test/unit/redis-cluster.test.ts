/**
 * The Redis Cluster parts of the bus that need no socket: the options of the cluster forms (a caller's
 * ioredis `Cluster` or node-redis cluster client, told apart by shape, and seed nodes), the slot of a
 * shard channel and the grouping of an SSUBSCRIBE by slot, the slot map read from CLUSTER SLOTS, and
 * the Redis version check. The clients are the libraries' own, created without connecting.
 */
import { afterAll, describe, expect, test } from '@jest/globals';
import { fc, test as propTest } from '@fast-check/jest';
import { Cluster, Redis } from 'ioredis';
import { createClient, createCluster } from 'redis';
import {
  clusterLibrary,
  groupBySlot,
  parseClusterSlots,
  redisVersion,
  shardedPubSubRefusal,
  slotOf,
} from '../../adapters/redis/cluster-connection.ts';
import { resolveRedisBusOptions, type RedisBusOptions } from '../../adapters/redis/options.ts';
import { thrown } from '../helpers/assert.ts';

const logger = { warn: () => {}, error: () => {} };

// Built, never connected: `lazyConnect` (ioredis) and no `connect()` (node-redis) open no socket.
const ioCluster = new Cluster([{ host: '127.0.0.1', port: 1 }], { lazyConnect: true });
const ioCluster2 = new Cluster([{ host: '127.0.0.1', port: 1 }], { lazyConnect: true });
const ioRedis = new Redis({ host: '127.0.0.1', port: 1, lazyConnect: true });
const nodeCluster = createCluster({ rootNodes: [{ url: 'redis://127.0.0.1:1' }] });
const nodeClient = createClient({ url: 'redis://127.0.0.1:1' });

afterAll(() => {
  ioCluster.disconnect();
  ioCluster2.disconnect();
  ioRedis.disconnect();
});

const codeOf = (options: unknown): string => {
  try {
    resolveRedisBusOptions({ logger, ...(options as object) } as unknown as RedisBusOptions);
    return 'no error';
  } catch (error) {
    return String((error as { code?: unknown }).code);
  }
};

describe('a caller’s cluster client', () => {
  test('is told apart by shape, for both libraries', () => {
    expect(clusterLibrary(ioCluster)).toBe('ioredis');
    expect(clusterLibrary(nodeCluster)).toBe('redis');
    expect(clusterLibrary(ioRedis)).toBeUndefined();
    expect(clusterLibrary(nodeClient)).toBeUndefined();
  });

  test('may be both publisher and subscriber, one object or two', () => {
    for (const [publisher, subscriber, library] of [
      [ioCluster, ioCluster, 'ioredis'],
      [ioCluster, ioCluster2, 'ioredis'],
      [nodeCluster, nodeCluster, 'redis'],
    ] as const) {
      const { connections } = resolveRedisBusOptions({ publisher, subscriber, logger });
      expect(connections).toMatchObject({
        form: 'clients',
        publisher: { library, cluster: true, client: publisher },
        subscriber: { library, cluster: true, client: subscriber },
      });
    }
  });

  test('a single-server client stays single-server, and may not be both', () => {
    const { connections } = resolveRedisBusOptions({ publisher: ioRedis, subscriber: ioRedis.duplicate(), logger });
    expect(connections).toMatchObject({ form: 'clients', publisher: { library: 'ioredis', cluster: false } });
    expect(codeOf({ publisher: ioRedis, subscriber: ioRedis })).toBe('ERR_MCP_SUBSCRIPTIONS_SAME_REDIS_CONNECTION');
  });

  test('a cluster with a single-server client, or clusters of two libraries, are refused', () => {
    for (const pair of [
      { publisher: ioCluster, subscriber: ioRedis },
      { publisher: nodeClient, subscriber: nodeCluster },
      { publisher: ioCluster, subscriber: nodeCluster },
    ]) {
      const error = thrown(() => resolveRedisBusOptions({ ...pair, logger }));
      expect(error.code).toBe('ERR_MCP_SUBSCRIPTIONS_INVALID_REDIS_CLIENT');
      expect(error.message).toMatch(/^mcp-subscriptions: Expected `publisher` and `subscriber` to be/);
    }
  });

  test('something cluster-like without sharded pub/sub is refused, naming what is missing', () => {
    const error = thrown(() =>
      resolveRedisBusOptions({ publisher: { isCluster: true, on() {} }, subscriber: ioCluster, logger } as never),
    );
    expect(error.code).toBe('ERR_MCP_SUBSCRIPTIONS_INVALID_REDIS_CLIENT');
    expect(error.message).toContain('`spublish`');
  });
});

describe('the cluster form (seed nodes)', () => {
  test('takes host:port and redis:// seeds, with credentials and TLS', () => {
    const { connections } = resolveRedisBusOptions({
      cluster: ['127.0.0.1:7000', 'redis://node-b:7001', 'redis://user:p%40ss@[::1]:7002'],
      client: 'redis',
      logger,
    });
    expect(connections).toStrictEqual({
      form: 'cluster',
      client: 'redis',
      seeds: [
        { host: '127.0.0.1', port: 7000, username: undefined, password: undefined, tls: false },
        { host: 'node-b', port: 7001, username: undefined, password: undefined, tls: false },
        { host: '::1', port: 7002, username: 'user', password: 'p@ss', tls: false },
      ],
    });
    const tls = resolveRedisBusOptions({ cluster: ['rediss://a:6380'], logger }).connections;
    expect(tls).toMatchObject({ form: 'cluster', client: undefined, seeds: [{ host: 'a', port: 6380, tls: true }] });
  });

  test('each mistake throws its own code at construction', () => {
    const cases: [unknown, string][] = [
      [{ cluster: [] }, 'ERR_MCP_SUBSCRIPTIONS_INVALID_CLUSTER_NODES'],
      [{ cluster: '127.0.0.1:7000' }, 'ERR_MCP_SUBSCRIPTIONS_INVALID_CLUSTER_NODES'],
      [{ cluster: ['127.0.0.1'] }, 'ERR_MCP_SUBSCRIPTIONS_INVALID_CLUSTER_NODES'],
      [{ cluster: ['127.0.0.1:0'] }, 'ERR_MCP_SUBSCRIPTIONS_INVALID_CLUSTER_NODES'],
      [{ cluster: ['127.0.0.1:70000'] }, 'ERR_MCP_SUBSCRIPTIONS_INVALID_CLUSTER_NODES'],
      [{ cluster: ['redis://127.0.0.1'] }, 'ERR_MCP_SUBSCRIPTIONS_INVALID_CLUSTER_NODES'],
      [{ cluster: ['redis://127.0.0.1:7000/2'] }, 'ERR_MCP_SUBSCRIPTIONS_INVALID_CLUSTER_NODES'],
      [{ cluster: ['http://127.0.0.1:7000'] }, 'ERR_MCP_SUBSCRIPTIONS_INVALID_CLUSTER_NODES'],
      [{ cluster: ['127.0.0.1:7000', 7001] }, 'ERR_MCP_SUBSCRIPTIONS_INVALID_CLUSTER_NODES'],
      [{ cluster: ['rediss://a:7000', 'redis://b:7000'] }, 'ERR_MCP_SUBSCRIPTIONS_INVALID_CLUSTER_NODES'],
      [
        { cluster: Array.from({ length: 101 }, (_, i) => `10.0.0.${i % 250}:7000`) },
        'ERR_MCP_SUBSCRIPTIONS_INVALID_CLUSTER_NODES',
      ],
      [{ cluster: ['127.0.0.1:7000'], url: 'redis://127.0.0.1:6379' }, 'ERR_MCP_SUBSCRIPTIONS_CONFLICTING_OPTIONS'],
      [
        { cluster: ['127.0.0.1:7000'], publisher: ioCluster, subscriber: ioCluster },
        'ERR_MCP_SUBSCRIPTIONS_CONFLICTING_OPTIONS',
      ],
      [{ cluster: ['127.0.0.1:7000'], client: 'valkey' }, 'ERR_MCP_SUBSCRIPTIONS_NOT_ONE_OF'],
      [{ cluster: ['127.0.0.1:7000'], clustr: true }, 'ERR_MCP_SUBSCRIPTIONS_UNKNOWN_OPTION'],
      [{ cluster: ['127.0.0.1:7000'] }, 'no error'],
    ];
    expect(cases.map(([options]) => codeOf(options))).toStrictEqual(cases.map(([, code]) => code));
  });

  test('a refused seed is named by its index, and a URL (which may hold a password) is never quoted', () => {
    const plain = thrown(() => resolveRedisBusOptions({ cluster: ['a:1', 'b'], logger }));
    expect(plain.message).toBe(
      'mcp-subscriptions: Expected `cluster` to be a non-empty array of at most 100 seed nodes, `host:port` or `redis://host:port` strings, got `b` at index 1',
    );
    const secret = thrown(() => resolveRedisBusOptions({ cluster: ['redis://u:hunter2@host'], logger }));
    expect(secret.message).not.toContain('hunter2');
    expect(secret.message).toContain('got another string at index 0');
  });
});

describe('slots', () => {
  test('match CLUSTER KEYSLOT (values read from Redis 7.0), hash tags included', () => {
    expect(slotOf('foo')).toBe(12182);
    expect(slotOf('bar')).toBe(5061);
    expect(slotOf('hello')).toBe(866);
    expect(slotOf('123456789')).toBe(12739);
    expect(slotOf('{user1000}.following')).toBe(slotOf('user1000'));
    // An empty tag does not count: the whole name is hashed.
    expect(slotOf('{}.x')).not.toBe(slotOf(''));
    // Multi-byte characters are hashed as UTF-8 (test/system/redis-cluster.test.ts compares many names with Redis).
    expect(slotOf('é')).toBe(slotOf('\u00e9'));
  });

  propTest.prop([fc.array(fc.string({ unit: 'grapheme' }), { maxLength: 200 })])(
    'groupBySlot partitions the channels, one slot per group, in first-seen order',
    (channels) => {
      const groups = groupBySlot(channels);
      const flat = [...groups.values()].flat();
      expect(flat.slice().sort()).toStrictEqual(channels.slice().sort());
      for (const [slot, group] of groups) for (const channel of group) expect(slotOf(channel)).toBe(slot);
      expect(groups.size).toBe(new Set(channels.map(slotOf)).size);
    },
  );
});

describe('the slot map and the server version', () => {
  test('CLUSTER SLOTS gives each slot its master, host and port', () => {
    const owners = parseClusterSlots([
      [0, 5460, ['127.0.0.1', 7000, 'id-a'], ['127.0.0.1', 7003, 'id-d']],
      [5461, 10922, ['127.0.0.1', 7001, 'id-b']],
      [10923, 16383, ['10.0.0.3', 7002, 'id-c', { hostname: 'c' }]],
    ]);
    expect(owners).toHaveLength(16384);
    expect([owners[0], owners[5460], owners[5461], owners[10922], owners[10923], owners[16383]]).toStrictEqual([
      '127.0.0.1:7000',
      '127.0.0.1:7000',
      '127.0.0.1:7001',
      '127.0.0.1:7001',
      '10.0.0.3:7002',
      '10.0.0.3:7002',
    ]);
    // A range whose master has no known endpoint is left unserved, not guessed.
    expect(parseClusterSlots([[0, 10, ['?', 7000, 'id']]])[0]).toBeUndefined();
    expect(() => parseClusterSlots('ERR')).toThrow(TypeError);
  });

  test('sharded pub/sub needs Redis 7: older servers are refused with the version in the reason', () => {
    const info = (version: string): string => `# Server\r\nredis_version:${version}\r\nredis_mode:cluster\r\n`;
    expect(redisVersion(info('7.0.15'))).toBe('7.0.15');
    expect(shardedPubSubRefusal(info('7.0.15'), 'a:1')).toBeUndefined();
    expect(shardedPubSubRefusal(info('7.2.4'), 'a:1')).toBeUndefined();
    expect(shardedPubSubRefusal(info('8.0.0'), 'a:1')).toBeUndefined();
    expect(shardedPubSubRefusal(info('6.2.14'), '10.0.0.1:7000')).toBe(
      'the Redis Cluster node 10.0.0.1:7000 runs Redis 6.2.14; the bus needs Redis 7 or later on a cluster (sharded pub/sub: SPUBLISH, SSUBSCRIBE)',
    );
    expect(shardedPubSubRefusal('# Server\r\n', 'a:1')).toBeUndefined();
  });
});
