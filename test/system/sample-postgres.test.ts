/**
 * The samples on PostgreSQL (`DATABASE_URL`), black-box as the contract suite: every host at once (the
 * Express sample, Nest on both platforms, the plain Fastify sample), four instances sharing one
 * database of this suite's own on the shared server (LISTEN/NOTIFY channels are per database, so no
 * other suite hears them). Each instance delivers every event published on any other once, routed by
 * interest (an instance with no stream following a key does not even receive its event), the read
 * check holds across instances, a cancellation sent to one ends the stream on another, and the stats
 * route shows the PostgreSQL bus's counters under `bus`.
 *
 * Then a database restart, on a private PostgreSQL (tools/chaos/postgres.ts) so that the shared server
 * the other suites use is never restarted under them: a fast shutdown and a start, as
 * `pg_ctlcluster … restart` does. A stream open through it is told of a key changed on another instance
 * while the database was down (the change republished, or its key resynced: either is a notification
 * of that key), and later events arrive.
 */
import { afterAll, afterEach, beforeAll, describe, expect } from '@jest/globals';
import { PostgresProcess, privatePostgresMissing } from '../../tools/chaos/postgres.ts';
import {
  expectCancelAcross,
  listenClients,
  RESOURCES,
  TOOLS,
  untilDelivered,
  UPDATED,
} from '../helpers/listen-clients.ts';
import {
  createDatabase,
  dropDatabase,
  eventually,
  putNote,
  selectedSampleKinds,
  startSample,
  stopAllSamples,
  TOKENS,
  type SampleApp,
  type SampleKind,
} from '../helpers/sample-app.ts';
import { isUpdateOf, Sentinel, watcher, type Watch } from '../helpers/sentinel.ts';
import { postgresMissing } from '../helpers/postgres.ts';
import { failUnderCi, testUnless } from '../helpers/skip.ts';
import { twoInstances, warm } from '../helpers/two-instances.ts';
import { uid } from '../helpers/uid.ts';

const sharedMissing = await postgresMissing();
failUnderCi('PostgreSQL on 127.0.0.1:5432 for the DATABASE_URL suite', sharedMissing);
const fleetTest = testUnless(sharedMissing);
const privateMissing = process.env.CI === undefined ? privatePostgresMissing() : undefined;
const restartTest = testUnless(privateMissing);

const { alice, bob, carol } = TOKENS;
const { subscribe, endAll } = listenClients({ maxBuffer: 10_000, end: 'cancel' });
const watch = watcher(subscribe);
const sorted = (lines: string[]): string[] => [...lines].sort();

/** The database of this suite's own on the shared server. */
const DATABASE = `mcp_sample_${process.pid}_${Date.now().toString(36)}`;

afterAll(stopAllSamples);

