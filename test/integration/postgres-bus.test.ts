/**
 * `PostgresBus` against a real PostgreSQL with node-postgres: the bus contract (both routings, both
 * forms, two nodes and one), interest routing across two nodes, cancellations, the spill of a large
 * event, publishIn() on COMMIT and never on ROLLBACK, a listening connection terminated
 * (`pg_terminate_backend`), an exhausted caller pool, and close().
 *
 * Under CI (`CI` set) a PostgreSQL that does not answer fails these suites; elsewhere they report
 * themselves skipped, with the reason. Every test has a channel prefix and a spill table of its own.
 */
import { afterAll, describe, expect, test } from '@jest/globals';
import { createHash, randomUUID } from 'node:crypto';
import diagnostics from 'node:diagnostics_channel';
import net from 'node:net';
import express from 'express';
import pg from 'pg';
import { SubscriptionHub, type SubscriptionBus, type TaskState } from 'mcp-subscriptions';
import { mcpSubscriptions } from 'mcp-subscriptions/express';
import {
  PostgresBus,
  PostgresBusChannel,
  type PostgresBusOptions,
  type PostgresConnectionMessage,
} from 'mcp-subscriptions/postgres';
import { SpillTable } from '../../adapters/postgres/spill.ts';
import { Wire } from '../../lib/internal.ts';
import { describeBusContract } from '../helpers/bus-contract.ts';
import { authFromUserHeader, listenOn } from '../helpers/express-apps.ts';
import { FakeResponse, openFollowing, recordingLogger, waitFor } from '../helpers/fake-response.ts';
import { cancelBody, listenBody, listenHeaders, post, TASKS_META, type SseStream } from '../helpers/sse.ts';
import { PG_URL, PgAdmin, postgresMissing, uniquePrefix } from '../helpers/postgres.ts';
import { describeUnless, failUnderCi } from '../helpers/skip.ts';
import { UnhandledTracker } from '../helpers/unhandled.ts';

const missing = await postgresMissing();
failUnderCi('PostgreSQL for the PostgresBus suites', missing);

const cleanups: (() => unknown)[] = [];
const unhandled = new UnhandledTracker();
unhandled.start();
const admin = missing === undefined ? new PgAdmin() : undefined;
afterAll(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) {
    try {
      await cleanup();
    } catch {
      // already closed
    }
  }
  await admin?.close();
  unhandled.stop();
});

type Form = 'url' | 'pool';
type NodeOptions = Partial<Omit<PostgresBusOptions, 'url' | 'pool'>> & { pool?: pg.Pool };

/** A caller's pool, as a host app makes one (ended after the file). */
function callerPool(config: pg.PoolConfig = {}): pg.Pool {
  const pool = new pg.Pool({ connectionString: PG_URL, max: 3, ...config });
  pool.on('error', () => {});
  cleanups.push(() => pool.end());
  return pool;
}

/** The spill table of each prefix: every node of a prefix names the same one. */
const tables = new Map<string, string>();
const tableOf = (prefix: string): string => {
  let table = tables.get(prefix);
  if (table === undefined) tables.set(prefix, (table = admin!.table()));
  return table;
};

/** One node: a PostgresBus on a URL, or on a caller's pool. */
function node(form: Form, channelPrefix: string, options: NodeOptions = {}): PostgresBus {
  const { pool, ...rest } = options;
  const common = { channelPrefix, logger: recordingLogger(), spillTable: tableOf(channelPrefix), ...rest };
  const bus =
    form === 'url'
      ? new PostgresBus({ url: PG_URL, ...common })
      : new PostgresBus({ pool: pool ?? callerPool(), ...common });
  cleanups.push(() => bus.close());
  return bus;
}

async function connected(...buses: PostgresBus[]): Promise<void> {
  await waitFor(() => buses.every((bus) => bus.stats().connected), 'the buses connected', 10_000);
}

/** A bus whose members join `buses` in turn: members on different nodes, talking through PostgreSQL. */
function spread(buses: readonly PostgresBus[]): SubscriptionBus {
  let next = 0;
  return { join: (listener) => buses[next++ % buses.length]!.join(listener) };
}

