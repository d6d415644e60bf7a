/**
 * `RedisBus` against a real Redis with real clients (ioredis and node-redis): the bus contract, the
 * wire's strictness, no echo, exactly once across nodes, cancellation across nodes, outages (a
 * redis-server of the test's own, killed and restarted), close(), and the option checks.
 *
 * The suites that need Redis on 127.0.0.1:6379 report themselves skipped, with the reason, when it
 * does not answer; under CI (`CI` set) a missing Redis fails instead. Every test uses a channel prefix
 * of its own, so runs (and other users of that Redis) never see each other.
 */
import { afterAll, describe, expect, test } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import diagnostics from 'node:diagnostics_channel';
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Cluster, Redis } from 'ioredis';
import { createClient, createCluster } from 'redis';
import {
  ErrorCode,
  SubscriptionHub,
  type EventContext,
  type SubscriptionBus,
  type SubscriptionEvent,
} from 'mcp-subscriptions';
import {
  RedisBus,
  RedisBusChannel,
  type RedisBusOptions,
  type RedisClient,
  type RedisConnectionMessage,
} from 'mcp-subscriptions/redis';
import { MAX_MESSAGE_BYTES } from '../../adapters/redis/wire.ts';
import { hubEngine } from '../../lib/internal.ts';
import { describeBusContract, followed, isMarker, MARKER, MARKER_URI } from '../helpers/bus-contract.ts';
import { FakeResponse, openFollowing, recordingLogger, waitFor } from '../helpers/fake-response.ts';
import { OwnRedis, REDIS_URL, redisServerInstalled, sharedRedisMissing } from '../helpers/redis.ts';
import { REPO_ROOT } from '../helpers/sample-app.ts';
import { describeUnless, failUnderCi } from '../helpers/skip.ts';
import { UnhandledTracker } from '../helpers/unhandled.ts';

// Decided once, at load: a quick PING on 127.0.0.1:6379, and whether redis-server can be spawned.
const redisMissing = await sharedRedisMissing();
const serverMissing = redisServerInstalled()
  ? undefined
  : 'redis-server is not installed (the outage tests run Redis servers of their own); `apt-get install redis-server` to run these; CI never skips them';
failUnderCi('Redis for the RedisBus suites', redisMissing ?? serverMissing);

type Library = 'ioredis' | 'redis';
const LIBRARIES: readonly Library[] = ['ioredis', 'redis'];

let prefixes = 0;
/** A channel prefix no other test, run or user of the shared Redis has. */
const uniquePrefix = (): string => `mcp-subscriptions-test:${process.pid}:${++prefixes}:${randomUUID().slice(0, 8)}`;

/** What to undo after the file: clients, buses, servers (in reverse order). */
const cleanups: (() => unknown)[] = [];
const unhandled = new UnhandledTracker();
unhandled.start();
async function cleanUp(): Promise<void> {
  for (const cleanup of cleanups.splice(0).reverse()) {
    try {
      await cleanup();
    } catch {
      // already closed
    }
  }
}
afterAll(async () => {
  await cleanUp();
  unhandled.stop();
});

const noop = (): void => {};

/** A publisher and a dedicated subscriber of `library`, connected, as a host app makes them. */
async function callerClients(
  library: Library,
  url = REDIS_URL,
): Promise<{ publisher: RedisClient; subscriber: RedisClient }> {
  if (library === 'ioredis') {
    const publisher = new Redis(url);
    const subscriber = publisher.duplicate();
    // A host app listens for its clients' errors; the bus's own listener goes away in close().
    for (const client of [publisher, subscriber]) {
      client.on('error', noop);
      cleanups.push(() => client.disconnect());
    }
    return { publisher, subscriber };
  }
  const publisher = createClient({ url });
  const subscriber = publisher.duplicate();
  for (const client of [publisher, subscriber]) {
    client.on('error', noop);
    cleanups.push(() => client.isOpen && client.destroy());
  }
  await Promise.all([publisher.connect(), subscriber.connect()]);
  return { publisher, subscriber };
}

/** A plain ioredis client for what a test does to Redis directly (raw PUBLISH, CLIENT LIST, a wire tap). */
function plainClient(url = REDIS_URL): Redis {
  const client = new Redis(url);
  client.on('error', noop);
  cleanups.push(() => client.disconnect());
  return client;
}

type Form = Library | `url:${Library}`;
type NodeOptions = Partial<Pick<RedisBusOptions, 'logger' | 'nodeId' | 'routing'>> & { url?: string };

/** One node: a RedisBus on the caller's clients of `form`, or on a URL with that library. */
async function node(form: Form, channelPrefix: string, options: NodeOptions = {}): Promise<RedisBus> {
  const { url = REDIS_URL, logger = recordingLogger(), nodeId, routing } = options;
  const extra = { ...(nodeId ? { nodeId } : {}), ...(routing === undefined ? {} : { routing }) };
  const bus = form.startsWith('url:')
    ? new RedisBus({ url, client: form.slice(4) as Library, channelPrefix, logger, ...extra })
    : new RedisBus({ ...(await callerClients(form as Library, url)), channelPrefix, logger, ...extra });
  cleanups.push(() => bus.close());
  return bus;
}

async function connected(...buses: RedisBus[]): Promise<void> {
  await waitFor(() => buses.every((bus) => bus.stats().connected), 'the buses connected', 10_000);
}

/** A bus whose members join `buses` in turn: members on different nodes, talking through Redis. */
function spread(buses: readonly RedisBus[]): SubscriptionBus {
  let next = 0;
  return { join: (listener) => buses[next++ % buses.length]!.join(listener) };
}

