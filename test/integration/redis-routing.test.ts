/**
 * Interest routing (the RedisBus default): a node subscribes to the channels of the keys its own streams
 * follow, hears only those, lets them go when its last stream of a key leaves, and acknowledges a
 * stream only once the channels it needs are subscribed. Real Redis, real HTTP, real SSE parsing.
 */
import { afterAll, describe, expect, test } from '@jest/globals';
import { createHash, randomUUID } from 'node:crypto';
import net from 'node:net';
import { Redis } from 'ioredis';
import express from 'express';
import { SubscriptionHub } from 'mcp-subscriptions';
import { mcpSubscriptions } from 'mcp-subscriptions/express';
import { RedisBus, type RedisBusOptions } from 'mcp-subscriptions/redis';
import { authFromUserHeader, listenOn, type RunningServer } from '../helpers/express-apps.ts';
import { hubEngine } from '../../lib/internal.ts';
import { FakeResponse, openFollowing, recordingLogger, waitFor } from '../helpers/fake-response.ts';
import { OwnRedis, REDIS_URL, redisServerInstalled, sharedRedisMissing } from '../helpers/redis.ts';
import { describeUnless, failUnderCi } from '../helpers/skip.ts';
import { listen, type SseStream } from '../helpers/sse.ts';

const redisMissing = await sharedRedisMissing();
const serverMissing = redisServerInstalled() ? undefined : 'redis-server is not installed';
failUnderCi('Redis for the routing suite', redisMissing ?? serverMissing);

const cleanups: (() => unknown)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) {
    try {
      await cleanup();
    } catch {
      // already closed
    }
  }
});

let prefixes = 0;
/** A key's digest in its channel's name, as docs/redis.md gives it. */
const digestOf = (key: string): string => createHash('sha256').update(key).digest('base64url').slice(0, 22);

const uniquePrefix = (): string => `mcp-subscriptions-routing:${process.pid}:${++prefixes}:${randomUUID().slice(0, 8)}`;

type Library = 'ioredis' | 'redis';

function bus(
  library: Library,
  channelPrefix: string,
  extra: Partial<Pick<RedisBusOptions, 'routing' | 'logger' | 'resync'>> & { url?: string } = {},
): RedisBus {
  const { url = REDIS_URL, ...rest } = extra;
  const made = new RedisBus({ url, client: library, channelPrefix, logger: recordingLogger(), ...rest });
  cleanups.push(() => made.close());
  return made;
}

function hubOn(on: RedisBus): SubscriptionHub {
  const hub = new SubscriptionHub({ bus: on, logger: recordingLogger() });
  cleanups.push(() => hub.close());
  return hub;
}

function admin(url = REDIS_URL): Redis {
  const client = new Redis(url);
  client.on('error', () => {});
  cleanups.push(() => client.disconnect());
  return client;
}

