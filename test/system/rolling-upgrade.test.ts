/**
 * A rolling deploy from the first release (`v0.1.0`, Redis wire v1 on `${prefix}:bus`) to this one:
 * the first release's own Express sample, built from its git tag (test/helpers/first-release.ts), and
 * today's sample share a redis-server of the test's own. Black-box, as the contract suite: real
 * processes, real HTTP and SSE on loopback, the contract's tokens and REST API.
 *
 * What a deploy relies on: while both releases run, each node's streams get the events published on the
 * other (once each, in the publishing node's order) and a `notifications/cancelled` sent to either node
 * ends the stream wherever it is held; a fleet replaced node by node loses no event on the streams that
 * stay open meanwhile; and once the last first-release node is gone, the new nodes stop writing the v1
 * copies they kept for it. What each node writes is read from Redis's own `MONITOR`, not from the nodes.
 *
 * Each node keeps its own notes and tasks (the samples have no shared store), so the events crossing
 * nodes here are note and catalog events: a task is only followed on the node that owns it.
 */
import { afterAll, afterEach, beforeAll, describe, expect } from '@jest/globals';
import { Redis } from 'ioredis';
import { firstRelease, type ReleaseTree } from '../helpers/first-release.ts';
import {
  expectCancelAcross,
  listenClients,
  RESOURCES,
  SAMPLE_PREFIX as PREFIX,
  TOOLS,
  untilDelivered,
  UPDATED,
} from '../helpers/listen-clients.ts';
import { ownRedisSkipReason } from '../helpers/redis.ts';
import {
  eventually,
  putNote,
  startSample,
  stopAllSamples,
  TOKENS,
  withOwnRedis,
  type RedisServer,
  type SampleApp,
  type SampleKind,
} from '../helpers/sample-app.ts';
import { isUpdateOf, Sentinel, watcher } from '../helpers/sentinel.ts';
import { testUnless } from '../helpers/skip.ts';
import { uid } from '../helpers/uid.ts';
import type { ListenSubscription } from 'mcp-subscriptions/client';

const redisTest = testUnless(ownRedisSkipReason('the rolling-upgrade suite'));

const { alice, bob, carol } = TOKENS;

/** The first release's one channel, which new nodes keep serving while first-release nodes are present. */
const LEGACY_CHANNEL = `${PREFIX}:bus`;
/** The node ids of the v1 copies a new node writes, so that other new nodes skip them. */
const COPY_NODE = /^~2~/;

/** Subscriptions the current test opened; closed after it. */
const { subscribe, endAll } = listenClients({ maxBuffer: 100_000 });
const watch = watcher(subscribe);

let release: ReleaseTree;

beforeAll(() => {
  // Throws, saying what to do, when git or the release's commit is not there: never a silent skip.
  release = firstRelease();
});

afterEach(endAll);

afterAll(stopAllSamples);

/** A node of the first release: its own Express sample, from its own sources. */
function startFirstRelease(redis: RedisServer): Promise<SampleApp> {
  return startSample('express', { REDIS_URL: redis.url }, { root: release.root });
}

/** A node of this release: its Express sample, or its Nest sample (which the first release had too). */
function startCurrent(redis: RedisServer, kind: SampleKind = 'express'): Promise<SampleApp> {
  return startSample(kind, { REDIS_URL: redis.url }, { startTimeoutMs: 60_000 });
}

/**
 * Waits until an event published on `from` reaches a stream on `to`. A new node finds out that
 * first-release nodes are present by polling Redis, so the first events after a first-release node
 * joins may not reach it; a deploy adds a node to its load balancer once it is started, and the
 * rolling-deploy test below holds the nodes to exactly that, without this wait. Once a probe crossed,
 * everything `from` published before it has crossed too (Redis keeps one connection's order), so
 * nothing published earlier can arrive late on a stream opened afterwards.
 */
async function crossing(from: SampleApp, to: SampleApp): Promise<void> {
  const uri = `note://shared/${uid('crossing')}`;
  const probe = await subscribe(to, carol, uid('crossing'), { resourceSubscriptions: [uri] });
  await untilDelivered(
    from,
    carol,
    uri,
    probe,
    `an event published on ${from.baseUrl} reaching a stream on ${to.baseUrl}`,
    {
      waitMs: 250,
      timeoutMs: 15_000,
      intervalMs: 0,
    },
  );
  await probe.close();
}