function nodes(forms: readonly Form[], routing?: RedisBusOptions['routing']) {
  return async () => {
    const channelPrefix = uniquePrefix();
    const buses = await Promise.all(forms.map((form) => node(form, channelPrefix, { routing })));
    await connected(...buses);
    return {
      bus: buses.length === 1 ? buses[0]! : spread(buses),
      close: async () => {
        for (const bus of buses) await bus.close();
      },
    };
  };
}

const updates = (res: FakeResponse, uri: string): number =>
  res.messages().filter((m: any) => m.method === 'notifications/resources/updated' && m.params?.uri === uri).length;
const notified = (res: FakeResponse, method: string): number =>
  res.messages().filter((m: any) => m.method === method).length;

function hubOn(bus: SubscriptionBus): SubscriptionHub {
  const hub = new SubscriptionHub({ bus, logger: recordingLogger() });
  cleanups.push(() => hub.close());
  return hub;
}

describeUnless(redisMissing)('RedisBus against Redis on 127.0.0.1:6379', () => {
  // Members on two nodes (two buses, each with its own connections, on one channel): the contract
  // through Redis. And all members on one node: the contract in-process, as MemoryBus keeps it.
  describeBusContract('RedisBus (ioredis)', nodes(['ioredis', 'ioredis']));
  describeBusContract('RedisBus (node-redis)', nodes(['redis', 'redis']));
  describeBusContract('RedisBus (ioredis and node-redis nodes on one channel)', nodes(['ioredis', 'redis']));
  describeBusContract('RedisBus (url, ioredis)', nodes(['url:ioredis', 'url:ioredis']));
  describeBusContract('RedisBus (url, node-redis)', nodes(['url:redis', 'url:redis']));
  describeBusContract('RedisBus (ioredis), one node', nodes(['ioredis']));
  describeBusContract('RedisBus (node-redis), one node', nodes(['redis']));
  // The other routings put events on other channels; what arrives is decoded and handed on the same way.
  describeBusContract(
    'RedisBus (ioredis and node-redis, routing buckets)',
    nodes(['ioredis', 'redis'], { buckets: 4 }),
  );
  describeBusContract('RedisBus (ioredis and node-redis, routing broadcast)', nodes(['ioredis', 'redis'], 'broadcast'));

  describe('what arrives on the channel', () => {
    const head = (node: unknown, type: unknown) => ({ v: 1, node, type });
    const event = (body: unknown) => JSON.stringify({ ...head('another-node', 'event'), event: body });
    const cancel = (principal: unknown, id: unknown) =>
      JSON.stringify({ ...head('another-node', 'cancel'), principal, id });
    const tools = { kind: 'tools_list_changed' };
    const BAD: readonly (readonly [string, string])[] = [
      ['not JSON', 'garbage'],
      ['an empty message', ''],
      ['truncated JSON', event(tools).slice(0, -1)],
      ['null', 'null'],
      ['an array', '[1,2]'],
      ['a number', '42'],
      ['a string', '"hello"'],
      ['format version 2', JSON.stringify({ v: 2, node: 'another-node', type: 'event', event: tools })],
      ['version "1"', JSON.stringify({ v: '1', node: 'another-node', type: 'event', event: tools })],
      ['no version', JSON.stringify({ node: 'another-node', type: 'event', event: tools })],
      ['no node', JSON.stringify({ v: 1, type: 'event', event: tools })],
      ['an empty node id', JSON.stringify({ ...head('', 'event'), event: tools })],
      ['a numeric node id', JSON.stringify({ ...head(7, 'event'), event: tools })],
      ['a node id too long', JSON.stringify({ ...head('n'.repeat(201), 'event'), event: tools })],
      ['an unknown type', JSON.stringify({ ...head('another-node', 'ping'), event: tools })],
      ['no type', JSON.stringify({ v: 1, node: 'another-node', event: tools })],
      ['an extra key', JSON.stringify({ ...head('another-node', 'event'), event: tools, extra: 1 })],
      ['no event', JSON.stringify(head('another-node', 'event'))],
      ['an unknown kind', event({ kind: 'everything_changed' })],
      ['a relative URI', event({ kind: 'resource_updated', uri: 'notes/todo' })],
      ['a URI on a list change', event({ kind: 'tools_list_changed', uri: 'note://x' })],
      ['a task without owner', event({ kind: 'task_status', task: { taskId: 't-1', status: 'completed' } })],
      [
        'a task with an empty id',
        event({ kind: 'task_status', owner: 'alice', task: { taskId: '', status: 'completed' } }),
      ],
      ['a number principal', cancel(5, 'listen:1')],
      ['an empty principal', cancel('', 'listen:1')],
      ['a null id', cancel('alice', null)],
      ['an object id', cancel('alice', {})],
      ['an infinite id', cancel('alice', 0).replace('"id":0', '"id":1e999')],
      [
        'a cancel with an extra key',
        JSON.stringify({ ...head('another-node', 'cancel'), principal: 'alice', id: 'listen:1', x: 1 }),
      ],
      ['__proto__ at the top', event(tools).replace(/}$/, ',"__proto__":{"polluted":true}}')],
      [
        '__proto__ in the event',
        '{"v":1,"node":"another-node","type":"event","event":{"kind":"tools_list_changed","__proto__":{"polluted":true}}}',
      ],
      [
        'an escaped __proto__ in the event',
        '{"v":1,"node":"another-node","type":"event","event":{"kind":"task_status","owner":"alice","\\u005f_proto__":{"polluted":true},"task":{"taskId":"t-1","status":"completed"}}}',
      ],
      [
        'a valid event over 4 MiB',
        event({
          kind: 'task_status',
          owner: 'alice',
          task: { taskId: 't-1', status: 'completed', statusMessage: 'x'.repeat(5 * 1024 * 1024) },
        }),
      ],
    ];

    test.each(LIBRARIES)(
      'malformed and foreign messages reach no hub; each is dropped and counted, the first one logged (%s)',
      async (library) => {
        const channelPrefix = uniquePrefix();
        const logger = recordingLogger();
        const bus = await node(library, channelPrefix, { logger });
        await connected(bus);
        const hub = hubOn(bus);
        const seen: SubscriptionEvent[] = [];
        hub.subscribeAll((event) => seen.push(event));
        const res = new FakeResponse();
        await openFollowing(hub, res, {
          principal: 'alice',
          id: 'listen:1',
          filter: {
            toolsListChanged: true,
            promptsListChanged: true,
            resourcesListChanged: true,
            resourceSubscriptions: ['note://x', MARKER_URI],
            taskIds: ['t-1'],
          },
        });
        const raw = plainClient();
        for (const [, message] of BAD) await raw.publish(bus.channel, message);
        await raw.publish(bus.channel, event(MARKER));
        await waitFor(() => seen.some(isMarker), 'the marker');
        expect(seen).toStrictEqual([MARKER]);
        expect(updates(res, MARKER_URI)).toBe(1);
        expect(res.messages()).toHaveLength(1);
        // The invalid cancellations of alice's listen:1 ended nothing.
        expect(hub.stats().openStreams).toBe(1);
        expect(bus.stats()).toMatchObject({ connected: true, received: 1, dropped: BAD.length, published: 0 });
        expect(logger.warns).toHaveLength(1);
        expect(String(logger.warns[0]![0])).toContain('(not-json)');
        expect(logger.errors).toStrictEqual([]);
        expect(({} as Record<string, unknown>).polluted).toBeUndefined();
      },
    );

    test.each(LIBRARIES)(
      "a `__proto__` key in a task's state (the host's own data) is delivered, as the publishing node delivers it: an own key, no prototype changed (%s)",
      async (library) => {
        const channelPrefix = uniquePrefix();
        const bus = await node(library, channelPrefix);
        await connected(bus);
        const hub = hubOn(bus);
        const seen: SubscriptionEvent[] = [];
        hub.subscribeAll((event) => seen.push(event));
        const res = new FakeResponse();
        await openFollowing(hub, res, {
          principal: 'alice',
          id: 'listen:1',
          filter: { taskIds: ['t-1'], resourceSubscriptions: [MARKER_URI] },
        });
        const raw = plainClient();
        for (const key of ['"__proto__"', '"\\u005f_proto__"']) {
          await raw.publish(
            bus.channel,
            `{"v":1,"node":"another-node","type":"event","event":{"kind":"task_status","owner":"alice","task":{"taskId":"t-1","status":"completed",${key}:{"polluted":true},"result":{${key}:[]}}}}`,
          );
        }
        await raw.publish(bus.channel, event(MARKER));
        await waitFor(() => seen.some(isMarker), 'the marker');
        expect(seen).toHaveLength(3);
        for (const { task } of seen.slice(0, 2) as { task: Record<string, unknown> }[]) {
          expect(Object.hasOwn(task, '__proto__')).toBe(true);
          expect(Object.getPrototypeOf(task)).toBe(Object.prototype);
          expect(Object.hasOwn(task.result as object, '__proto__')).toBe(true);
        }
        const frames = res.events().map((e) => e.data);
        expect(frames).toHaveLength(3);
        for (const frame of frames.slice(0, 2)) expect(frame).toContain('"__proto__":{"polluted":true}');
        expect(bus.stats()).toMatchObject({ received: 3, dropped: 0 });
        expect(({} as Record<string, unknown>).polluted).toBeUndefined();
      },
    );

    test.each(LIBRARIES)(
      "a message in this node's name that it did not write is dropped and counted; one that begins as its own do is ignored unread (%s)",
      async (library) => {
        const channelPrefix = uniquePrefix();
        const nodeId = 'node-under-test';
        const bus = await node(library, channelPrefix, { nodeId });
        await connected(bus);
        const hub = hubOn(bus);
        const seen: SubscriptionEvent[] = [];
        hub.subscribeAll((event) => seen.push(event));
        const res = new FakeResponse();
        await openFollowing(hub, res, { filter: { toolsListChanged: true, resourceSubscriptions: [MARKER_URI] } });
        const tools = '"type":"event","event":{"kind":"tools_list_changed"}}';
        const raw = plainClient();
        for (const forged of [
          `{"node":"node-under-test","v":1,${tools}`,
          `{ "v":1, "node":"node-under-test", ${tools}`,
          `{"v":1,"node":"\\u006eode-under-test",${tools}`,
          `{"type":"ping","v":1,"node":"node-under-test"}`,
        ]) {
          await raw.publish(bus.channel, forged);
        }
        // Exactly as this node writes its own legacy copies: an echo is not parsed, so this one cannot be told from one.
        await raw.publish(bus.channel, `{"v":1,"node":"~2~node-under-test",${tools}`);
        // And as this node's messages on its own channels begin.
        await raw.publish(`${channelPrefix}:2:l:tools`, `{"v":2,"node":"node-under-test",${tools}`);
        await raw.publish(bus.channel, event(MARKER));
        await waitFor(() => seen.some(isMarker), 'the marker');
        expect(seen).toStrictEqual([MARKER]);
        expect(res.messages()).toHaveLength(1);
        expect(bus.stats()).toMatchObject({ received: 1, dropped: 4 });
      },
    );

    test.each(LIBRARIES)("a node's own publish is not delivered back to it (%s)", async (library) => {
      const channelPrefix = uniquePrefix();
      const a = await node(library, channelPrefix);
      const b = await node(library, channelPrefix);
      await connected(a, b);
      const [hubA, hubB] = [hubOn(a), hubOn(b)];
      const [resA, resB] = [new FakeResponse(), new FakeResponse()];
      const filter = { toolsListChanged: true as const, resourceSubscriptions: [MARKER_URI] };
      await openFollowing(hubA, resA, { filter });
      await openFollowing(hubB, resB, { filter });
      hubA.toolsListChanged();
      // Once B has it, Redis has sent it to every subscriber, A's included; B's marker comes after it.
      await waitFor(() => notified(resB, 'notifications/tools/list_changed') === 1, 'the event at B');
      hubB.resourceUpdated(MARKER_URI);
      await waitFor(() => updates(resA, MARKER_URI) === 1, 'the marker at A');
      expect(notified(resA, 'notifications/tools/list_changed')).toBe(1);
      await waitFor(() => a.stats().published === 1 && b.stats().published === 1, "Redis's replies to both publishes");
      expect(a.stats()).toMatchObject({ published: 1, received: 1, dropped: 0 });
      expect(b.stats()).toMatchObject({ published: 1, received: 1, dropped: 0 });
    });
  });

  test('an event published on one node reaches every stream of every node exactly once, in order, with one PUBLISH per event', async () => {
    const channelPrefix = uniquePrefix();
    // Two nodes with their own connections, of either library; node A serves two hubs.
    const a = await node('ioredis', channelPrefix);
    const b = await node('redis', channelPrefix);
    const tap = plainClient();
    const tapped: string[] = [];
    // Every channel of this release under the prefix: the key channels, and any other.
    tap.on('pmessage', (_pattern: string, _channel: string, message: string) => tapped.push(message));
    await tap.psubscribe(`${channelPrefix}:*`);
    await connected(a, b);
    const [a1, a2, b1] = [hubOn(a), hubOn(a), hubOn(b)];
    const uris = Array.from({ length: 50 }, (_, i) => `note://shared/${i}`);
    const filter = { resourceSubscriptions: [...uris, MARKER_URI] };
    const streams = await Promise.all(
      [a1, a1, a2, b1, b1].map(async (hub, i) => {
        const res = new FakeResponse();
        await openFollowing(hub, res, { id: `s${i}`, filter });
        return res;
      }),
    );
    for (const uri of uris) a1.resourceUpdated(uri);
    a1.resourceUpdated(MARKER_URI);
    await waitFor(() => streams.every((res) => updates(res, MARKER_URI) === 1), 'the marker on every stream');
    for (const res of streams) {
      expect(res.messages().map((m: any) => m.params.uri)).toStrictEqual([...uris, MARKER_URI]);
    }
    await waitFor(() => tapped.length === uris.length + 1, 'every message at the tap');
    expect(tapped).toHaveLength(uris.length + 1);
    // Redis's replies reach A's publisher on their own connection, maybe after the tap had the messages.
    await waitFor(() => a.stats().published === uris.length + 1, "Redis's replies to A's publishes");
    expect(a.stats()).toMatchObject({ published: uris.length + 1, received: 0, dropped: 0 });
    expect(b.stats()).toMatchObject({ published: 0, received: uris.length + 1, dropped: 0 });
  });

  test.each([
    ['ioredis', 'redis'],
    ['redis', 'ioredis'],
  ] as const)(
    'a cancellation received by one node ends the stream another node holds, for that principal only (%s → %s)',
    async (holding, receiving) => {
      const channelPrefix = uniquePrefix();
      const a = await node(holding, channelPrefix);
      const b = await node(receiving, channelPrefix);
      await connected(a, b);
      const [hubA, hubB] = [hubOn(a), hubOn(b)];
      const alices = new FakeResponse();
      const bobs = new FakeResponse();
      await openFollowing(hubA, alices, { principal: 'alice', id: 'listen:1' });
      await openFollowing(hubA, bobs, { principal: 'bob', id: 'listen:1' });
      expect(hubEngine(hubB).cancel('mallory', 'listen:1')).toBe(0);
      expect(hubEngine(hubB).cancel('alice', 'listen:1')).toBe(0);
      await waitFor(() => hubA.stats().closed.cancelled === 1, "alice's stream cancelled on the node that holds it");
      expect(alices.destroyed).toBe(true);
      expect(bobs.destroyed).toBe(false);
      expect(hubA.openByPrincipal()).toStrictEqual({ bob: 1 });
      // Mallory's cancellation travels on mallory's channel, which no node follows: A never hears it.
      expect(a.stats()).toMatchObject({ received: 1, dropped: 0 });
    },
  );

  describe("an event's context (publish time, W3C trace context)", () => {
    const TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const TOOLS: SubscriptionEvent = { kind: 'tools_list_changed' };
    /** A member that follows the tools list and the marker, and records what reaches it with its context. */
    async function recorder(bus: RedisBus) {
      const seen: [SubscriptionEvent, EventContext | undefined][] = [];
      const member = bus.join({ event: (event, context) => seen.push([event, context]), cancel: noop });
      await followed(member, { lists: ['tools_list_changed'], uris: [MARKER_URI], taskIds: [] });
      return { member, seen };
    }

    test('travels in the v2 message only: the copy a first-release node gets is the first release’s message, exactly', async () => {
      const channelPrefix = uniquePrefix();
      const a = await node('ioredis', channelPrefix);
      const b = await node('redis', channelPrefix);
      // A first-release node, as this release counts one: a subscriber of the legacy channel alone.
      const firstRelease = plainClient();
      const copies: string[] = [];
      firstRelease.on('message', (_channel: string, message: string) => copies.push(message));
      await firstRelease.subscribe(a.channel);
      const tap = plainClient();
      const written: string[] = [];
      tap.on('pmessage', (_pattern: string, _channel: string, message: string) => written.push(message));
      await tap.psubscribe(`${channelPrefix}:2:l:*`);
      await connected(a, b);
      await waitFor(() => a.stats().legacyNodes === 1, 'the first-release node counted', 5000);
      const atB = await recorder(b);
      const publisher = a.join({ event: noop, cancel: noop });
      const context = { publishedAt: 1764650000123.5, traceparent: TRACEPARENT, tracestate: 'rojo=00f067aa0ba902b7' };
      publisher.publish(TOOLS, context);
      publisher.publish(TOOLS);
      await waitFor(() => atB.seen.length === 2 && copies.length === 2 && written.length === 2, 'both events');
      expect(atB.seen).toStrictEqual([
        [TOOLS, context],
        [TOOLS, undefined],
      ]);
      expect(written.map((message) => JSON.parse(message) as unknown)).toStrictEqual([
        {
          v: 2,
          node: a.nodeId,
          type: 'event',
          event: TOOLS,
          at: context.publishedAt,
          trace: { traceparent: TRACEPARENT, tracestate: context.tracestate },
        },
        { v: 2, node: a.nodeId, type: 'event', event: TOOLS },
      ]);
      const copy = { v: 1, node: `~2~${a.nodeId}`, type: 'event', event: TOOLS };
      expect(copies.map((message) => JSON.parse(message) as unknown)).toStrictEqual([copy, copy]);
    });

    test('an event that fits the 4 MiB bound alone, but not with its context, travels without the context', async () => {
      const channelPrefix = uniquePrefix();
      const a = await node('ioredis', channelPrefix);
      const b = await node('redis', channelPrefix);
      await connected(a, b);
      const seen: [SubscriptionEvent, EventContext | undefined][] = [];
      const member = b.join({ event: (event, context) => seen.push([event, context]), cancel: noop });
      await followed(member, { lists: [], uris: [], taskIds: ['t-big'] });
      const task = (statusMessage: string): SubscriptionEvent => ({
        kind: 'task_status',
        owner: 'alice',
        task: {
          taskId: 't-big',
          status: 'completed',
          statusMessage,
          createdAt: '2026-12-02T00:00:00Z',
          lastUpdatedAt: '2026-12-02T00:00:00Z',
          ttlMs: null,
        },
      });
      const envelope = JSON.stringify({ v: 2, node: a.nodeId, type: 'event', event: task('') });
      // 50 bytes under the bound alone; the context's `at` and `trace` take it over.
      const big = task('x'.repeat(MAX_MESSAGE_BYTES - Buffer.byteLength(envelope) - 50));
      const publisher = a.join({ event: noop, cancel: noop });
      publisher.publish(big, { publishedAt: Date.now(), traceparent: TRACEPARENT });
      await waitFor(() => seen.length === 1, 'the event on node B', 10_000);
      expect(seen[0]?.[1]).toBeUndefined();
      expect(seen[0]?.[0]).toStrictEqual(big);
      expect(a.stats()).toMatchObject({ published: 1, dropped: 0 });
    });

    test.each(LIBRARIES)(
      'a message whose context breaks the rules reaches no member: dropped and counted, the first logged; a valid one arrives with it (%s)',
      async (library) => {
        const channelPrefix = uniquePrefix();
        const logger = recordingLogger();
        const bus = await node(library, channelPrefix, { logger });
        await connected(bus);
        const atBus = await recorder(bus);
        const head = '{"v":2,"node":"another-node","type":"event","event":{"kind":"tools_list_changed"}';
        const bad = [
          ',"at":-1',
          ',"at":"1764650000123"',
          `,"trace":"${TRACEPARENT}"`,
          `,"trace":{"traceparent":"${TRACEPARENT.toUpperCase()}"}`,
          `,"trace":{"traceparent":"00-${'0'.repeat(32)}-00f067aa0ba902b7-01"}`,
          `,"trace":{"traceparent":"${TRACEPARENT}","tracestate":"${'x'.repeat(513)}"}`,
          `,"trace":{"traceparent":"${TRACEPARENT}","tracestate":"a=1\\r\\nb=2"}`,
          `,"trace":{"traceparent":"${TRACEPARENT}","__proto__":{"polluted":true}}`,
          ',"context":{}',
        ];
        const raw = plainClient();
        const channel = `${channelPrefix}:2:l:tools`;
        for (const members of bad) await raw.publish(channel, `${head}${members}}`);
        await raw.publish(channel, `${head},"at":1764650000123,"trace":{"traceparent":"${TRACEPARENT}"}}`);
        await raw.publish(bus.channel, JSON.stringify({ v: 1, node: 'another-node', type: 'event', event: MARKER }));
        await waitFor(() => atBus.seen.some(([event]) => isMarker(event)), 'the marker');
        expect(atBus.seen).toStrictEqual([
          [TOOLS, { publishedAt: 1764650000123, traceparent: TRACEPARENT }],
          [MARKER, undefined],
        ]);
        expect(bus.stats()).toMatchObject({ connected: true, received: 2, dropped: bad.length });
        expect(logger.warns).toHaveLength(1);
        expect(String(logger.warns[0]![0])).toContain('(context)');
        expect(logger.errors).toStrictEqual([]);
        expect(({} as Record<string, unknown>).polluted).toBeUndefined();
      },
    );
  });

  describe('close()', () => {
    test.each(LIBRARIES)('quits the two connections it created from a URL, and is idempotent (%s)', async (library) => {
      const channelPrefix = uniquePrefix();
      const bus = await node(`url:${library}`, channelPrefix);
      await connected(bus);
      const admin = plainClient();
      const ours = async (): Promise<string[]> =>
        String(await admin.call('CLIENT', 'LIST'))
          .split('\n')
          .map((line) => /(?:^| )name=(\S*)/.exec(line)?.[1] ?? '')
          .filter((name) => name.startsWith(`${channelPrefix}:${bus.nodeId}:`))
          .sort();
      expect(await ours()).toStrictEqual([`${channelPrefix}:${bus.nodeId}:pub`, `${channelPrefix}:${bus.nodeId}:sub`]);
      const first = bus.close();
      expect(bus.close()).toBe(first);
      await first;
      await bus.close();
      const deadline = Date.now() + 5000;
      while ((await ours()).length > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      expect(await ours()).toStrictEqual([]);
      expect(bus.stats().connected).toBe(false);
    });

    test.each(LIBRARIES)("leaves the caller's connections open and usable, unsubscribed (%s)", async (library) => {
      const channelPrefix = uniquePrefix();
      const { publisher, subscriber } = await callerClients(library);
      const listeners = (client: RedisClient) =>
        (client as unknown as { listenerCount(e: string): number }).listenerCount('error');
      const before = [listeners(publisher), listeners(subscriber)];
      const bus = new RedisBus({ publisher, subscriber, channelPrefix, logger: recordingLogger() });
      await connected(bus);
      const admin = plainClient();
      const subscribers = async () => ((await admin.call('PUBSUB', 'NUMSUB', bus.channel)) as [string, number])[1];
      expect(await subscribers()).toBe(1);
      await bus.close();
      await bus.close();
      expect(await subscribers()).toBe(0);
      expect([listeners(publisher), listeners(subscriber)]).toStrictEqual(before);
      if (library === 'ioredis') {
        expect([(publisher as Redis).status, (subscriber as Redis).status]).toStrictEqual(['ready', 'ready']);
      } else {
        expect([
          (publisher as { isReady: boolean }).isReady,
          (subscriber as { isReady: boolean }).isReady,
        ]).toStrictEqual([true, true]);
      }
      expect(await publisher.publish(`${channelPrefix}:other`, 'still usable')).toBe(0);
    });

    test('two buses on one caller subscriber: closing one leaves the other subscribed', async () => {
      const { publisher, subscriber } = await callerClients('ioredis');
      const channelPrefix = uniquePrefix();
      const [first, second] = [1, 2].map(
        () => new RedisBus({ publisher, subscriber, channelPrefix, logger: recordingLogger() }),
      ) as [RedisBus, RedisBus];
      const other = await node('redis', channelPrefix);
      await connected(first, second, other);
      await first.close();
      const seen: SubscriptionEvent[] = [];
      await followed(second.join({ event: (event) => seen.push(event), cancel: noop }), {
        lists: [],
        uris: [MARKER_URI],
        taskIds: [],
      });
      other.join({ event: noop, cancel: noop }).publish(MARKER);
      await waitFor(() => seen.some(isMarker), 'the marker at the bus still open');
      await second.close();
    });
  });
});