/** Waits for an asynchronous condition (a question to Redis), polling every 20 ms. */
async function until(predicate: () => Promise<boolean>, what: string, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

async function connected(...buses: RedisBus[]): Promise<void> {
  await waitFor(() => buses.every((one) => one.stats().connected), 'the buses connected', 10_000);
}

/** The channels of this release under `prefix` that have a subscriber, sorted. */
async function channelsOf(client: Redis, prefix: string): Promise<string[]> {
  return ((await client.call('PUBSUB', 'CHANNELS', `${prefix}:2:*`)) as string[]).sort();
}

/**
 * A TCP proxy to `url`'s Redis that holds what the client sends for `delayMs` (in order) before passing
 * it on: a Redis that is `delayMs` away, so that a SUBSCRIBE not waited for loses the race with a
 * PUBLISH sent by another node directly.
 */
async function distantRedis(url: string, delayMs: number): Promise<string> {
  const target = new URL(url);
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port || 6379), target.hostname);
    sockets.add(client).add(upstream);
    client.on('data', (chunk) => setTimeout(() => upstream.write(chunk), delayMs));
    upstream.on('data', (chunk) => client.write(chunk));
    const end = (): void => {
      client.destroy();
      upstream.destroy();
    };
    for (const socket of [client, upstream]) {
      socket.on('close', end);
      socket.on('error', end);
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  );
  return `redis://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
}

const MARKER = 'marker://done';

const updates = (res: FakeResponse, uri: string): number =>
  res.messages().filter((m: any) => m.method === 'notifications/resources/updated' && m.params?.uri === uri).length;

describeUnless(redisMissing)('interest routing on Redis (127.0.0.1:6379)', () => {
  test.each(['ioredis', 'redis'] as const)(
    'a node subscribes to the channels of exactly what its streams follow, and lets each go after the last stream of it leaves (%s)',
    async (library) => {
      const prefix = uniquePrefix();
      const node = bus(library, prefix);
      await connected(node);
      const hub = hubOn(node);
      const redis = admin();
      // Only the presence and resync channels before any stream: nothing of any key.
      expect(await channelsOf(redis, prefix)).toStrictEqual([`${prefix}:2:nodes:interest`, `${prefix}:2:resync`]);
      const first = new FakeResponse();
      const second = new FakeResponse();
      const uris = ['note://alice/a', 'note://alice/b'];
      const streamA = await openFollowing(hub, first, {
        principal: 'alice',
        id: 1,
        filter: { toolsListChanged: true, resourceSubscriptions: uris },
      });
      await openFollowing(hub, second, { principal: 'alice', id: 2, filter: { resourceSubscriptions: [uris[0]!] } });
      const held = await channelsOf(redis, prefix);
      // tools, two URIs, alice's cancellations, presence, resync: no URI or principal in any channel name.
      expect(held).toHaveLength(6);
      expect(held).toContain(`${prefix}:2:l:tools`);
      expect(held.filter((channel) => channel.startsWith(`${prefix}:2:u:`))).toHaveLength(2);
      expect(held.filter((channel) => channel.startsWith(`${prefix}:2:c:`))).toHaveLength(1);
      expect(held.join(' ')).not.toMatch(/alice|note/);
      // The node also listens on the first release's channel, for rolling upgrades.
      expect(((await redis.call('PUBSUB', 'NUMSUB', node.channel)) as [string, number])[1]).toBe(1);
      expect(node.stats().subscriptions).toBe(held.length + 1);

      // The first stream leaves: its own URI and the tools list go (after the linger); the shared URI stays.
      streamA.cancel('client');
      await until(async () => (await channelsOf(redis, prefix)).length === 4, 'two channels let go');
      const left = await channelsOf(redis, prefix);
      expect(left).not.toContain(`${prefix}:2:l:tools`);
      expect(left.filter((channel) => channel.startsWith(`${prefix}:2:u:`))).toHaveLength(1);
      expect(node.stats().subscriptions).toBe(5);
    },
  );

  test('a node hears only what its streams follow: updates of other URIs never reach it', async () => {
    const prefix = uniquePrefix();
    const [a, b] = [bus('ioredis', prefix), bus('redis', prefix)];
    await connected(a, b);
    const [hubA, hubB] = [hubOn(a), hubOn(b)];
    const res = new FakeResponse();
    await openFollowing(hubB, res, { filter: { resourceSubscriptions: ['note://b/followed'] } });
    for (let i = 0; i < 200; i++) hubA.resourceUpdated(`note://a/${i}`);
    hubA.toolsListChanged();
    hubA.resourceUpdated('note://b/followed');
    await waitFor(() => updates(res, 'note://b/followed') === 1, 'the followed update at B');
    // Everything A published went out; B received the one message its stream follows.
    await waitFor(() => a.stats().published === 202, 'every publish acknowledged');
    expect(b.stats()).toMatchObject({ received: 1, dropped: 0 });
    expect(res.messages()).toHaveLength(1);
  });

  test('{ buckets: n }: keys hashed into n channels still reach exactly their streams; a node holds at most n + 3 + presence', async () => {
    const prefix = uniquePrefix();
    const routing = { buckets: 4 };
    const [a, b] = [bus('ioredis', prefix, { routing }), bus('redis', prefix, { routing })];
    await connected(a, b);
    const [hubA, hubB] = [hubOn(a), hubOn(b)];
    const res = new FakeResponse();
    const uris = Array.from({ length: 40 }, (_, i) => `note://b/${i}`);
    await openFollowing(hubB, res, { filter: { promptsListChanged: true, resourceSubscriptions: uris } });
    for (let i = 0; i < 40; i++) hubA.resourceUpdated(`note://a/${i}`);
    for (const uri of uris) hubA.resourceUpdated(uri);
    hubA.promptsListChanged();
    await waitFor(
      () => res.messages().some((m: any) => m.method === 'notifications/prompts/list_changed'),
      'the list change',
    );
    expect(res.messages().map((m: any) => m.params?.uri ?? m.method)).toStrictEqual([
      ...uris,
      'notifications/prompts/list_changed',
    ]);
    const channels = await channelsOf(admin(), prefix);
    expect(channels.filter((channel) => channel.startsWith(`${prefix}:2:b:`)).length).toBeLessThanOrEqual(4);
    expect(b.stats().routing).toBe('buckets');
    // B hears the other URIs of the buckets it follows, and nothing it does not: at most every update.
    expect(b.stats().received).toBeLessThanOrEqual(81);
  });

  test('a node of another routing on the same prefix is reported once, naming both', async () => {
    const prefix = uniquePrefix();
    const logger = recordingLogger();
    const a = bus('ioredis', prefix, { logger });
    const b = bus('ioredis', prefix, { routing: 'broadcast' });
    await connected(a, b);
    await waitFor(() => logger.warns.length > 0, 'the report', 5000);
    await new Promise((resolve) => setTimeout(resolve, 1200));
    expect(logger.warns).toHaveLength(1);
    expect(String(logger.warns[0]![0])).toMatch(/another routing.*broadcast.*this node: interest.*same `routing`/);
  });

  test('bucket nodes with another number of buckets on the same prefix are reported once', async () => {
    const prefix = uniquePrefix();
    const logger = recordingLogger();
    const a = bus('redis', prefix, { logger, routing: { buckets: 8 } });
    const b = bus('redis', prefix, { routing: { buckets: 16 } });
    await connected(a, b);
    await waitFor(() => logger.warns.length > 0, 'the report', 5000);
    expect(logger.warns).toHaveLength(1);
    expect(String(logger.warns[0]![0])).toMatch(/buckets other than 8.*this node: buckets 8/);
  });

  test('a stream acknowledged over HTTP gets an event published on another node right after its ack, every time', async () => {
    const prefix = uniquePrefix();
    // B's Redis is 25 ms away, A's next door: without the ack waiting for B's SUBSCRIBE, A's PUBLISH
    // right after the ack would reach Redis first and the update would be lost.
    const [a, b] = [bus('ioredis', prefix), bus('redis', prefix, { url: await distantRedis(REDIS_URL, 25) })];
    await connected(a, b);
    const hubA = hubOn(a);
    const hubB = hubOn(b);
    const app = express();
    app.post(
      '/mcp',
      authFromUserHeader,
      mcpSubscriptions({
        hub: hubB,
        capabilities: { resourceSubscriptions: true },
        keepAliveMs: false,
        canRead: () => true,
      }),
      () => undefined,
    );
    const server: RunningServer = await listenOn(app);
    cleanups.push(() => server.close());
    const streams: SseStream[] = [];
    for (let i = 0; i < 30; i++) {
      // A URI no stream of B's node followed before: its channel is new, so the ack waits for its SUBSCRIBE.
      const uri = `note://fresh/${i}/${randomUUID()}`;
      const stream = await listen(server.url, `l${i}`, { resourceSubscriptions: [uri] }, { 'x-user': 'alice' });
      streams.push(stream);
      await stream.event(1);
      hubA.resourceUpdated(uri);
      const update = await stream.event(2);
      expect(JSON.parse(update.data)).toMatchObject({ method: 'notifications/resources/updated', params: { uri } });
    }
    for (const stream of streams) stream.close();
  });
});