/** The first-release nodes `app`'s bus counts, from the stats route (the contract's `bus`). */
async function legacyNodes(app: SampleApp): Promise<number> {
  const stats = await app.api(carol, 'GET', '/api/subscriptions/stats');
  expect(stats.status).toBe(200);
  expect(typeof stats.body?.bus?.legacyNodes).toBe('number');
  return stats.body.bus.legacyNodes as number;
}

/** A PUBLISH Redis carried out, as `MONITOR` reports it. */
interface Published {
  readonly channel: string;
  readonly message: any;
}

/**
 * Every PUBLISH (and SPUBLISH) the test's Redis carries out, from `MONITOR`: what each node writes,
 * read from Redis rather than from the nodes' own accounts. `sync()` resolves once everything Redis
 * carried out before it has been read.
 */
class PublishLog {
  readonly entries: Published[] = [];
  private readonly markers = new Map<string, () => void>();

  private constructor(
    private readonly monitor: Redis,
    private readonly client: Redis,
  ) {
    monitor.on('monitor', (_time: string, args: string[]) => {
      const [command, channel, message] = args;
      const name = command?.toLowerCase();
      if ((name === 'publish' || name === 'spublish') && channel !== undefined && message !== undefined) {
        let parsed: unknown;
        try {
          parsed = JSON.parse(message);
        } catch {
          parsed = message;
        }
        this.entries.push({ channel, message: parsed });
      } else if (name === 'echo' && channel !== undefined) {
        this.markers.get(channel)?.();
      }
    });
  }

  static async start(redis: RedisServer): Promise<PublishLog> {
    const client = new Redis(redis.url, { lazyConnect: true });
    await client.connect();
    const monitor = await client.duplicate().monitor();
    return new PublishLog(monitor, client);
  }

  /** Resolves once MONITOR reported everything Redis carried out before this call. */
  async sync(): Promise<void> {
    const marker = uid('monitor-marker');
    const seen = new Promise<void>((resolve) => this.markers.set(marker, resolve));
    // MONITOR reports commands in the order Redis runs them: once the ECHO is reported, so is all before.
    await this.client.echo(marker);
    await seen;
    this.markers.delete(marker);
  }

  /** The messages published about `uri` (in an event), in order. */
  about(uri: string): Published[] {
    return this.entries.filter((entry) => entry.message?.event?.uri === uri);
  }

  async close(): Promise<void> {
    this.monitor.disconnect();
    await this.client.quit();
  }
}