function nodes(forms: readonly Form[], routing?: PostgresBusOptions['routing']) {
  return async () => {
    const channelPrefix = uniquePrefix();
    const buses = forms.map((form) => node(form, channelPrefix, routing === undefined ? {} : { routing }));
    await connected(...buses);
    return {
      bus: buses.length === 1 ? buses[0]! : spread(buses),
      close: async () => {
        for (const bus of buses) await bus.close();
      },
    };
  };
}

function hubOn(bus: SubscriptionBus): SubscriptionHub {
  const hub = new SubscriptionHub({ bus, logger: recordingLogger() });
  cleanups.push(() => hub.close());
  return hub;
}

/** A node's hub served over loopback HTTP by the Express middleware: listens and cancels, as a client sends them. */
async function serve(hub: SubscriptionHub) {
  const app = express();
  app.post(
    '/mcp',
    authFromUserHeader,
    mcpSubscriptions({
      hub,
      capabilities: { toolsListChanged: true, resourceSubscriptions: true, tasks: true },
      keepAliveMs: false,
      canRead: () => true,
      canAccessTask: () => true,
    }),
    // The host's MCP server: it accepts the notifications the middleware passes on.
    (_req, res) => void res.status(202).end(),
  );
  const server = await listenOn(app);
  const streams: SseStream[] = [];
  cleanups.push(async () => {
    for (const stream of streams) stream.close();
    await server.close();
  });
  return {
    /** Opens a listen stream as `user` and waits for its acknowledgement. */
    async open(id: string, notifications: Record<string, unknown>, user = 'alice'): Promise<SseStream> {
      const stream = await post(
        server.url,
        listenBody(id, notifications, TASKS_META),
        listenHeaders({ 'x-user': user }),
      );
      streams.push(stream);
      await stream.event(1);
      return stream;
    },
    /** Sends `notifications/cancelled` for listen `id` as `user`. */
    async cancel(id: string, user = 'alice'): Promise<number> {
      const answer = await post(server.url, cancelBody(id), { 'content-type': 'application/json', 'x-user': user });
      await answer.end();
      return answer.status;
    },
  };
}

/** The messages of a stream after its acknowledgement, parsed. */
const received = (stream: SseStream): any[] => stream.events.slice(1).map((event) => JSON.parse(event.data));
/** What each message after the acknowledgement is about: a URI, a list's method, a task id. */
const seen = (stream: SseStream): string[] =>
  received(stream).map((m) => m.params?.uri ?? m.params?.taskId ?? m.method);
const count = (stream: SseStream, what: string): number => seen(stream).filter((item) => item === what).length;
const LIST = 'notifications/tools/list_changed';

/** A key's channel as docs/postgres.md gives it: the prefix, `:2:`, the kind, and 22 base64url characters of its SHA-256. */
const channelOf = (prefix: string, type: 'u' | 't' | 'c', key: string): string =>
  `${prefix}:2:${type}:${createHash('sha256').update(`${type}:${key}`).digest('base64url').slice(0, 22)}`;

/** A task whose result takes `bytes` characters: over 8,000 bytes, its message spills. */
function bigTask(taskId: string, text: string): TaskState {
  return {
    taskId,
    status: 'completed',
    createdAt: '2026-12-01T00:00:00.000Z',
    lastUpdatedAt: '2026-12-01T00:00:01.000Z',
    ttlMs: 60_000,
    result: { content: [{ type: 'text', text }] },
  };
}

/**
 * A TCP proxy to PostgreSQL that holds what the client sends for `delayMs` (in order) before passing it
 * on: a server that is `delayMs` away, so that a LISTEN not waited for loses the race with a NOTIFY
 * another node sends directly. Returns its URL.
 */
async function distantPostgres(delayMs: number): Promise<string> {
  const target = new URL(PG_URL);
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port), target.hostname);
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
  return `postgres://postgres@127.0.0.1:${(server.address() as net.AddressInfo).port}/test`;
}

