/**
 * Issue #14, faults: one of two sample instances joined over Redis dies abruptly (`kill -9`) while the
 * other keeps serving. This file proves, for each sample:
 *
 * 1. the dead instance's streams end without a terminal result: its clients see `'lost'`, not
 *    `'complete'`, within the contract's 5 s of the kill;
 * 2. the survivor is untouched: its streams stay open and get every event written on it, once each and
 *    in order; it acknowledges new listens, answers writes, and logs nothing (Redis never went away,
 *    so there is nothing to report);
 * 3. a `notifications/cancelled` sent to the survivor for a stream that was on the dead instance gets
 *    the answer of any unknown stream (it goes on to the host's MCP server), and closes none of the
 *    survivor's streams;
 * 4. the dead instance, restarted on the same port with the same `REDIS_URL`, rejoins: events cross
 *    both ways again, and a client with `reconnect` on that listened to it re-listens, learns of the gap,
 *    then gets the events of both instances;
 * 5. the survivor still stops within the contract's 5 s of SIGTERM, exit 0, its streams completed.
 *
 * Black-box, like the REDIS_URL rows of test/system/contract.test.ts: the samples run as child processes
 * exactly as `npm start` / `npm run start:nest` do, on a redis-server of this file's own, and
 * notifications are read with the package's own listen client over real HTTP on loopback. Absence is
 * never proven by waiting: every watched stream also follows a "sentinel" shared note, and after an
 * action the test fires the sentinel through the instance whose events must have arrived first (one
 * instance's events keep their order across Redis; two instances' need not).
 */
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { performance } from 'node:perf_hooks';
import { listen, type ListenFilter, type ListenSubscription, type SubscriptionItem } from 'mcp-subscriptions/client';
import { bearer } from '../helpers/bearer.ts';
import { ownRedisSkipReason } from '../helpers/redis.ts';
import {
  CONTRACT_EXIT_MS,
  postCancel,
  putNote,
  startRedis,
  startSample,
  stopAllSamples,
  TOKENS,
  type RedisServer,
  type SampleApp,
  type SampleKind,
} from '../helpers/sample-app.ts';
import { Sentinel, watcher, type Watch } from '../helpers/sentinel.ts';
import { describeUnless } from '../helpers/skip.ts';
import { twoInstances, warm } from '../helpers/two-instances.ts';
import { uid } from '../helpers/uid.ts';

const SAMPLES: readonly SampleKind[] = ['express', 'nest'];

/**
 * These cases start redis-servers of their own. Without redis-server on the machine they are skipped,
 * saying so, except in CI, where they must run (.ci/run installs it): there, the missing server fails
 * the setup instead.
 */
const describeWithRedis = describeUnless(ownRedisSkipReason('these'));

const TOOLS = 'notifications/tools/list_changed';
const UPDATED = 'notifications/resources/updated';

/** Notes written on the survivor from the moment of the kill: one update each, none coalescible. */
const BURST = 20;
/** The re-listening client's backoff: short, so that it finds the restarted instance at once. */
const RECONNECT = { initialDelayMs: 50, maxDelayMs: 250 };
/** How long one awaited item may take: the bound the contract suite gives `waitFor()`. */
const ITEM_MS = 5000;

const { alice, bob, carol } = TOKENS;

/** Subscriptions opened by the file, closed after each sample's block (idempotent for ended ones). */
const opened: ListenSubscription[] = [];

afterAll(async () => {
  await Promise.all(opened.splice(0).map((subscription) => subscription.close()));
  await stopAllSamples();
});