describe('rolling upgrade: first-release nodes and current nodes on one Redis', () => {
  for (const kind of ['express', 'nest'] as const) {
    describe(`a first-release Express node and a current ${kind} node`, () => {
      redisTest(
        'each node delivers the events published on the other, once each and in order, and each release writes its own wire',
        async () => {
          await withOwnRedis(async (redis) => {
            const log = await PublishLog.start(redis);
            const [old, current] = await Promise.all([startFirstRelease(redis), startCurrent(redis, kind)]);
            try {
              const sentinels = {
                old: await Sentinel.create(old, current),
                current: await Sentinel.create(current, old),
              };
              await crossing(old, current);
              await crossing(current, old);

              for (const [from, to, sentinel] of [
                [old, current, sentinels.old],
                [current, old, sentinels.current],
              ] as const) {
                const name = uid('cross');
                const uri = `note://alice/${name}`;
                const filter = { toolsListChanged: true, resourcesListChanged: true, resourceSubscriptions: [uri] };
                const there = await watch(to, sentinel, alice, uid('there'), filter);
                const here = await watch(from, sentinel, alice, uid('here'), filter);
                const bobThere = await watch(to, sentinel, bob, uid('bob-there'), { resourceSubscriptions: [uri] });

                expect((await putNote(from, alice, uri, 'one')).status).toBe(201);
                expect((await from.api(carol, 'POST', '/api/catalog/tools')).status).toBe(202);
                expect((await putNote(from, alice, uri, 'two')).status).toBe(200);
                expect((await from.api(carol, 'POST', '/api/catalog/resources')).status).toBe(202);
                expect((await from.api(alice, 'DELETE', `/api/notes/alice/${name}`)).status).toBe(204);
                await sentinel.fire(from);

                // The note's create emits the list change before the update (sample-app/shared/notes-service.ts).
                const published = [
                  RESOURCES,
                  `${UPDATED} ${uri}`,
                  TOOLS,
                  `${UPDATED} ${uri}`,
                  RESOURCES,
                  RESOURCES,
                  `${UPDATED} ${uri}`,
                ];
                expect(await there.next({ ordered: true })).toStrictEqual(published);
                expect(await here.next({ ordered: true })).toStrictEqual(published);
                expect(await bobThere.next()).toStrictEqual([]); // the read check holds across releases
              }

              // Each release wrote its own wire: the first release v1 on its channel, the current one v2
              // elsewhere, plus v1 copies (node ids `~2~…`) on the first release's channel for its nodes.
              await log.sync();
              const byOld = log.entries.filter(
                (entry) => entry.message?.v === 1 && !COPY_NODE.test(entry.message.node),
              );
              const oldNodes = new Set(byOld.map((entry) => entry.message.node as string));
              expect(oldNodes.size).toBe(1);
              expect(new Set(byOld.map((entry) => entry.channel))).toStrictEqual(new Set([LEGACY_CHANNEL]));
              const v2 = log.entries.filter((entry) => entry.message?.v === 2);
              expect(v2.length).toBeGreaterThan(0);
              for (const entry of v2) expect(entry.channel.startsWith(`${PREFIX}:2:`)).toBe(true);
              const copies = log.entries.filter(
                (entry) => entry.message?.v === 1 && COPY_NODE.test(entry.message.node),
              );
              expect(copies.length).toBeGreaterThan(0);
              for (const entry of copies) expect(entry.channel).toBe(LEGACY_CHANNEL);
              // Exactly the first release's keys: it drops a message with any other (an event's context too).
              const v1Keys: Record<string, string[]> = {
                event: ['event', 'node', 'type', 'v'],
                cancel: ['id', 'node', 'principal', 'type', 'v'],
              };
              for (const entry of copies) {
                expect(Object.keys(entry.message as object).sort()).toStrictEqual(v1Keys[entry.message.type as string]);
              }
            } finally {
              await Promise.all([old.stop(), current.stop()]);
              await log.close();
            }
          });
        },
        120_000,
      );

      redisTest(
        'notifications/cancelled sent to one node ends the stream held on the other; another principal’s does not',
        async () => {
          await withOwnRedis(async (redis) => {
            const [old, current] = await Promise.all([startFirstRelease(redis), startCurrent(redis, kind)]);
            try {
              const sentinel = await Sentinel.create(old, current);
              await crossing(old, current);
              await crossing(current, old);
              for (const [holder, other] of [
                [old, current],
                [current, old],
              ] as const) {
                // Bob's cancel naming alice's id, sent to the other node, is checked through it.
                await expectCancelAcross(watch, sentinel, holder, other, { othersFirst: { fireVia: other } });
              }
            } finally {
              await Promise.all([old.stop(), current.stop()]);
            }
          });
        },
        120_000,
      );
    });
  }

  redisTest(
    'a deploy replacing two first-release nodes one by one loses no event on the streams that stay open; then the v1 copies stop',
    async () => {
      await withOwnRedis(async (redis) => {
        const log = await PublishLog.start(redis);
        const deploy = new Deploy(uid('roll'));
        try {
          const [old1, old2] = await Promise.all([startFirstRelease(redis), startFirstRelease(redis)]);
          deploy.nodes.push(old1, old2);
          const onOld1 = await deploy.join('old1', old1);
          const onOld2 = await deploy.join('old2', old2);
          const publishing = deploy.publish();

          // Node 1: a current node joins the load balancer as soon as it listens; then node 1 leaves it,
          // finishes its requests, and stops.
          const new1 = await deploy.launch(() => startCurrent(redis));
          const onNew1 = await deploy.join('new1', new1);
          // It counted the first-release nodes before saying it was connected (and so before listening).
          expect(await legacyNodes(new1)).toBe(2);
          await deploy.leave('old1', old1, onOld1);
          await eventually(async () => (await legacyNodes(new1)) === 1, 'new1 to count one first-release node');

          // Node 2, likewise.
          const new2 = await deploy.launch(() => startCurrent(redis));
          const onNew2 = await deploy.join('new2', new2);
          expect(await legacyNodes(new2)).toBe(1);
          await deploy.leave('old2', old2, onOld2);
          for (const node of [new1, new2]) {
            await eventually(async () => (await legacyNodes(node)) === 0, 'no first-release node counted any more');
          }

          // The streams on the current nodes stayed open to the end: every event published after their
          // acknowledgement reached them.
          await deploy.finish(publishing, [onOld1, onOld2, onNew1, onNew2]);

          // While first-release nodes were present, the current nodes wrote v1 copies for them.
          await log.sync();
          const fromNew = deploy.ticksVia('new1', 'new2');
          const copied = fromNew.filter((tick) =>
            log.about(tick.uri).some((entry) => entry.channel === LEGACY_CHANNEL && COPY_NODE.test(entry.message.node)),
          );
          expect(copied.length).toBeGreaterThan(0);

          // Once the last one is gone, they stop (after their next presence check): an event published
          // from then on is written on their own channels only.
          const uri = `note://shared/${uid('after-last')}`;
          const afterLast = await subscribe(new2, carol, uid('after-last'), { resourceSubscriptions: [uri] });
          const writtenFor = async (): Promise<Published[]> => {
            const from = log.entries.length;
            expect([200, 201]).toContain((await putNote(new1, carol, uri, uid('after'))).status);
            await afterLast.waitFor(isUpdateOf(uri), { timeoutMs: 5000 });
            await log.sync();
            return log.entries.slice(from).filter((entry) => entry.message?.event?.uri === uri);
          };
          await eventually(
            async () => {
              const written = await writtenFor();
              expect(written.length).toBeGreaterThan(0); // the event itself, on the current nodes' channels
              return written.every((entry) => entry.channel !== LEGACY_CHANNEL);
            },
            'the current nodes to stop writing v1 copies once no first-release node is left',
            { timeoutMs: 15_000, intervalMs: 200 },
          );
          // And it stays so.
          const from = log.entries.length;
          for (let round = 0; round < 5; round++) {
            for (const written of await writtenFor()) expect(written.channel).not.toBe(LEGACY_CHANNEL);
          }
          await log.sync();
          expect(log.entries.slice(from).filter((entry) => entry.channel === LEGACY_CHANNEL)).toStrictEqual([]);
        } finally {
          await Promise.all(deploy.nodes.map((node) => node.stop()));
          await log.close();
        }
      });
    },
    180_000,
  );

  redisTest(
    'going back: current nodes replaced by first-release nodes one by one lose no event, each newcomer taking traffic once the current nodes count it',
    async () => {
      await withOwnRedis(async (redis) => {
        const deploy = new Deploy(uid('back'));
        try {
          const [new1, new2] = await Promise.all([startCurrent(redis), startCurrent(redis)]);
          deploy.nodes.push(new1, new2);
          const onNew1 = await deploy.join('new1', new1);
          const onNew2 = await deploy.join('new2', new2);
          const publishing = deploy.publish();

          // A first-release node does not wait for the others to count it (docs/redis.md, "Rolling
          // upgrades"): it joins the load balancer once the current nodes do.
          const old1 = await deploy.launch(() => startFirstRelease(redis));
          for (const node of [new1, new2]) {
            await eventually(async () => (await legacyNodes(node)) === 1, 'the current nodes to count old1');
          }
          const onOld1 = await deploy.join('old1', old1);
          await deploy.leave('new1', new1, onNew1);

          const old2 = await deploy.launch(() => startFirstRelease(redis));
          await eventually(async () => (await legacyNodes(new2)) === 2, 'new2 to count old2');
          const onOld2 = await deploy.join('old2', old2);
          await deploy.leave('new2', new2, onNew2);

          await deploy.finish(publishing, [onNew1, onNew2, onOld1, onOld2]);
        } finally {
          await Promise.all(deploy.nodes.map((node) => node.stop()));
        }
      });
    },
    180_000,
  );
});

