/**
 * `PostgresBus` when PostgreSQL itself goes away: a server of this file's own (a fresh data directory on a
 * free loopback port, never the shared one on 5432), stopped as by a crash and started again under two
 * nodes, and a bus started while it is down. What the restart must leave: one report per node, each
 * stream told once per key it follows that the key may have changed, the change a node published
 * meanwhile sent once PostgreSQL is back, and events flowing both ways again without a restart of the app.
 *
 * In the system tier: starting and restarting a server takes seconds. Without `initdb` on the machine
 * these report themselves skipped; under CI they run (and a missing server fails them).
 */
import { afterAll, expect, test } from '@jest/globals';
import diagnostics from 'node:diagnostics_channel';
import pg from 'pg';
import { SubscriptionHub, type SubscriptionBus } from 'mcp-subscriptions';
import { PostgresBus, PostgresBusChannel, type PostgresConnectionMessage } from 'mcp-subscriptions/postgres';
import { FakeResponse, openFollowing, recordingLogger, waitFor } from '../helpers/fake-response.ts';
import { OwnPostgres, ownPostgresSkipReason, uniquePrefix } from '../helpers/postgres.ts';
import { describeUnless } from '../helpers/skip.ts';
import { UnhandledTracker } from '../helpers/unhandled.ts';

const cleanups: (() => unknown)[] = [];
const unhandled = new UnhandledTracker();
unhandled.start();
afterAll(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) {
    try {
      await cleanup();
    } catch {
      // already closed
    }
  }
  unhandled.stop();
});

function hubOn(bus: SubscriptionBus): SubscriptionHub {
  const hub = new SubscriptionHub({ bus, logger: recordingLogger() });
  cleanups.push(() => hub.close());
  return hub;
}

const updates = (res: FakeResponse, uri: string): number =>
  res.messages().filter((m: any) => m.method === 'notifications/resources/updated' && m.params?.uri === uri).length;

describeUnless(ownPostgresSkipReason('the PostgreSQL fault tests'))(
  "PostgresBus when PostgreSQL goes away (a server of the test's own)",
  () => {
    let server: OwnPostgres;
    test('a restart under two nodes: one report each, one resync per key, the change made meanwhile sent late, events again both ways', async () => {
      server = await OwnPostgres.start();
      cleanups.push(() => server.dispose());
      const prefix = uniquePrefix();
      const messages: PostgresConnectionMessage[] = [];
      const onConnection = (message: unknown): void => void messages.push(message as PostgresConnectionMessage);
      diagnostics.subscribe(PostgresBusChannel.Connection, onConnection);
      try {
        const pool = new pg.Pool({ connectionString: server.url, max: 2, connectionTimeoutMillis: 1000 });
        pool.on('error', () => {});
        const [loggerA, loggerB] = [recordingLogger(), recordingLogger()];
        const a = new PostgresBus({ pool, channelPrefix: prefix, logger: loggerA });
        const b = new PostgresBus({ url: server.url, channelPrefix: prefix, logger: loggerB });
        cleanups.push(
          () => pool.end(),
          () => a.close(),
          () => b.close(),
        );
        await waitFor(() => a.stats().connected && b.stats().connected, 'both connected', 10_000);
        const [hubA, hubB] = [hubOn(a), hubOn(b)];
        const [resA, resB] = [new FakeResponse(), new FakeResponse()];
        const filter = { resourceSubscriptions: ['note://before', 'note://during', 'note://after'] };
        await openFollowing(hubA, resA, { filter });
        await openFollowing(hubB, resB, { filter });
        hubA.resourceUpdated('note://before');
        await waitFor(() => updates(resB, 'note://before') === 1, 'the event at B before the outage');

        await server.stop();
        await waitFor(() => !a.stats().connected && !b.stats().connected, 'both disconnected', 10_000);
        for (let i = 0; i < 3; i++) hubA.resourceUpdated('note://during');
        await waitFor(() => updates(resA, 'note://during') === 3, 'local delivery during the outage');
        await waitFor(() => a.stats().unsent === 1, "A's change kept", 10_000);
        // Down for a while: failed reconnections and NOTIFYs are still one outage.
        await new Promise((resolve) => setTimeout(resolve, 1500));
        expect([loggerA.errors.length, loggerB.errors.length]).toStrictEqual([1, 1]);

        await server.start();
        await waitFor(() => a.stats().connected && b.stats().connected, 'both back', 20_000);
        await waitFor(() => a.stats().unsent === 0, "A's late change sent", 10_000);
        expect(a.stats()).toMatchObject({ reconnects: 1, republished: 1, resubscribes: 1 });
        expect(b.stats()).toMatchObject({ reconnects: 1, resubscribes: 1, unsubscribed: 0 });
        // B was told once of each key (the resync), and heard of A's change late: a hint too many at most.
        await waitFor(() => updates(resB, 'note://during') >= 1, "A's change at B");
        expect(updates(resB, 'note://before')).toBe(2);
        expect(updates(resB, 'note://after')).toBe(1);
        expect(updates(resB, 'note://during')).toBeLessThanOrEqual(2);
        hubA.resourceUpdated('note://after');
        await waitFor(() => updates(resB, 'note://after') === 2, 'A → B after the restart');
        hubB.resourceUpdated('note://after');
        await waitFor(() => updates(resA, 'note://after') === 3, 'B → A after the restart');
        expect([loggerA.errors.length, loggerB.errors.length]).toStrictEqual([1, 1]);
        for (const bus of [a, b]) {
          const of = messages.filter((message) => message.nodeId === bus.nodeId).map((message) => message.connected);
          expect(of).toStrictEqual([true, false, true]);
        }
      } finally {
        diagnostics.unsubscribe(PostgresBusChannel.Connection, onConnection);
      }
      expect(unhandled.rejections).toStrictEqual([]);
    }, 90_000);

    test('a bus started while PostgreSQL is down reports it once, connects when it comes, and closes promptly while down', async () => {
      await server.stop();
      const logger = recordingLogger();
      const bus = new PostgresBus({ url: server.url, channelPrefix: uniquePrefix(), logger });
      cleanups.push(() => bus.close());
      await waitFor(() => logger.errors.length === 1, 'the report');
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(logger.errors).toHaveLength(1);
      await server.start();
      await waitFor(() => bus.stats().connected, 'connected', 20_000);
      expect(bus.stats()).toMatchObject({ connected: true, reconnects: 0 });

      const hub = hubOn(bus);
      await openFollowing(hub, new FakeResponse(), { filter: { resourceSubscriptions: ['note://x'] } });
      await server.stop();
      await waitFor(() => !bus.stats().connected, 'down again', 10_000);
      hub.resourceUpdated('note://x');
      const started = Date.now();
      await hub.close();
      await bus.close();
      // Each graceful step of close() is bounded by a second; with PostgreSQL down, none has to wait.
      expect(Date.now() - started).toBeLessThan(4000);
      expect(unhandled.rejections).toStrictEqual([]);
    }, 60_000);
  },
);