/** `promise`, or a rejection naming `what` once `ms` have passed: a fault must not turn into a hang. */
async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${Math.round(ms)} ms waiting for ${what}`)), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * A listen with the package's client. The buffer is far above what any step sends between two reads:
 * every notification must be seen (`Watch.next()` checks that none was dropped).
 */
async function subscribe(
  app: SampleApp,
  token: string | undefined,
  id: string | number,
  filter: ListenFilter,
  reconnect: false | typeof RECONNECT = false,
): Promise<ListenSubscription> {
  const subscription = await listen(app.url, filter, { headers: bearer(token), id, maxBuffer: 10_000, reconnect });
  opened.push(subscription);
  return subscription;
}

/** The survivor's hub, as the stats route shows it. */
async function stats(app: SampleApp): Promise<{ openStreams: number; closed: Record<string, number> }> {
  const res = await app.api(alice, 'GET', '/api/subscriptions/stats');
  expect(res.status).toBe(200);
  return res.body as { openStreams: number; closed: Record<string, number> };
}

/** POSTs `notifications/cancelled` for listen `id` as the holder of `token`; the answer as read. */
async function cancelAnswer(
  app: SampleApp,
  token: string,
  id: string,
): Promise<{ status: number; contentType: string | null; body: string }> {
  const res = await postCancel(app, token, id);
  return { status: res.status, contentType: res.headers.get('content-type'), body: await res.text() };
}

const watchWithSentinel = watcher(subscribe);

/** A watch whose filter, readable in full, must be acknowledged in full: one that leaves anything out is a failure. */
async function watch(...[app, sentinel, token, id, filter]: Parameters<typeof watchWithSentinel>): Promise<Watch> {
  const watched = await watchWithSentinel(app, sentinel, token, id, filter);
  const uris = filter.resourceSubscriptions ?? [];
  expect(watched.subscription.honored).toStrictEqual({ ...filter, resourceSubscriptions: [...uris, sentinel.uri] });
  return watched;
}

/** The next item of a subscription's iterator, within {@link ITEM_MS}. */
async function nextItem(items: AsyncIterator<SubscriptionItem, undefined>, what: string): Promise<SubscriptionItem> {
  const { value } = await within(items.next(), ITEM_MS, what);
  if (value === undefined) throw new Error(`the subscription finished while waiting for ${what}`);
  return value;
}

for (const kind of SAMPLES) {
  describeWithRedis(`kill -9 of one of two ${kind} samples joined over Redis`, () => killOneOfTwo(kind));
}

/** The cases for one sample, in order: each step goes on from where the one before left the instances. */
function killOneOfTwo(kind: SampleKind): void {
  let redis: RedisServer;
  /** The survivor, the instance killed, and the killed one restarted on its port. */
  let a: SampleApp;
  let b: SampleApp;
  let newB: SampleApp | undefined;
  let sentinel: Sentinel;
  /** The survivor's watched streams: alice's with two ids, and bob's with the id of alice's stream on b. */
  let burstOnA: Watch;
  let listsOnA: Watch[];
  /** Everything the survivor serves (probes too): all must still be open until it stops. */
  let allOnA: ListenSubscription[];
  /** Streams on the instance killed, without reconnect. */
  let onB: ListenSubscription[];
  /** Alice's listen id on b: a cancellation sent to a for it is one meant for the dead instance. */
  const deadId = uid('dead');
  /** Alice's client with reconnect on, listening to b; and what it follows, written on a and on b. */
  let reconnecting: ListenSubscription;
  let items: AsyncIterator<SubscriptionItem, undefined>;
  const writtenOnA = `note://alice/${uid('rc-a')}`;
  const writtenOnB = `note://alice/${uid('rc-b')}`;
  const burst = Array.from({ length: BURST }, () => `note://alice/${uid('burst')}`);
  let openOnABefore: number;
  /** When b was killed, and the survivor's writes that started at that moment. */
  let killedAt: number;
  let writing: Promise<number[]>;

  beforeAll(async () => {
    const server = await startRedis();
    // Under CI, a missing redis-server fails here rather than skipping (see describeWithRedis).
    if (server === undefined) throw new Error('redis-server could not be started: is it installed?');
    redis = server;
    [a, b] = await twoInstances(kind, redis.url, 'SIGKILL');
    sentinel = Sentinel.named(a);
    await sentinel.createOn(a);
    await sentinel.createOn(b);
    const probes = await warm(a, b, subscribe);

    burstOnA = await watch(a, sentinel, alice, uid('burst-on-a'), { resourceSubscriptions: burst });
    listsOnA = [
      await watch(a, sentinel, alice, uid('lists-on-a'), { toolsListChanged: true }),
      // Same id as alice's stream on b, another principal: a cancellation of alice's must pass it by.
      await watch(a, sentinel, bob, deadId, { toolsListChanged: true }),
    ];
    const onBWatches = [
      await watch(b, sentinel, alice, deadId, { toolsListChanged: true }),
      await watch(b, sentinel, bob, uid('bob-on-b'), { toolsListChanged: true }),
    ];
    reconnecting = await subscribe(
      b,
      alice,
      uid('reconnecting'),
      { resourceSubscriptions: [writtenOnA, writtenOnB] },
      RECONNECT,
    );
    items = reconnecting[Symbol.asyncIterator]();

    // Joined, both ways, before the fault: a change on either instance reaches the streams on both.
    for (const origin of [b, a]) {
      expect((await origin.api(bob, 'POST', '/api/catalog/tools')).status).toBe(202);
      await sentinel.fire(origin);
      for (const watcher of [...listsOnA, ...onBWatches]) expect(await watcher.next()).toStrictEqual([TOOLS]);
      expect(await burstOnA.next()).toStrictEqual([]);
    }
    expect((await putNote(b, alice, writtenOnB, 'before')).status).toBe(201);
    expect(await nextItem(items, 'the update written on b')).toMatchObject({ params: { uri: writtenOnB } });
    expect((await putNote(a, alice, writtenOnA, 'before')).status).toBe(201);
    expect(await nextItem(items, 'the update written on a')).toMatchObject({ params: { uri: writtenOnA } });

    allOnA = [burstOnA, ...listsOnA].map((watcher) => watcher.subscription).concat(probes[0]!);
    onB = onBWatches.map((watcher) => watcher.subscription).concat(probes[1]!);
    openOnABefore = (await stats(a)).openStreams;
    expect(openOnABefore).toBe(allOnA.length);

    killedAt = performance.now();
    b.child.kill('SIGKILL');
    // The survivor's writes start at the moment of the kill, while b's sockets and Redis connections die.
    writing = (async () => {
      const statuses: number[] = [];
      for (const uri of burst) statuses.push((await putNote(a, alice, uri, 'burst')).status);
      return statuses;
    })();
    writing.catch(() => {}); // awaited, and reported, by the test of the survivor
  }, 90_000); // two samples and a redis-server to start (startSample allows each 30 s)

  afterAll(async () => {
    await Promise.all(opened.splice(0).map((subscription) => subscription.close()));
    for (const app of [a, b, newB]) await app?.stop('SIGKILL');
    await redis?.stop();
  });

  it("the killed instance's streams end without a terminal result ('lost'), within the contract's 5 s", async () => {
    const left = CONTRACT_EXIT_MS - (performance.now() - killedAt);
    const reasons = await within(
      Promise.all(onB.map((subscription) => subscription.ended)),
      left,
      `the ${onB.length} streams on the killed instance to end`,
    );
    expect(reasons).toStrictEqual(onB.map(() => 'lost'));
    expect(await within(b.exited, CONTRACT_EXIT_MS, 'the killed instance to exit')).toBe(null);
    expect(b.child.signalCode).toBe('SIGKILL');
    // The client with reconnect on does not end: it is re-listening.
    expect(reconnecting.endReason).toBe(undefined);
  });

  it('the survivor keeps serving: every event written on it arrives, in order; new listens, writes, no log', async () => {
    expect(await writing).toStrictEqual(burst.map(() => 201));
    await sentinel.fire(a);
    // One update per note, each once, in the order written: nothing lost, nothing doubled by the fault.
    expect(await burstOnA.next({ ordered: true })).toStrictEqual(burst.map((uri) => `${UPDATED} ${uri}`));
    for (const watcher of listsOnA) expect(await watcher.next()).toStrictEqual([]);

    // A new listen is acknowledged in full, and hears what is written next.
    const fresh = await watch(a, sentinel, carol, uid('fresh-on-a'), { toolsListChanged: true });
    allOnA.push(fresh.subscription);
    listsOnA.push(fresh);
    expect((await a.api(carol, 'POST', '/api/catalog/tools')).status).toBe(202);
    await sentinel.fire(a);
    for (const watcher of listsOnA) expect(await watcher.next()).toStrictEqual([TOOLS]);
    expect(await burstOnA.next()).toStrictEqual([]);

    // None of its streams ended, and it said nothing: a peer leaving Redis is no fault of this instance.
    expect(allOnA.map((subscription) => subscription.endReason)).toStrictEqual(allOnA.map(() => undefined));
    expect((await stats(a)).openStreams).toBe(openOnABefore + 1);
    expect(a.child.exitCode).toBe(null);
    expect(a.stderr()).toBe('');
  });

  it("a cancellation sent to the survivor for a stream that was on the dead instance is an unknown stream's, and closes none of the survivor's", async () => {
    const before = await stats(a);
    // The answer to an id nobody ever listened with: what the contract gives any unknown stream (the
    // cancellation goes on to the host's MCP server, which accepts a notification with 202 and no body).
    const unknown = await cancelAnswer(a, alice, uid('never-listened'));
    const meantForDead = await cancelAnswer(a, alice, deadId);
    expect(meantForDead).toStrictEqual(unknown);
    expect(meantForDead).toMatchObject({ status: 202, body: '' });

    // Alice's streams with other ids, and bob's with that very id, still get what is written.
    await sentinel.fire(a);
    expect(await burstOnA.next()).toStrictEqual([]);
    for (const watcher of listsOnA) expect(await watcher.next()).toStrictEqual([]);
    expect(allOnA.map((subscription) => subscription.endReason)).toStrictEqual(allOnA.map(() => undefined));
    const after = await stats(a);
    expect(after.openStreams).toBe(before.openStreams);
    expect(after.closed).toStrictEqual(before.closed);
    expect(a.stderr()).toBe('');
  });

  it('restarted on the same port with the same REDIS_URL, the instance rejoins; the reconnecting client re-listens, told of the gap', async () => {
    newB = await startSample(kind, { REDIS_URL: redis.url, PORT: new URL(b.url).port });
    expect(newB.url).toBe(b.url);
    // The client that listened to b finds the new instance by itself, and is told it may have missed events.
    expect(await nextItem(items, 'the gap item of the re-listen')).toStrictEqual({
      type: 'gap',
      reason: 'lost',
      honored: { resourceSubscriptions: [writtenOnA, writtenOnB] },
      attempts: expect.any(Number),
    });
    expect(reconnecting.reconnects).toBe(1);

    const probes = await warm(a, newB, subscribe);
    allOnA.push(probes[0]!);
    // The sentinel's creation on the new instance is its first event every stream on the survivor follows.
    await sentinel.createOn(newB);
    expect(await burstOnA.next()).toStrictEqual([]);
    for (const watcher of listsOnA) expect(await watcher.next()).toStrictEqual([]);

    const onNewB = await watch(newB, sentinel, alice, uid('on-new-b'), { toolsListChanged: true });
    for (const origin of [a, newB]) {
      expect((await origin.api(bob, 'POST', '/api/catalog/tools')).status).toBe(202);
      await sentinel.fire(origin);
      for (const watcher of [...listsOnA, onNewB]) expect(await watcher.next()).toStrictEqual([TOOLS]);
      expect(await burstOnA.next()).toStrictEqual([]);
    }

    // The re-listened client: the new instance's own event, then the survivor's.
    expect((await putNote(newB, alice, writtenOnB, 'after')).status).toBe(201);
    expect(await nextItem(items, 'the update written on the new b')).toMatchObject({
      type: 'notification',
      method: UPDATED,
      params: { uri: writtenOnB },
    });
    expect((await putNote(a, alice, writtenOnA, 'after')).status).toBe(200);
    expect(await nextItem(items, 'the update written on a')).toMatchObject({
      type: 'notification',
      method: UPDATED,
      params: { uri: writtenOnA },
    });
    expect(reconnecting.dropped).toBe(0);
    expect(a.stderr()).toBe('');
    expect(newB.stderr()).toBe('');
  }, 60_000); // a sample to start (startSample allows 30 s)

  it("the survivor still stops within the contract's 5 s of SIGTERM, exit 0, completing every stream", async () => {
    // stop() rejects, with the survivor's stderr, when it is not gone within CONTRACT_EXIT_MS.
    expect(await a.stop('SIGTERM')).toBe(0);
    const reasons = await within(
      Promise.all(allOnA.map((subscription) => subscription.ended)),
      CONTRACT_EXIT_MS,
      "the survivor's streams to end",
    );
    expect(reasons).toStrictEqual(allOnA.map(() => 'complete'));
    expect(a.stderr()).toBe('[sample-app] SIGTERM: ending listen streams and closing\n');

    // The restarted instance is an ordinary one again: it stops the same way, once its client has left.
    await reconnecting.close();
    expect(await newB!.stop('SIGTERM')).toBe(0);
  });
}