/** One event of the deploy's continuous publishing: a note created on one node, its own URI. */
interface Tick {
  readonly uri: string;
  /** The node the request went to. */
  readonly via: string;
  /** The logical time the request was sent. */
  readonly sent: number;
  /** The logical time its 201 came back. */
  done?: number;
}

/** A stream of the deploy: on one node, following every tick's URI, read in the background. */
interface DeployStream {
  readonly node: string;
  readonly subscription: ListenSubscription;
  /** The logical time its acknowledgement came. */
  readonly ack: number;
  /** The logical time from which it is no longer expected to receive every tick (its node left). */
  until?: number;
  /** The URIs of the updates it received, in order. */
  readonly received: string[];
  /** Items other than notifications and the end (`dropped`, `gap`): there must be none. */
  readonly anomalies: string[];
}

/** How many ticks the deploy has: each is a URI every stream follows, within the listen filter's bound. */
const TICKS = 800;
/** The pause between two ticks: steady traffic over the whole deploy, not a burst at its start. */
const TICK_PAUSE_MS = 15;

/**
 * A fleet under continuous publishing (carol creating shared notes, one request at a time, round-robin
 * over the nodes in the load balancer) and the streams that must not lose any of it. Time here is
 * logical: a counter bumped at each send, answer, acknowledgement and retirement, so that "published
 * after the acknowledgement" is exact.
 */