describe('DATABASE_URL: the samples bridged over PostgreSQL (LISTEN/NOTIFY)', () => {
  const kinds: SampleKind[] = selectedSampleKinds();
  const apps: SampleApp[] = [];
  let created = false;

  beforeAll(async () => {
    if (sharedMissing !== undefined) return;
    const url = await createDatabase(DATABASE);
    created = true;
    // Every host at once, on one database: a fleet of four, two instances at least.
    const fleet = kinds.length >= 2 ? kinds : [...kinds, ...kinds];
    apps.push(
      ...(await Promise.all(fleet.map((kind) => startSample(kind, { DATABASE_URL: url }, { startTimeoutMs: 60_000 })))),
    );
  }, 120_000);

  afterEach(endAll);

  afterAll(async () => {
    await Promise.all(apps.map((app) => app.stop().catch(() => undefined)));
    if (created) await dropDatabase(DATABASE);
  }, 30_000);

  fleetTest(
    'each instance delivers every event published on any other, once, routed by interest; the read check holds across instances; no echo',
    async () => {
      const sentinel = await Sentinel.create(apps[0]!, ...apps.slice(1));
      // Both creations of each probe note seen everywhere: nothing published earlier is still on its way.
      for (let i = 1; i < apps.length; i++) await warm(apps[0]!, apps[i]!, subscribe);

      const name = uid('bridged');
      const uri = `note://alice/${name}`;
      const filter = { toolsListChanged: true, resourcesListChanged: true, resourceSubscriptions: [uri] };
      const watches: Watch[] = [];
      for (const app of apps) watches.push(await watch(app, sentinel, alice, uid(`on-${app.kind}`), filter));
      const bobs: Watch[] = [];
      for (const app of apps)
        bobs.push(await watch(app, sentinel, bob, uid(`bob-${app.kind}`), { resourceSubscriptions: [uri] }));

      // A note created on each instance in turn (each keeps notes of its own: a create each time), then a
      // tools list change: every stream has each once, whichever instance it was published on.
      for (const from of apps) {
        expect((await putNote(from, alice, uri, from.kind)).status).toBe(201);
        await sentinel.fire(from);
        for (const w of watches) expect(await w.next()).toStrictEqual(sorted([RESOURCES, `${UPDATED} ${uri}`]));
        for (const w of bobs) expect(await w.next()).toStrictEqual([]); // bob may not read alice's note
        expect((await from.api(carol, 'POST', '/api/catalog/tools')).status).toBe(202);
        await sentinel.fire(from);
        for (const w of watches) expect(await w.next()).toStrictEqual([TOOLS]);
        for (const w of bobs) expect(await w.next()).toStrictEqual([]);
      }
    },
    120_000,
  );

  fleetTest(
    'interest routing: an instance with no stream following a note does not receive its event; the one that follows it does, once',
    async () => {
      const [from, follower, ...others] = apps as [SampleApp, SampleApp, ...SampleApp[]];
      const sentinel = await Sentinel.create(from, follower, ...others);
      // The note exists on `from` before the warm-up, so that its creation has reached every instance
      // (the bus NOTIFYs after the write is answered) before a stream follows it.
      const uri = `note://shared/${uid('routed')}`;
      expect((await putNote(from, carol, uri, 'first')).status).toBe(201);
      for (const app of [follower, ...others]) await warm(from, app, subscribe);
      const onFollower = await watch(follower, sentinel, carol, uid('follower'), { resourceSubscriptions: [uri] });
      const bystanders = await Promise.all(others.map((app) => watch(app, sentinel, carol, uid('bystander'), {})));
      // Quiet first: whatever any instance published before (the last test's cancellations) has
      // arrived once its own sentinel has, so the counters read below move with this test's events only.
      for (const app of apps) {
        await sentinel.fire(app);
        expect(await onFollower.next()).toStrictEqual([]);
        for (const w of bystanders) expect(await w.next()).toStrictEqual([]);
      }
      const received = async (app: SampleApp): Promise<number> =>
        (await app.api(alice, 'GET', '/api/subscriptions/stats')).body.bus.received as number;
      const before = await Promise.all([from, follower, ...others].map(received));

      expect((await putNote(from, carol, uri, 'second')).status).toBe(200); // an update: one event
      await sentinel.fire(from);
      expect(await onFollower.next()).toStrictEqual([`${UPDATED} ${uri}`]);
      for (const w of bystanders) expect(await w.next()).toStrictEqual([]);
      const after = await Promise.all([from, follower, ...others].map(received));
      // The follower: the update and the sentinel; a bystander: the sentinel only; the publisher: nothing (no echo).
      expect(after.map((count, i) => count - before[i]!)).toStrictEqual([0, 2, ...others.map(() => 1)]);
    },
    120_000,
  );

  fleetTest(
    'notifications/cancelled sent to another instance ends the stream; another principal’s does not',
    async () => {
      const [a, b, c, d] = apps as [SampleApp, SampleApp, SampleApp | undefined, SampleApp | undefined];
      const sentinel = await Sentinel.create(a, b, ...[c, d].filter((app) => app !== undefined));
      await warm(a, b, subscribe);
      await expectCancelAcross(watch, sentinel, a, b, { othersFirst: { fireVia: a } });
      if (c !== undefined && d !== undefined) {
        await warm(c, d, subscribe);
        await expectCancelAcross(watch, sentinel, d, c, { othersFirst: { fireVia: d } });
      }
    },
    120_000,
  );

  fleetTest(
    "GET /api/subscriptions/stats shows the PostgreSQL bus's counters under `bus`, counts only",
    async () => {
      const probes = await warm(apps[0]!, apps[1]!, subscribe);
      for (const [i, app] of apps.entries()) {
        const stats = await app.api(alice, 'GET', '/api/subscriptions/stats');
        expect(stats.status).toBe(200);
        const bus = stats.body?.bus;
        expect(bus?.connected).toBe(true);
        for (const counter of ['published', 'received', 'dropped', 'resyncs', 'unsent', 'republished']) {
          expect({ counter, type: typeof bus?.[counter] }).toStrictEqual({ counter, type: 'number' });
        }
        if (i < 2) {
          // The warm-up created a note on each of the two that a stream on the other follows.
          expect(bus.published).toBeGreaterThanOrEqual(1);
          expect(bus.received).toBeGreaterThanOrEqual(1);
        }
        expect(bus.dropped).toBe(0);
        const text = JSON.stringify(stats.body);
        for (const secret of ['alice', 'bob', 'carol', 'note://', 'warm', probes[0]!.id, DATABASE]) {
          expect({ secret, leaked: text.includes(String(secret)) }).toStrictEqual({ secret, leaked: false });
        }
      }
    },
    60_000,
  );
});