describeUnless(serverMissing)("interest routing when Redis restarts (a redis-server of the test's own)", () => {
  test.each(['ioredis', 'redis'] as const)(
    'every followed channel is subscribed again after a reconnect, and counted once in resubscribes (%s)',
    async (library) => {
      const server = await OwnRedis.start();
      cleanups.push(() => server.stop());
      const prefix = uniquePrefix();
      const [a, b] = [bus(library, prefix, { url: server.url }), bus(library, prefix, { url: server.url })];
      await connected(a, b);
      const [hubA, hubB] = [hubOn(a), hubOn(b)];
      const res = new FakeResponse();
      await openFollowing(hubB, res, { filter: { resourceSubscriptions: ['note://x', 'note://y'] } });
      const before = b.stats().subscriptions;
      await server.stop();
      await waitFor(() => !a.stats().connected && !b.stats().connected, 'both down', 10_000);
      await server.start();
      await connected(a, b);
      expect(b.stats()).toMatchObject({ resubscribes: 1, reconnects: 1, subscriptions: before });
      hubA.resourceUpdated('note://y');
      await waitFor(() => updates(res, 'note://y') === 1, 'the update after the restart');
      const channels = await channelsOf(admin(server.url), prefix);
      expect(channels.filter((channel) => channel.startsWith(`${prefix}:2:u:`))).toHaveLength(2);
    },
  );
});

