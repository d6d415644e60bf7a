/**
 * The samples on a Redis Cluster (`REDIS_CLUSTER`, the contract's seed nodes): an Express and a Nest
 * instance bridged over a real cluster of the test's own (3 masters, 3 replicas on loopback), black-box
 * as the contract suite. Events and cancellations cross between them, the stats route shows the bus's
 * counters, the bus's channels are shard channels on the cluster's masters (sharded pub/sub), read
 * from the cluster itself, and delivery resumes after `kill -9` of the master holding a followed
 * note's channel.
 */
import { afterAll, afterEach, beforeAll, describe, expect } from '@jest/globals';
import {
  expectCancelAcross,
  listenClients,
  RESOURCES,
  SAMPLE_PREFIX as PREFIX,
  TOOLS,
  untilDelivered,
  UPDATED,
} from '../helpers/listen-clients.ts';
import { RedisCluster, slotOf } from '../helpers/redis-cluster.ts';
import { ownRedisSkipReason } from '../helpers/redis.ts';
import { eventually, putNote, startSample, stopAllSamples, TOKENS, type SampleApp } from '../helpers/sample-app.ts';
import { describeMessage, isUpdateOf, Sentinel, watcher } from '../helpers/sentinel.ts';
import { testUnless } from '../helpers/skip.ts';
import { warm } from '../helpers/two-instances.ts';
import { uid } from '../helpers/uid.ts';

const clusterTest = testUnless(ownRedisSkipReason('the REDIS_CLUSTER suite'));

const { alice, bob, carol } = TOKENS;

const { subscribe, endAll } = listenClients({ maxBuffer: 10_000 });
const watch = watcher(subscribe);