describe('DATABASE_URL: a database restart (fast shutdown and start, as pg_ctlcluster restart does)', () => {
  restartTest(
    'a stream open through it is told of a note changed on another instance while the database was down, and later events arrive',
    async () => {
      const postgres = await PostgresProcess.start();
      try {
        const [a, b] = await twoInstances('express', postgres.url(), 'SIGKILL');
        try {
          const sentinel = await Sentinel.create(a, b);
          const uri = `note://alice/${uid('outage')}`;
          // The note exists on b, so that the write during the outage is an update: one event, of `uri`.
          // Before the warm-up: its creation has reached a before the stream there follows it.
          expect((await putNote(b, alice, uri, 'before')).status).toBe(201);
          await warm(a, b, subscribe);
          const onA = await watch(a, sentinel, alice, uid('outage-a'), { resourceSubscriptions: [uri] });
          const busOf = async (app: SampleApp): Promise<any> =>
            (await app.api(alice, 'GET', '/api/subscriptions/stats')).body.bus;
          const [aBefore, bBefore] = [await busOf(a), await busOf(b)];

          await postgres.shutdown();
          // Both instances see the database gone before the write, so that it is one they cannot send.
          await eventually(async () => !(await busOf(a)).connected && !(await busOf(b)).connected, 'both buses down', {
            timeoutMs: 30_000,
            intervalMs: 50,
          });
          // While the database is down, b still serves writes: its change has nowhere to go yet.
          expect((await putNote(b, alice, uri, 'while down')).status).toBe(200);
          await postgres.start();

          // Nothing unnoticed: once both are back, the stream on a hears of `uri` (b's change republished,
          // or a's resync of the keys it follows), without any later write.
          await onA.subscription.waitFor(isUpdateOf(uri), { timeoutMs: 30_000 });
          await eventually(async () => (await busOf(a)).connected && (await busOf(b)).connected, 'both buses back', {
            timeoutMs: 30_000,
          });
          // Told by one of the two ways the bus has: b republished its unsent change, or a resynced.
          const [aAfter, bAfter] = [await busOf(a), await busOf(b)];
          expect(aAfter.resyncs - aBefore.resyncs + (bAfter.republished - bBefore.republished)).toBeGreaterThan(0);
          // And later events cross again.
          await untilDelivered(
            b,
            alice,
            uri,
            onA.subscription,
            'an update published on b reaching the stream on a after the restart',
            {
              waitMs: 250,
              timeoutMs: 30_000,
              intervalMs: 100,
            },
          );
        } finally {
          await endAll();
          await Promise.all([a.stop(), b.stop()]);
        }
      } finally {
        await postgres.stop();
      }
    },
    150_000,
  );
});