class Deploy {
  private clock = 0;
  private readonly uris: string[];
  private readonly ticks: Tick[] = [];
  private readonly balanced = new Map<string, SampleApp>();
  private inFlight: Promise<unknown> = Promise.resolve();
  private stopped = false;
  private readonly progress = new Set<() => void>();
  /** Every node of the deploy, stopped by the test at its end whatever happened. */
  readonly nodes: SampleApp[] = [];

  constructor(run: string) {
    this.uris = Array.from({ length: TICKS }, (_, index) => `note://shared/${run}-${index}`);
  }

  private now(): number {
    return ++this.clock;
  }

  /** After 20 more ticks, starts a node with `start` (it joins the load balancer once {@link join}ed). */
  async launch(start: () => Promise<SampleApp>): Promise<SampleApp> {
    await this.published(20);
    const app = await start();
    this.nodes.push(app);
    return app;
  }

  /** Adds `app` to the load balancer as `name`, and opens a stream on it. */
  async join(name: string, app: SampleApp): Promise<DeployStream> {
    this.balanced.set(name, app);
    return this.openStream(name, app);
  }

  /** After 20 more ticks, retires `name` (see {@link retire}), then stops it: it must exit 0. */
  async leave(name: string, app: SampleApp, stream: DeployStream): Promise<void> {
    await this.published(20);
    await this.retire(name, stream);
    expect(await app.stop()).toBe(0);
  }

  /**
   * After 20 more ticks, stops publishing, waits until the streams still open received every tick
   * they must, and checks each of `streams`.
   */
  async finish(publishing: Promise<void>, streams: DeployStream[]): Promise<void> {
    await this.published(20);
    await this.stop(publishing);
    for (const stream of streams) if (stream.until === undefined) await this.settle(stream);
    for (const stream of streams) this.check(stream);
  }

  /** Opens a stream on `app` following every tick, and reads it in the background. */
  async openStream(node: string, app: SampleApp): Promise<DeployStream> {
    const subscription = await subscribe(app, alice, uid(`deploy-${node}`), { resourceSubscriptions: this.uris });
    expect(subscription.honored.resourceSubscriptions).toHaveLength(TICKS);
    const stream: DeployStream = { node, subscription, ack: this.now(), received: [], anomalies: [] };
    void (async () => {
      for await (const item of subscription) {
        if (item.type === 'notification') {
          if (item.method === UPDATED) stream.received.push(String(item.params.uri));
        } else if (item.type !== 'end') {
          stream.anomalies.push(JSON.stringify(item));
        }
      }
    })();
    return stream;
  }