describe('REDIS_CLUSTER: the samples bridged over a Redis Cluster', () => {
  let cluster: RedisCluster | undefined;
  const apps: SampleApp[] = [];

  beforeAll(async () => {
    if (ownRedisSkipReason('') !== undefined) return;
    cluster = await RedisCluster.start();
    const seeds = cluster.seeds().slice(0, 2).join(',');
    apps.push(
      ...(await Promise.all([
        startSample('express', { REDIS_CLUSTER: seeds }),
        startSample('nest', { REDIS_CLUSTER: seeds }, { startTimeoutMs: 60_000 }),
      ])),
    );
  }, 120_000);

  afterEach(endAll);

  afterAll(async () => {
    await Promise.all(apps.map((app) => app.stop().catch(() => undefined)));
    await stopAllSamples();
    await cluster?.stop();
  }, 30_000);

  clusterTest(
    'each instance delivers the events published on the other, once each, and a cancellation sent to one ends the stream on the other',
    async () => {
      const [express, nest] = apps as [SampleApp, SampleApp];
      const sentinel = await Sentinel.create(express, nest);
      await warm(express, nest, subscribe);
      for (const [from, to] of [
        [express, nest],
        [nest, express],
      ] as const) {
        const name = uid('clustered');
        const uri = `note://alice/${name}`;
        const filter = { toolsListChanged: true, resourcesListChanged: true, resourceSubscriptions: [uri] };
        const there = await watch(to, sentinel, alice, uid('there'), filter);
        const bobThere = await watch(to, sentinel, bob, uid('bob-there'), { resourceSubscriptions: [uri] });
        expect((await putNote(from, alice, uri, 'x')).status).toBe(201);
        expect((await from.api(carol, 'POST', '/api/catalog/tools')).status).toBe(202);
        // On a cluster each key's channel lives on its slot's shard, and events of different keys keep no
        // order between them (docs/redis.md): a sentinel is no barrier for the others. So wait for each
        // expected event, then fire the sentinel and check that nothing else came before it.
        const expected = [RESOURCES, `${UPDATED} ${uri}`, TOOLS];
        const seen: string[] = [];
        await there.subscription.waitFor(
          (notification) => {
            if (!isUpdateOf(sentinel.uri)(notification)) seen.push(describeMessage(notification.message));
            return expected.every((one) => seen.includes(one));
          },
          { timeoutMs: 10_000 },
        );
        expect(seen.sort()).toStrictEqual(expected.sort());
        await sentinel.fire(from);
        expect(await there.next()).toStrictEqual([]);
        expect(await bobThere.next()).toStrictEqual([]);

        await expectCancelAcross(watch, sentinel, to, from, { id: uid('cluster-cancel') });
      }
    },
    60_000,
  );

  clusterTest(
    "the bus uses the cluster's sharded pub/sub, and the stats route shows its counters under `bus`",
    async () => {
      const [express, nest] = apps as [SampleApp, SampleApp];
      const uri = `note://shared/${uid('sharded')}`;
      await subscribe(nest, carol, uid('sharded'), { resourceSubscriptions: [uri], toolsListChanged: true });
      // The instances' channels are shard channels (SSUBSCRIBE) on the masters, none a classic one.
      const channels = await eventually(async () => {
        const masters = cluster === undefined ? [] : await cluster.masters();
        const perMaster = await Promise.all(masters.map((port) => cluster!.shardChannels(port, `${PREFIX}:*`)));
        const all = perMaster.flat();
        return all.length > 0 ? all : undefined;
      }, 'shard channels of the samples on the masters');
      if (channels === undefined) throw new Error('no shard channels');
      for (const channel of channels) expect(channel.startsWith(`${PREFIX}:`)).toBe(true);
      expect(channels).not.toContain(`${PREFIX}:bus`); // no first-release channel on a cluster

      expect((await putNote(express, carol, uri, 'x')).status).toBe(201);
      for (const app of [express, nest]) {
        const stats = await app.api(alice, 'GET', '/api/subscriptions/stats');
        expect(stats.status).toBe(200);
        expect(stats.body?.bus?.connected).toBe(true);
        for (const counter of ['published', 'received', 'dropped']) {
          expect(typeof stats.body.bus[counter]).toBe('number');
        }
        expect(JSON.stringify(stats.body)).not.toContain('note://');
      }
      const sender = (await express.api(alice, 'GET', '/api/subscriptions/stats')).body.bus;
      expect(sender.published).toBeGreaterThanOrEqual(1);
    },
    60_000,
  );

  // Last: it leaves the cluster with one master fewer.
  clusterTest(
    "kill -9 of the master holding a followed note's channel: once a replica took over, events cross again",
    async () => {
      const [express, nest] = apps as [SampleApp, SampleApp];
      const live = cluster as RedisCluster;
      const held = async (): Promise<Map<string, number>> => {
        const where = new Map<string, number>();
        for (const port of await live.masters()) {
          for (const channel of await live.shardChannels(port, `${PREFIX}:*`)) where.set(channel, port);
        }
        return where;
      };
      const before = await held();
      const uri = `note://shared/${uid('failover')}`;
      const probe = await subscribe(nest, carol, uid('failover'), { resourceSubscriptions: [uri] });
      // The channel the subscription added, and the master that holds it.
      const [channel, master] = (await eventually(
        async () => [...(await held())].find(([name]) => !before.has(name)),
        "the followed note's shard channel",
      ))!;
      const resubscribesBefore = (await nest.api(alice, 'GET', '/api/subscriptions/stats')).body.bus.resubscribes;

      await live.kill(master);
      await live.failedOver(master, slotOf(channel));
      await untilDelivered(
        express,
        carol,
        uri,
        probe,
        'an update published on the Express sample reaching the Nest sample after the failover',
        { waitMs: 250, timeoutMs: 30_000, intervalMs: 100 },
      );
      const stats = (await nest.api(alice, 'GET', '/api/subscriptions/stats')).body.bus;
      expect(stats.connected).toBe(true);
      expect(stats.resubscribes).toBeGreaterThan(resubscribesBefore);
    },
    90_000,
  );
});