describeUnless(serverMissing)("RedisBus when Redis goes away (a redis-server of the test's own)", () => {
  const servers: OwnRedis[] = [];
  afterAll(async () => {
    // Clients first, while their servers still answer: node-redis keeps a client destroyed while it
    // waits to reconnect alive until that wait ends.
    await cleanUp();
    for (const server of servers) await server.stop();
  });
  const ownServer = async (): Promise<OwnRedis> => {
    const server = await OwnRedis.start();
    servers.push(server);
    return server;
  };

  // First: node-redis keeps a client destroyed while it waits to reconnect alive until that wait (at most
  // 2.2 s, not unref'd) ends, and the tests after this one outlast it.
  test.each(LIBRARIES)('a hub and its bus close promptly while Redis is down (%s)', async (library) => {
    const server = await ownServer();
    const channelPrefix = uniquePrefix();
    const owned = await node(`url:${library}`, channelPrefix, { url: server.url });
    const callers = await node(library, channelPrefix, { url: server.url });
    await connected(owned, callers);
    const hubs = [hubOn(owned), hubOn(callers)];
    for (const hub of hubs) await openFollowing(hub, new FakeResponse());
    await server.stop();
    await waitFor(() => !owned.stats().connected && !callers.stats().connected, 'both disconnected', 10_000);
    const started = Date.now();
    for (const hub of hubs) await hub.close();
    await Promise.all([owned.close(), callers.close()]);
    expect(Date.now() - started).toBeLessThan(2500);
    expect(unhandled.rejections).toStrictEqual([]);
  });

  test.each(LIBRARIES)(
    'an outage: local delivery goes on, nothing throws or queues, one report; then cross-node delivery resumes without a restart (%s)',
    async (library) => {
      const server = await ownServer();
      const channelPrefix = uniquePrefix();
      const messages: RedisConnectionMessage[] = [];
      const onConnection = (message: unknown): void => void messages.push(message as RedisConnectionMessage);
      diagnostics.subscribe(RedisBusChannel.Connection, onConnection);
      try {
        const [loggerA, loggerB] = [recordingLogger(), recordingLogger()];
        // Node A on the caller's clients (offline queues on, as by default), node B on its own.
        const a = await node(library, channelPrefix, { url: server.url, logger: loggerA });
        const b = await node(`url:${library}`, channelPrefix, { url: server.url, logger: loggerB });
        await connected(a, b);
        const [hubA, hubB] = [hubOn(a), hubOn(b)];
        const [resA, resB] = [new FakeResponse(), new FakeResponse()];
        const filter = { resourceSubscriptions: ['note://before', 'note://during', 'note://after', MARKER_URI] };
        await openFollowing(hubA, resA, { filter });
        await openFollowing(hubB, resB, { filter });
        hubA.resourceUpdated('note://before');
        await waitFor(() => updates(resB, 'note://before') === 1, 'the event at B before the outage');

        await server.stop();
        await waitFor(() => !a.stats().connected && !b.stats().connected, 'both nodes disconnected', 10_000);
        for (let i = 0; i < 5; i++) {
          expect(hubA.resourceUpdated('note://during')).toMatchObject({ matched: 1 });
          expect(() => hubEngine(hubA).cancel('alice', `gone:${i}`)).not.toThrow();
        }
        await waitFor(() => updates(resA, 'note://during') === 5, 'local delivery during the outage');
        expect(a.stats().dropped).toBeGreaterThanOrEqual(10);
        expect(loggerA.errors).toHaveLength(1);
        expect(loggerB.errors).toHaveLength(1);
        expect(String(loggerA.errors[0]![0])).toContain('Redis is unreachable');

        // Down for a while: the clients fail to reconnect several times, and that is still one outage.
        await new Promise((resolve) => setTimeout(resolve, 1500));
        expect(loggerA.errors).toHaveLength(1);
        await server.start();
        await waitFor(() => a.stats().connected && b.stats().connected, 'both nodes back', 20_000);
        expect(a.stats().reconnects).toBe(1);
        expect(b.stats().reconnects).toBe(1);
        // Each node's subscriptions came back after a gap: its stream is told, once per key, that what it
        // follows may have changed meanwhile (before the bus says it is connected again).
        expect(a.stats().resyncs).toBeGreaterThanOrEqual(1);
        expect(b.stats().resyncs).toBeGreaterThanOrEqual(1);
        expect(updates(resB, 'note://before')).toBe(2);
        const [markersA, markersB] = [updates(resA, MARKER_URI), updates(resB, MARKER_URI)];
        expect([markersA, markersB]).toStrictEqual([1, 1]);
        hubA.resourceUpdated('note://after');
        hubA.resourceUpdated(MARKER_URI);
        await waitFor(() => updates(resB, MARKER_URI) === markersB + 1, 'A → B after the outage');
        hubB.resourceUpdated(MARKER_URI);
        await waitFor(() => updates(resA, MARKER_URI) === markersA + 2, 'B → A after the outage');
        // What A published during the outage is not replayed event by event: its latest change was
        // published once A was back (B may have heard it, or resynced the key itself, or both). Either way
        // B's stream learned of it; nothing else was sent twice.
        expect(updates(resB, 'note://during')).toBeGreaterThanOrEqual(1);
        expect(updates(resB, 'note://during')).toBeLessThanOrEqual(2);
        expect(a.stats().republished).toBe(1);
        expect(a.stats().unsent).toBe(0);
        expect([updates(resB, 'note://before'), updates(resB, 'note://after')]).toStrictEqual([2, 2]);
        expect(loggerA.errors).toHaveLength(1);
        expect(loggerB.errors).toHaveLength(1);
        const ofA = messages.filter((message) => message.nodeId === a.nodeId).map((message) => message.connected);
        expect(ofA).toStrictEqual([true, false, true]);
        expect(messages.find((message) => message.nodeId === b.nodeId)?.channel).toBe(b.channel);
      } finally {
        diagnostics.unsubscribe(RedisBusChannel.Connection, onConnection);
      }
      expect(unhandled.rejections).toStrictEqual([]);
    },
    60_000,
  );

  test('a bus started while Redis is down reports it once, and connects when it comes', async () => {
    const server = await ownServer();
    await server.stop();
    const logger = recordingLogger();
    const bus = await node('url:ioredis', uniquePrefix(), { url: server.url, logger });
    await waitFor(() => logger.errors.length === 1, 'the report');
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(logger.errors).toHaveLength(1);
    await server.start();
    await connected(bus);
    expect(bus.stats()).toMatchObject({ connected: true, reconnects: 0 });
  });
});