describeUnless(serverMissing)("interest under faults (a redis-server of the test's own)", () => {
  /** A node on the caller's own ioredis clients, which resubscribe their own channel set on reconnect. */
  function callersNode(url: string, prefix: string): RedisBus {
    const [publisher, subscriber] = [new Redis(url), new Redis(url)];
    for (const client of [publisher, subscriber]) client.on('error', () => {});
    const made = new RedisBus({ publisher, subscriber, channelPrefix: prefix, logger: recordingLogger() });
    cleanups.push(async () => {
      await made.close();
      publisher.disconnect();
      subscriber.disconnect();
    });
    return made;
  }

  test('channels let go while Redis is down are not subscribed once it is back, whatever the client resubscribes', async () => {
    const server = await OwnRedis.start();
    cleanups.push(() => server.stop());
    const prefix = uniquePrefix();
    const node = callersNode(server.url, prefix);
    await connected(node);
    const hub = hubOn(node);
    const keep = await openFollowing(hub, new FakeResponse(), {
      id: 'keep',
      filter: { resourceSubscriptions: ['note://keep'] },
    });
    const gone = [];
    for (let i = 0; i < 20; i++) {
      gone.push(
        await openFollowing(hub, new FakeResponse(), {
          principal: `p${i}`,
          id: i,
          filter: { resourceSubscriptions: [`note://gone/${i}`] },
        }),
      );
    }
    await server.stop();
    await waitFor(() => !node.stats().connected, 'the node down', 10_000);
    for (const stream of gone) stream.cancel('client');
    await server.start();
    await connected(node);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const channels = await channelsOf(admin(server.url), prefix);
    // The URI and cancellation channels of the stream still open, and the fixed ones: nothing of the 20.
    expect(channels.filter((channel) => channel.startsWith(`${prefix}:2:u:`))).toHaveLength(1);
    expect(channels.filter((channel) => channel.startsWith(`${prefix}:2:c:`))).toHaveLength(1);
    expect(node.stats().subscriptions).toBe(channels.length + 1); // + the legacy channel
    keep.cancel('client');
  });

  test('`resync: false`: pure at-most-once, nothing kept and nothing resynced after an outage', async () => {
    const server = await OwnRedis.start();
    cleanups.push(() => server.stop());
    const prefix = uniquePrefix();
    const [node, other] = [
      bus('ioredis', prefix, { url: server.url, resync: false }),
      bus('redis', prefix, { url: server.url }),
    ];
    await connected(node, other);
    const [hub, otherHub] = [hubOn(node), hubOn(other)];
    const res = new FakeResponse();
    await openFollowing(hub, res, { filter: { resourceSubscriptions: ['note://kept', MARKER] } });
    await server.stop();
    await waitFor(() => !node.stats().connected, 'the node down', 10_000);
    hub.resourceUpdated('note://during');
    expect(node.stats().unsent).toBe(0);
    await server.start();
    await connected(node, other);
    otherHub.resourceUpdated(MARKER);
    await waitFor(() => updates(res, MARKER) === 1, 'the marker after the outage');
    expect(updates(res, 'note://kept')).toBe(0);
    expect(node.stats()).toMatchObject({ resyncs: 0, republished: 0, unsent: 0 });
    expect(hub.stats().resynced).toBe(0);
  });

  test('listens acknowledged while the bus re-subscribes after a restart are all subscribed', async () => {
    const server = await OwnRedis.start();
    cleanups.push(() => server.stop());
    const prefix = uniquePrefix();
    const [node, other] = [callersNode(server.url, prefix), callersNode(server.url, prefix)];
    await connected(node, other);
    const hub = hubOn(node);
    for (let i = 0; i < 50; i++) {
      await openFollowing(hub, new FakeResponse(), {
        principal: `b${i}`,
        id: i,
        filter: { resourceSubscriptions: [`note://before/${i}`] },
      });
    }
    await server.stop();
    await waitFor(() => !node.stats().connected, 'the node down', 10_000);
    await server.start();
    // Listens of new keys, every 2 ms, while the node reconnects and re-subscribes (up to 900 of them).
    const uris: string[] = [];
    const opening: Promise<unknown>[] = [];
    for (let i = 0; (!node.stats().connected || i < 50) && i < 900; i++) {
      const uri = `note://during/${i}`;
      uris.push(uri);
      opening.push(
        openFollowing(hub, new FakeResponse(), { principal: `d${i}`, id: i, filter: { resourceSubscriptions: [uri] } }),
      );
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    await Promise.all(opening);
    await connected(node, other);
    await until(() => Promise.resolve(node.stats().unsubscribed === 0), 'every wanted channel confirmed');
    const redis = admin(server.url);
    const channels = new Set(await channelsOf(redis, prefix));
    const held = uris.filter((uri) => channels.has(`${prefix}:2:u:${digestOf(`u:${uri}`)}`));
    expect(held).toHaveLength(uris.length);
  });
});

describeUnless(redisMissing)('interest held by leases (127.0.0.1:6379)', () => {
  test('a cancellation sent to another node ends a listen still waiting on this one (interest routing)', async () => {
    const prefix = uniquePrefix();
    const [node, other] = [bus('ioredis', prefix), bus('redis', prefix)];
    await connected(node, other);
    const [here, there] = [hubOn(node), hubOn(other)];
    // A listen of carol's in its checks on this node: no stream of hers, so no lease of her keys yet.
    const reservation = hubEngine(here).reserve('carol', 'waiting');
    let cancelled = false;
    reservation.cancellable(() => (cancelled = true));
    await until(() => Promise.resolve(node.stats().unsubscribed === 0), "carol's cancellations subscribed");
    expect(hubEngine(there).cancel('carol', 'waiting')).toBe(0); // not held there: sent over the bus
    await waitFor(() => cancelled, 'the cancellation of the waiting listen');
    expect(here.stats()).toMatchObject({ pendingStreams: 0, opened: 1, closed: { cancelled: 1 } });
  });

  test("two hubs on one bus: a listen of a hub closed meanwhile releases nothing of the other hub's streams", async () => {
    const prefix = uniquePrefix();
    const [node, other] = [bus('ioredis', prefix), bus('redis', prefix)];
    await connected(node, other);
    const [closing, staying, publisher] = [hubOn(node), hubOn(node), hubOn(other)];
    const filter = { resourceSubscriptions: ['note://shared/a'] };
    const res = new FakeResponse();
    await openFollowing(staying, res, { principal: 'bob', filter });
    // A listen of the other hub, reserved before its hub closes and following after (the race).
    const reservation = hubEngine(closing).reserve('alice', 'late');
    await closing.close();
    await reservation.follow(filter);
    reservation.release();
    await new Promise((resolve) => setTimeout(resolve, 1500)); // past the linger of a channel let go
    publisher.resourceUpdated('note://shared/a');
    await waitFor(
      () => res.messages().some((m: any) => m.params?.uri === 'note://shared/a'),
      "the update at the staying hub's stream",
    );
    expect(node.stats().unsubscribed).toBe(0);
  });
});

describeUnless(serverMissing)("subscription churn (a redis-server of the test's own, to count its commands)", () => {
  test('streams of one key opening and closing in turn cost one SUBSCRIBE, and one UNSUBSCRIBE after the last', async () => {
    const server = await OwnRedis.start();
    cleanups.push(() => server.stop());
    const redis = admin(server.url);
    const calls = async (command: string): Promise<number> => {
      const info = String(await redis.call('INFO', 'commandstats'));
      return Number(new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(info)?.[1] ?? 0);
    };
    const node = bus('ioredis', uniquePrefix(), { url: server.url });
    await connected(node);
    const hub = hubOn(node);
    const [subscribes, unsubscribes] = [await calls('subscribe'), await calls('unsubscribe')];
    for (let i = 0; i < 50; i++) {
      const stream = await openFollowing(hub, new FakeResponse(), {
        id: i,
        filter: { resourceSubscriptions: ['note://churn'] },
      });
      stream.cancel('client');
    }
    // One SUBSCRIBE for the URI and one for the principal's cancellations (two turns of the event loop
    // at most), however many streams came and went; nothing let go while they keep coming back.
    expect((await calls('subscribe')) - subscribes).toBeLessThanOrEqual(2);
    expect((await calls('unsubscribe')) - unsubscribes).toBe(0);
    await until(async () => (await calls('unsubscribe')) - unsubscribes === 1, 'the channels let go', 5000);
    // The legacy, presence and resync channels, which every node holds.
    expect(node.stats().subscriptions).toBe(3);
  });
});

describe('routing option', () => {
  test.each([
    ['a string', 'everything'],
    ['zero buckets', { buckets: 0 }],
    ['too many buckets', { buckets: 65537 }],
    ['a fraction', { buckets: 1.5 }],
    ['another key', { bucket: 4 }],
    ['an array', ['interest']],
  ])('refuses %s with its own code, naming the field', (_name, routing) => {
    let error: any;
    try {
      new RedisBus({ url: REDIS_URL, routing: routing as never, logger: recordingLogger() });
    } catch (caught) {
      error = caught;
    }
    expect(error?.code).toBe('ERR_MCP_SUBSCRIPTIONS_INVALID_ROUTING');
    expect(String(error?.message)).toMatch(/`routing(\.buckets)?`/);
  });
});