describeUnless(missing)('PostgresBus against PostgreSQL on 127.0.0.1:5432', () => {
  describeBusContract('PostgresBus (url and pool nodes)', nodes(['url', 'pool']));
  describeBusContract('PostgresBus (pool), one node', nodes(['pool']));
  describeBusContract('PostgresBus (url and pool nodes, routing broadcast)', nodes(['url', 'pool'], 'broadcast'));

  test('two nodes over real HTTP: every event reaches each following stream once, in order; a node hears only what its streams follow', async () => {
    const prefix = uniquePrefix();
    const [a, b, c] = [node('url', prefix), node('pool', prefix), node('pool', prefix)];
    await connected(a, b, c);
    const [hubA, hubB, hubC] = [hubOn(a), hubOn(b), hubOn(c)];
    const [servedB, servedC] = [await serve(hubB), await serve(hubC)];
    const atB = await servedB.open('b', {
      toolsListChanged: true,
      resourceSubscriptions: ['note://1', 'note://2', 'note://end'],
    });
    // C follows a list only: no URI of A's reaches it.
    const atC = await servedC.open('c', { toolsListChanged: true });
    for (const uri of ['note://1', 'note://nobody', 'note://2']) hubA.resourceUpdated(uri);
    hubA.toolsListChanged();
    hubA.resourceUpdated('note://2');
    hubA.resourceUpdated('note://end');
    await atB.until(() => count(atB, 'note://end') === 1, 'the last update at B');
    expect(seen(atB)).toStrictEqual(['note://1', 'note://2', LIST, 'note://2', 'note://end']);
    // A second list change, published after everything else: once C has it, nothing else of A's is on its way.
    hubA.toolsListChanged();
    await atC.until(() => count(atC, LIST) === 2, 'both list changes at C');
    expect(seen(atC)).toStrictEqual([LIST, LIST]);
    expect(c.stats()).toMatchObject({ received: 2, dropped: 0 });
    await atB.until(() => count(atB, LIST) === 2, 'the second list change at B');
    await waitFor(() => a.stats().published === 7, "every one of A's NOTIFYs acknowledged");
    expect(b.stats()).toMatchObject({ received: 6, dropped: 0 });
  });

  test('identical messages published back to back arrive each (PostgreSQL folds identical notifications of one transaction)', async () => {
    const prefix = uniquePrefix();
    const [a, b] = [node('pool', prefix, { routing: 'broadcast' }), node('url', prefix, { routing: 'broadcast' })];
    await connected(a, b);
    const got: string[] = [];
    const member = a.join({ event: () => {}, cancel: () => {} });
    b.join({ event: (event) => void got.push(event.kind), cancel: (_principal, id) => void got.push(String(id)) });
    // The first goes alone; the next ones wait for it and go out together, in one query.
    member.publish({ kind: 'tools_list_changed' });
    member.publish({ kind: 'prompts_list_changed' });
    member.publish({ kind: 'prompts_list_changed' });
    member.cancel('alice', 'x');
    member.cancel('alice', 'x');
    member.publish({ kind: 'resources_list_changed' });
    await waitFor(() => got.includes('resources_list_changed'), 'the last one');
    expect(got).toStrictEqual([
      'tools_list_changed',
      'prompts_list_changed',
      'prompts_list_changed',
      'x',
      'x',
      'resources_list_changed',
    ]);
  });

  test('a stream acknowledged over HTTP gets an event published on another node right after its ack, every time (the ack waits for LISTEN)', async () => {
    const prefix = uniquePrefix();
    // B LISTENs through a PostgreSQL 25 ms away (its `listener`), A NOTIFYs next door: without the ack
    // waiting for B's LISTEN, A's NOTIFY right after the ack would reach PostgreSQL first and be lost.
    const a = node('pool', prefix);
    const b = node('pool', prefix, { listener: { connectionString: await distantPostgres(25) } });
    await connected(a, b);
    const [hubA, servedB] = [hubOn(a), await serve(hubOn(b))];
    for (let i = 0; i < 20; i++) {
      // A URI no stream of B's followed before: its channel is new, so the ack waits for its LISTEN.
      const uri = `note://fresh/${i}/${randomUUID()}`;
      const stream = await servedB.open(`l${i}`, { resourceSubscriptions: [uri] });
      hubA.resourceUpdated(uri);
      await stream.until(() => count(stream, uri) === 1, `the update of ${uri}`);
      stream.close();
    }
  });

  test('a cancellation sent to one node over HTTP ends the stream another node holds, for that principal only', async () => {
    const prefix = uniquePrefix();
    const [a, b] = [node('pool', prefix), node('url', prefix)];
    await connected(a, b);
    const [hubA, hubB] = [hubOn(a), hubOn(b)];
    const [servedA, servedB] = [await serve(hubA), await serve(hubB)];
    const alices = await servedB.open('listen:1', { toolsListChanged: true }, 'alice');
    const bobs = await servedB.open('listen:1', { toolsListChanged: true }, 'bob');
    expect(await servedA.cancel('listen:1', 'alice')).toBe(202);
    await alices.end();
    expect(hubB.stats().closed.cancelled).toBe(1);
    expect(bobs.ended).toBe(false);
    expect(hubB.openByPrincipal()).toStrictEqual({ bob: 1 });
    expect(hubA.stats().openStreams).toBe(0);
  });

  test('an event over 8,000 bytes travels through the spill table, intact and in order with the small ones around it', async () => {
    const prefix = uniquePrefix();
    const [a, b] = [node('pool', prefix), node('url', prefix)];
    await connected(a, b);
    const [hubA, hubB] = [hubOn(a), hubOn(b)];
    const atB = await (
      await serve(hubB)
    ).open('t', { taskIds: ['task-1'], resourceSubscriptions: ['note://before', 'note://after'] });
    const text = `ünïcødé ✓ ${'x'.repeat(20_000)}`;
    hubA.resourceUpdated('note://before');
    hubA.taskStatus(bigTask('task-1', text), 'alice');
    hubA.resourceUpdated('note://after');
    await atB.until(() => count(atB, 'note://after') === 1, 'the update after the large one');
    expect(seen(atB)).toStrictEqual(['note://before', 'task-1', 'note://after']);
    expect(received(atB)[1].params.result).toStrictEqual({ content: [{ type: 'text', text }] });
    await waitFor(() => a.stats().published === 3, "A's NOTIFYs acknowledged");
    expect(a.stats()).toMatchObject({ spilled: 1, dropped: 0 });
    expect(b.stats()).toMatchObject({ received: 3, dropped: 0 });
    expect(await admin!.rows(tableOf(prefix))).toBe(1);
  });

  test('spillTable: false: an event over 8,000 bytes reaches the local node only, reported once; publishIn() refuses it before sending', async () => {
    const prefix = uniquePrefix();
    const logger = recordingLogger();
    const pool = callerPool();
    const [a, b] = [node('pool', prefix, { pool, spillTable: false, logger }), node('url', prefix)];
    await connected(a, b);
    const [hubA, hubB] = [hubOn(a), hubOn(b)];
    const [atA, atB] = [new FakeResponse(), new FakeResponse()];
    const filter = { taskIds: ['big'], resourceSubscriptions: ['note://after'] };
    await openFollowing(hubA, atA, { principal: 'alice', filter });
    await openFollowing(hubB, atB, { principal: 'alice', filter });
    hubA.taskStatus(bigTask('big', 'b'.repeat(9000)), 'alice');
    hubA.taskStatus(bigTask('big', 'c'.repeat(9000)), 'alice');
    hubA.resourceUpdated('note://after');
    await waitFor(() => atB.messages().length === 1, 'the small update at B');
    expect(atB.messages().map((m: any) => m.method)).toStrictEqual(['notifications/resources/updated']);
    expect(atA.messages().filter((m: any) => m.params?.taskId === 'big')).toHaveLength(2);
    await waitFor(() => a.stats().published === 1, "A's NOTIFY acknowledged");
    expect(a.stats()).toMatchObject({ dropped: 2, spilled: 0 });
    expect(logger.warns).toHaveLength(1);
    expect(String(logger.warns[0]![0])).toContain('spillTable is false');
    await expect(
      a.publishIn(pool, { kind: 'task_status', owner: 'alice', task: bigTask('big', 'd'.repeat(9000)) }),
    ).rejects.toMatchObject({ code: 'ERR_MCP_SUBSCRIPTIONS_INVALID_EVENT' });
    expect(a.stats().publishedIn).toBe(0);
  });

  test("NOTIFY's payload bound, exactly: a message of 7,999 bytes is NOTIFYed, one of 8,000 spills; both arrive", async () => {
    const prefix = uniquePrefix();
    const [a, b] = [
      node('pool', prefix, { nodeId: 'node-a', routing: 'broadcast' }),
      node('url', prefix, { routing: 'broadcast' }),
    ];
    await connected(a, b);
    const got: string[] = [];
    b.join({ event: (event) => void got.push(event.kind === 'resource_updated' ? event.uri : ''), cancel: () => {} });
    const member = a.join({ event: () => {}, cancel: () => {} });
    /** A URI whose message, as node-a writes it with no context, takes `bytes` bytes. */
    const uriOf = (bytes: number): string => {
      const bare = new Wire('node-a').event(JSON.stringify({ kind: 'resource_updated', uri: 'note://x/' }));
      return `note://x/${'p'.repeat(bytes - Buffer.byteLength(bare))}`;
    };
    member.publish({ kind: 'resource_updated', uri: uriOf(7999) });
    // B may hear of a NOTIFY before A's pool hands A its acknowledgement: both are waited for.
    await waitFor(() => got.length === 1 && a.stats().published === 1, 'the 7,999-byte message');
    expect(a.stats().spilled).toBe(0);
    member.publish({ kind: 'resource_updated', uri: uriOf(8000) });
    await waitFor(() => got.length === 2 && a.stats().published === 2, 'the 8,000-byte message');
    expect(a.stats()).toMatchObject({ spilled: 1, published: 2, dropped: 0 });
    expect(got).toStrictEqual([uriOf(7999), uriOf(8000)]);
  });

  test('the privileges docs/postgres.md lists: without CREATE a spill is refused alone (reported once, the bus stays connected); with the migration and INSERT, SELECT, DELETE and the sequence it goes', async () => {
    const prefix = uniquePrefix();
    const role = `mcp_test_${randomUUID().slice(0, 8)}`;
    // PostgreSQL 15 gives no role but the owner CREATE on the public schema: this one may LISTEN and NOTIFY only.
    await admin!.pool.query(`CREATE ROLE ${role} LOGIN`);
    cleanups.push(async () => {
      await admin!.pool.query(`DROP OWNED BY ${role}`);
      await admin!.pool.query(`DROP ROLE IF EXISTS ${role}`);
    });
    const logger = recordingLogger();
    const pool = callerPool({ connectionString: `postgres://${role}@127.0.0.1:5432/test` });
    const [a, b] = [node('pool', prefix, { pool, logger }), node('url', prefix)];
    await connected(a, b);
    const [hubA, hubB] = [hubOn(a), hubOn(b)];
    const atB = new FakeResponse();
    await openFollowing(hubB, atB, {
      principal: 'alice',
      filter: { taskIds: ['big'], resourceSubscriptions: ['note://n'] },
    });
    hubA.taskStatus(bigTask('big', 'r'.repeat(9000)), 'alice');
    hubA.resourceUpdated('note://n');
    await waitFor(() => atB.messages().length === 1, 'the small update at B');
    expect(atB.messages()[0]).toMatchObject({ params: { uri: 'note://n' } });
    expect(a.stats()).toMatchObject({ connected: true, dropped: 1, spilled: 0 });
    expect(logger.warns).toHaveLength(1);
    expect(String(logger.warns[0]![0])).toContain('refused');
    expect(logger.errors).toStrictEqual([]);

    const table = tableOf(prefix);
    await admin!.pool.query(
      `CREATE TABLE "${table}" (id bigserial PRIMARY KEY, payload text NOT NULL, created_at timestamptz NOT NULL DEFAULT now())`,
    );
    await admin!.pool.query(`GRANT INSERT, SELECT, DELETE ON "${table}" TO ${role}`);
    await admin!.pool.query(`GRANT USAGE ON SEQUENCE "${table}_id_seq" TO ${role}`);
    hubA.taskStatus(bigTask('big', 's'.repeat(9000)), 'alice');
    await waitFor(() => atB.messages().length === 2, 'the spilled status at B');
    expect(atB.messages()[1].params.result.content[0].text).toBe('s'.repeat(9000));
    expect(a.stats()).toMatchObject({ connected: true, spilled: 1, dropped: 1 });
  });

  test('publishIn(): delivered on COMMIT, to every node following it (this one included), never on ROLLBACK; large ones too', async () => {
    const prefix = uniquePrefix();
    const pool = callerPool();
    const [a, b] = [node('pool', prefix, { pool }), node('url', prefix)];
    await connected(a, b);
    const [hubA, hubB] = [hubOn(a), hubOn(b)];
    const filter = {
      taskIds: ['big-kept', 'big-gone'],
      resourceSubscriptions: ['note://kept', 'note://gone', 'note://mark'],
    };
    const atA = await (await serve(hubA)).open('a', filter);
    const atB = await (await serve(hubB)).open('b', filter);
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await a.publishIn(client, { kind: 'resource_updated', uri: 'note://gone' });
      await a.publishIn(client, { kind: 'task_status', owner: 'alice', task: bigTask('big-gone', 'g'.repeat(9000)) });
      await client.query('ROLLBACK');

      await client.query('BEGIN');
      await a.publishIn(client, { kind: 'resource_updated', uri: 'note://kept' });
      await a.publishIn(client, { kind: 'task_status', owner: 'alice', task: bigTask('big-kept', 'k'.repeat(9000)) });
      // Not before COMMIT: an update published meanwhile, outside the transaction, arrives alone.
      hubA.resourceUpdated('note://mark');
      await atB.until(() => count(atB, 'note://mark') === 1, 'the mark at B');
      expect(seen(atB)).toStrictEqual(['note://mark']);
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    for (const stream of [atA, atB]) {
      await stream.until(() => count(stream, 'big-kept') === 1, 'the committed events');
      expect(seen(stream).filter((item) => item !== 'note://mark')).toStrictEqual(['note://kept', 'big-kept']);
    }
    // After everything else: nothing of the rolled-back transaction was on its way.
    hubA.resourceUpdated('note://mark');
    await atB.until(() => count(atB, 'note://mark') === 2, 'the second mark at B');
    expect(seen(atB)).toStrictEqual(['note://mark', 'note://kept', 'big-kept', 'note://mark']);
    expect(a.stats()).toMatchObject({ publishedIn: 4, spilled: 2 });
    // The rolled-back row is gone with its transaction; the committed one waits out its life.
    expect(await admin!.rows(tableOf(prefix))).toBe(1);
    await expect(a.publishIn(client, { kind: 'resource_updated', uri: 'relative' })).rejects.toMatchObject({
      code: 'ERR_MCP_SUBSCRIPTIONS_INVALID_EVENT',
    });
  });

  test('pg_terminate_backend of the listening connections: one report, a stream through it resynced once, then events flow again', async () => {
    const prefix = uniquePrefix();
    const messages: PostgresConnectionMessage[] = [];
    const onConnection = (message: unknown): void => void messages.push(message as PostgresConnectionMessage);
    diagnostics.subscribe(PostgresBusChannel.Connection, onConnection);
    try {
      const logger = recordingLogger();
      const [a, b] = [node('pool', prefix), node('url', prefix, { logger })];
      await connected(a, b);
      const [hubA, hubB] = [hubOn(a), hubOn(b)];
      const atB = await (await serve(hubB)).open('b', { resourceSubscriptions: ['note://x'], toolsListChanged: true });
      const channelsBefore = b.stats().subscriptions;
      expect(await admin!.terminateListeners(prefix)).toBe(2);
      await waitFor(() => b.stats().reconnects === 1 && b.stats().connected, 'B back', 10_000);
      // Told once per key it follows that it may have changed meanwhile.
      await atB.until(() => seen(atB).length === 2, 'the resync');
      expect(seen(atB).sort()).toStrictEqual([LIST, 'note://x'].sort());
      expect(b.stats()).toMatchObject({ resubscribes: 1, subscriptions: channelsBefore, unsubscribed: 0 });
      expect(b.stats().resyncs).toBeGreaterThanOrEqual(1);
      expect(hubB.stats().resynced).toBe(2);
      await connected(a);
      hubA.resourceUpdated('note://x');
      await atB.until(() => count(atB, 'note://x') === 2, 'an update after the outage');
      expect(logger.errors).toHaveLength(1);
      expect(String(logger.errors[0]![0])).toContain('PostgreSQL is unreachable');
      const ofB = messages.filter((message) => message.nodeId === b.nodeId);
      expect(ofB.map((message) => message.connected)).toStrictEqual([true, false, true]);
      expect(ofB[0]!.channelPrefix).toBe(prefix);
    } finally {
      diagnostics.unsubscribe(PostgresBusChannel.Connection, onConnection);
    }
  });

  test('an exhausted caller pool: the changes are kept unsent, one report, and republished once it frees up', async () => {
    const prefix = uniquePrefix();
    const pool = callerPool({ max: 1, connectionTimeoutMillis: 200 });
    const logger = recordingLogger();
    const [a, b] = [node('pool', prefix, { pool, logger }), node('url', prefix)];
    await connected(a, b);
    const [hubA, hubB] = [hubOn(a), hubOn(b)];
    const res = new FakeResponse();
    await openFollowing(hubB, res, { filter: { resourceSubscriptions: ['note://1', 'note://2'] } });
    const held = await pool.connect();
    hubA.resourceUpdated('note://1');
    await waitFor(() => a.stats().unsent === 1 && !a.stats().connected, 'the change kept unsent', 10_000);
    hubA.resourceUpdated('note://1');
    hubA.resourceUpdated('note://2');
    expect(a.stats()).toMatchObject({ unsent: 2, connected: false });
    expect(a.stats().dropped).toBeGreaterThanOrEqual(3);
    expect(logger.errors).toHaveLength(1);
    held.release();
    await waitFor(() => a.stats().connected && a.stats().unsent === 0, 'the pool free again', 10_000);
    const updates = (uri: string): number =>
      res.messages().filter((m: any) => m.method === 'notifications/resources/updated' && m.params?.uri === uri).length;
    await waitFor(() => updates('note://1') === 1 && updates('note://2') === 1, 'the late changes at B');
    // B may hear of a NOTIFY before A's pool hands A its acknowledgement.
    await waitFor(() => a.stats().republished === 2, 'both counted as republished');
    expect(a.stats().reconnects).toBe(1);
    expect(logger.errors).toHaveLength(1);
  });

  test('more unsent changes than the backlog holds: once NOTIFYs go through again, every node resyncs everything', async () => {
    const prefix = uniquePrefix();
    const pool = callerPool({ max: 1, connectionTimeoutMillis: 200 });
    const [a, b] = [node('pool', prefix, { pool }), node('url', prefix)];
    await connected(a, b);
    const [hubA, hubB] = [hubOn(a), hubOn(b)];
    const res = new FakeResponse();
    await openFollowing(hubB, res, { filter: { resourceSubscriptions: ['note://followed'], toolsListChanged: true } });
    const held = await pool.connect();
    hubA.resourceUpdated('note://first');
    await waitFor(() => !a.stats().connected, 'NOTIFYs failing', 10_000);
    // One key more than the backlog's 10,000: it no longer knows which changed.
    for (let i = 0; i < 10_001; i++) hubA.resourceUpdated(`note://changed/${i}`);
    expect(a.stats().unsent).toBe(-1);
    held.release();
    await waitFor(() => a.stats().connected && a.stats().unsent === 0, 'A back', 10_000);
    // B never heard of the keys, yet its stream is told that everything it follows may have changed.
    await waitFor(() => res.messages().length === 2, "B's resync of everything");
    expect(
      res
        .messages()
        .map((m: any) => m.params?.uri ?? m.method)
        .sort(),
    ).toStrictEqual(['note://followed', 'notifications/tools/list_changed'].sort());
    await waitFor(() => a.stats().republished === 1, 'the resync request counted');
    expect(b.stats().resyncs).toBe(1);
  });

  test('a spilled message whose row is gone is a counted drop, reported once, and its channel is resynced: never a crash', async () => {
    const prefix = uniquePrefix();
    const logger = recordingLogger();
    const b = node('pool', prefix, { logger });
    await connected(b);
    const hubB = hubOn(b);
    const res = new FakeResponse();
    await openFollowing(hubB, res, { filter: { resourceSubscriptions: ['note://x', 'note://y'] } });
    const forged = JSON.stringify({ v: 2, node: 'another-node', type: 'ref', ref: '987654321' });
    await admin!.pool.query('SELECT pg_notify($1, $2)', [channelOf(prefix, 'u', 'note://x'), forged]);
    await waitFor(() => res.messages().length === 1, 'the resync of the channel');
    expect(res.messages()[0]).toMatchObject({ method: 'notifications/resources/updated', params: { uri: 'note://x' } });
    expect(b.stats()).toMatchObject({ dropped: 1, received: 0, connected: true });
    expect(logger.warns).toHaveLength(1);
    expect(String(logger.warns[0]![0])).toContain('spilled message could not be read');
    // One channel resynced by itself: the bus stayed connected, and no outage was reported.
    expect(logger.errors).toStrictEqual([]);
    expect(unhandled.rejections).toStrictEqual([]);
  });

  test('channel names of a 36-byte prefix (multi-byte characters) fit the 63-byte identifiers, end to end', async () => {
    const prefix = `${'é'.repeat(16)}${uniquePrefix().slice(0, 4)}`;
    expect(Buffer.byteLength(prefix)).toBe(36);
    const [a, b] = [node('pool', prefix), node('url', prefix)];
    await connected(a, b);
    const [hubA, hubB] = [hubOn(a), hubOn(b)];
    const res = new FakeResponse();
    await openFollowing(hubB, res, { principal: 'alice', filter: { resourceSubscriptions: ['note://long'] } });
    hubA.resourceUpdated('note://long');
    await waitFor(() => res.messages().length === 1, 'the update');
    expect(Buffer.byteLength(channelOf(prefix, 'u', 'note://long'))).toBe(63);
    expect(b.stats()).toMatchObject({ unsubscribed: 0, dropped: 0 });
  });

  test('the spill table: created when missing, found by name when there, and cleaned of rows past their life', async () => {
    const name = admin!.table();
    const table = new SpillTable({ name, sql: `"${name}"` }, 60_000);
    await table.ensure(admin!.pool);
    await table.ensure(admin!.pool);
    await admin!.pool.query(`INSERT INTO "${name}" (payload) VALUES ('a'), ('b'), ('c')`);
    await admin!.pool.query(`UPDATE "${name}" SET created_at = now() - interval '2 minutes' WHERE payload <> 'c'`);
    expect(await table.cleanUp(admin!.pool)).toBe(true);
    expect(await admin!.rows(name)).toBe(1);
    // At most once per life: the next spill within it deletes nothing.
    expect(await table.cleanUp(admin!.pool)).toBe(false);
    const { rows } = await admin!.pool.query(`SELECT id FROM "${name}"`);
    expect(await table.read(admin!.pool, String(rows[0].id))).toBe('c');
    expect(await table.read(admin!.pool, '123456789')).toBeUndefined();
  });

  test('close(): the listening session ends, the caller pool stays open, the url form ends its own; idempotent', async () => {
    const prefix = uniquePrefix();
    const pool = callerPool();
    const [a, b] = [node('pool', prefix, { pool }), node('url', prefix)];
    await connected(a, b);
    const hub = hubOn(a);
    await openFollowing(hub, new FakeResponse(), { filter: { resourceSubscriptions: ['note://x'] } });
    expect(await admin!.listeners(prefix)).toBe(2);
    await hub.close();
    await Promise.all([a.close(), a.close(), b.close()]);
    // A backend leaves pg_stat_activity a moment after its client has gone.
    const deadline = Date.now() + 5000;
    while ((await admin!.listeners(prefix)) > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(await admin!.listeners(prefix)).toBe(0);
    expect((await pool.query('SELECT 1 AS one')).rows).toStrictEqual([{ one: 1 }]);
    expect(a.stats().connected).toBe(false);
    expect(unhandled.rejections).toStrictEqual([]);
  });
});

describe('PostgresBus({ pool }) type checks (by tsc)', () => {
  test("node-postgres's own Pool, Client and PoolClient fit the option and publishIn() types", () => {
    const check = (pool: pg.Pool, client: pg.PoolClient): void => {
      const options: PostgresBusOptions = { pool, listener: () => new pg.Client({ connectionString: PG_URL }) };
      const other: PostgresBusOptions = { url: PG_URL, listener: { connectionString: PG_URL } };
      void [options, other, (bus: PostgresBus) => bus.publishIn(client, { kind: 'tools_list_changed' })];
    };
    expect(typeof check).toBe('function');
  });
});