describe('RedisBus options', () => {
  // Clients that never connect: option checks need no Redis.
  const lazy = (): Redis => {
    const client = new Redis({ lazyConnect: true });
    cleanups.push(() => client.disconnect());
    return client;
  };
  const codeOf = (options: unknown): unknown => {
    try {
      new RedisBus(options as RedisBusOptions);
    } catch (error) {
      return (error as { code?: unknown }).code;
    }
    return 'no error';
  };

  test('each mistake throws its own code at construction', () => {
    const publisher = lazy();
    const subscriber = lazy();
    const pair = { publisher, subscriber };
    const cases: [unknown, string][] = [
      [undefined, ErrorCode.OptionsNotObject],
      [{}, ErrorCode.MissingOption],
      [{ publisher }, ErrorCode.MissingOption],
      [{ subscriber }, ErrorCode.MissingOption],
      [{ publisher, subscriber: publisher }, ErrorCode.SameRedisConnection],
      [{ publisher: {}, subscriber }, ErrorCode.InvalidRedisClient],
      [{ publisher, subscriber: 'redis://127.0.0.1' }, ErrorCode.InvalidRedisClient],
      // A cluster client and a client of one server do not make a pair (a cluster takes cluster clients).
      [{ publisher: new Cluster([{ port: 7000 }], { lazyConnect: true }), subscriber }, ErrorCode.InvalidRedisClient],
      [{ publisher: createCluster({ rootNodes: [{ url: REDIS_URL }] }), subscriber }, ErrorCode.InvalidRedisClient],
      [{ ...pair, channelPrefix: '' }, ErrorCode.InvalidChannelPrefix],
      [{ ...pair, channelPrefix: 7 }, ErrorCode.InvalidChannelPrefix],
      [{ ...pair, routing: 'everywhere' }, ErrorCode.InvalidRouting],
      [{ ...pair, routing: { buckets: 0 } }, ErrorCode.InvalidRouting],
      [{ ...pair, resync: 'yes' }, ErrorCode.NotBoolean],
      [{ ...pair, nodeId: '' }, ErrorCode.InvalidNodeId],
      [{ ...pair, nodeId: null }, ErrorCode.InvalidNodeId],
      [{ ...pair, nodeId: 'n'.repeat(201) }, ErrorCode.InvalidNodeId],
      [{ ...pair, logger: {} }, ErrorCode.InvalidLogger],
      [{ ...pair, chanelPrefix: 'x' }, ErrorCode.UnknownOption],
      [{ ...pair, client: 'redis' }, ErrorCode.ConflictingOptions],
      [{ url: REDIS_URL, publisher }, ErrorCode.ConflictingOptions],
      [{ url: 'http://127.0.0.1:6379' }, ErrorCode.InvalidRedisUrl],
      [{ url: 'not a url' }, ErrorCode.InvalidRedisUrl],
      [{ url: 6379 }, ErrorCode.InvalidRedisUrl],
      [{ url: REDIS_URL, client: 'node-redis' }, ErrorCode.NotOneOf],
    ];
    expect(cases.map(([options]) => codeOf(options))).toStrictEqual(cases.map(([, code]) => code));
    // Accepted: both libraries, and a node-redis client not connected yet.
    for (const options of [
      pair,
      { publisher: createClient(), subscriber: createClient() },
      { publisher, subscriber: createClient() },
    ]) {
      expect(codeOf({ ...options, channelPrefix: uniquePrefix() })).toBe('no error');
    }
  });

  test('messages name the field and suggest the key meant, and never quote a URL', () => {
    const pair = { publisher: lazy(), subscriber: lazy() };
    expect(() => new RedisBus({ ...pair, chanelPrefix: 'x' } as never)).toThrow(
      'mcp-subscriptions: Unknown option `chanelPrefix` of new RedisBus(); did you mean `channelPrefix`?',
    );
    expect(() => new RedisBus({ ...pair, channelPrefix: '' })).toThrow(
      'mcp-subscriptions: Expected `channelPrefix` to be a non-empty string, got `` (string)',
    );
    expect(() => new RedisBus({ publisher: pair.publisher, subscriber: pair.publisher })).toThrow(
      'publisher.duplicate()',
    );
    let message = '';
    try {
      new RedisBus({ url: 'http://user:s3cret@127.0.0.1' });
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toContain('redis://');
    expect(message).not.toContain('s3cret');
  });

  test('the caller-client types accept real ioredis and node-redis clients (checked by tsc)', () => {
    const options: RedisBusOptions[] = [
      { publisher: lazy(), subscriber: lazy() },
      { publisher: createClient(), subscriber: createClient() },
      { url: REDIS_URL, client: 'redis' },
    ];
    expect(options).toHaveLength(3);
  });
});

describe('RedisBus({ url }) without a client library installed', () => {
  // The engine and the Redis adapter copied where no node_modules is above them: the dynamic import
  // of ioredis and redis fails for real, as in an app that installed neither.
  test('reports a coded OptionsError through the logger, once, and delivers locally', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'mcp-subscriptions-no-redis-'));
    try {
      cpSync(path.join(REPO_ROOT, 'lib'), path.join(dir, 'lib'), { recursive: true });
      cpSync(path.join(REPO_ROOT, 'adapters', 'redis'), path.join(dir, 'adapters', 'redis'), { recursive: true });
      writeFileSync(path.join(dir, 'package.json'), '{ "type": "module" }\n');
      writeFileSync(
        path.join(dir, 'probe.ts'),
        `
import { SubscriptionHub } from './lib/index.ts';
import { RedisBus } from './adapters/redis/index.ts';
const reports: unknown[] = [];
const logger = { warn: () => {}, error: (message: string, details?: { error?: { code?: string } }) => reports.push([message, details?.error?.code]) };
for (const client of [undefined, 'ioredis', 'redis'] as const) {
  const bus = new RedisBus({ url: 'redis://127.0.0.1:6379', logger, ...(client ? { client } : {}) });
  const hub = new SubscriptionHub({ bus, logger });
  hub.toolsListChanged();
  await new Promise((resolve) => setTimeout(resolve, 200));
  reports.push(bus.stats());
  await hub.close();
  await bus.close();
}
console.log(JSON.stringify(reports));
`,
      );
      const out = execFileSync(process.execPath, ['--import', 'tsx', path.join(dir, 'probe.ts')], {
        cwd: REPO_ROOT,
        encoding: 'utf8',
        timeout: 30_000,
      });
      const reports = JSON.parse(out) as unknown[];
      const stats = {
        connected: false,
        routing: 'interest',
        published: 0,
        received: 0,
        dropped: 1,
        reconnects: 0,
        resubscribes: 0,
        resyncs: 0,
        republished: 0,
        subscriptions: 0,
        unsubscribed: 0,
        // The event that could not go out, kept for a Redis that never comes: bounded by key.
        unsent: 1,
        legacyNodes: 0,
      };
      expect(reports).toStrictEqual([
        [
          expect.stringContaining('neither `ioredis` nor `redis` is installed: `npm install ioredis` (or `redis`)'),
          ErrorCode.RedisClientMissing,
        ],
        stats,
        [
          expect.stringContaining('needs `ioredis`, which is not installed: `npm install ioredis`'),
          ErrorCode.RedisClientMissing,
        ],
        stats,
        [
          expect.stringContaining('needs `redis`, which is not installed: `npm install redis`'),
          ErrorCode.RedisClientMissing,
        ],
        stats,
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