  /** Publishes ticks until {@link stop}, or until every URI is used. */
  async publish(): Promise<void> {
    for (let index = 0; index < this.uris.length && !this.stopped; index++) {
      const names = [...this.balanced.keys()];
      const via = names[index % names.length]!;
      const tick: Tick = { uri: this.uris[index]!, via, sent: this.now() };
      this.ticks.push(tick);
      const request = putNote(this.balanced.get(via)!, carol, tick.uri, 'tick');
      this.inFlight = request;
      const res = await request;
      expect(res.status).toBe(201);
      tick.done = this.now();
      for (const wake of this.progress) wake();
      await new Promise((resolve) => setTimeout(resolve, TICK_PAUSE_MS));
    }
  }

  /** Resolves once `count` more ticks were answered. */
  async published(count: number): Promise<void> {
    const target = this.ticks.filter((tick) => tick.done !== undefined).length + count;
    if (target > TICKS) throw new Error(`the deploy needs more than ${TICKS} ticks: raise TICKS`);
    await new Promise<void>((resolve) => {
      const wake = (): void => {
        if (this.ticks.filter((tick) => tick.done !== undefined).length < target) return;
        this.progress.delete(wake);
        resolve();
      };
      this.progress.add(wake);
    });
  }

  /**
   * Takes `node` out of the load balancer and waits for its request in flight; then waits until its
   * stream has every tick answered so far, since it is about to stop.
   */
  async retire(node: string, stream: DeployStream): Promise<void> {
    this.balanced.delete(node);
    await this.inFlight;
    stream.until = this.now();
    await this.settle(stream);
  }

  async stop(publishing: Promise<void>): Promise<void> {
    this.stopped = true;
    await publishing;
  }

  /** Waits until `stream` received every tick it must (see {@link expected}). */
  async settle(stream: DeployStream): Promise<void> {
    const expected = this.expected(stream);
    await eventually(
      () => expected.every((uri) => stream.received.includes(uri)),
      `the stream on ${stream.node} to receive the ${expected.length} events published after its acknowledgement`,
      { timeoutMs: 10_000 },
    ).catch((error: Error) => {
      const missing = expected.filter((uri) => !stream.received.includes(uri));
      throw new Error(
        `${error.message}\nmissing on ${stream.node}: ${missing.length}, e.g. ${this.describe(missing.slice(0, 5))}`,
      );
    });
  }

  /** The ticks sent after `stream`'s acknowledgement and answered before its node left (or the end). */
  private expected(stream: DeployStream): string[] {
    return this.ticks
      .filter((tick) => tick.sent > stream.ack && tick.done !== undefined && tick.done < (stream.until ?? Infinity))
      .map((tick) => tick.uri);
  }

  private describe(uris: string[]): string {
    return uris.map((uri) => `${uri} via ${this.ticks.find((tick) => tick.uri === uri)?.via}`).join(', ');
  }

  /** Every expected tick once, nothing twice, and each publishing node's ticks in its order. */
  check(stream: DeployStream): void {
    const expected = this.expected(stream);
    expect(stream.anomalies).toStrictEqual([]);
    expect(expected.length).toBeGreaterThanOrEqual(20); // the deploy published while this stream was open
    expect(expected.filter((uri) => !stream.received.includes(uri))).toStrictEqual([]);
    expect(new Set(stream.received).size).toBe(stream.received.length); // once each
    const order = new Map(this.uris.map((uri, index) => [uri, index]));
    for (const via of new Set(this.ticks.map((tick) => tick.via))) {
      const fromVia = stream.received.filter((uri) => this.ticks.find((tick) => tick.uri === uri)?.via === via);
      const indexes = fromVia.map((uri) => order.get(uri)!);
      expect(indexes).toStrictEqual([...indexes].sort((x, y) => x - y)); // in the publishing node's order
    }
  }

  /** The ticks published through the nodes named. */
  ticksVia(...nodes: string[]): Tick[] {
    return this.ticks.filter((tick) => nodes.includes(tick.via));
  }
}
