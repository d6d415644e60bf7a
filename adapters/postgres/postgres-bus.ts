/**
 * `PostgresBus`: the hubs of several processes joined over PostgreSQL's LISTEN/NOTIFY. One bus is one
 * node: it NOTIFYs what its members publish, and hands its members what other nodes NOTIFY on the
 * channels it LISTENs to. With interest routing (the default) those are the channels of the keys its
 * streams follow, kept by the engine's one interest reconciler, as on Redis. Members in the same process
 * reach each other directly, without a round trip through PostgreSQL.
 */
import diagnostics from 'node:diagnostics_channel';
import {
  BusMembers,
  ErrorCode,
  EventError,
  InterestReconciler,
  MAX_MESSAGE_BYTES,
  MAX_NODE_ID_LENGTH,
  OptionsError,
  tooLarge,
  UnsentBacklog,
  validateEvent,
  Wire,
  type BusListener,
  type BusMember,
  type Decoded,
  type DropReason,
  type EventContext,
  type GapKeys,
  type Logger,
  type SubscriptionBus,
  type SubscriptionEvent,
} from '../../lib/internal.ts';
import { Channels } from './channels.ts';
import { ListeningConnection, within } from './listener.ts';
import {
  quoteIdentifier,
  resolvePostgresBusOptions,
  type PostgresBusOptions,
  type PostgresBusRouting,
  type PostgresListenClient,
  type PostgresPool,
  type PostgresQueryable,
  type ResolvedPostgresBusOptions,
} from './options.ts';
import { isStatementError, MAX_NOTIFY_PAYLOAD_BYTES, SpillTable } from './spill.ts';

/** `node:diagnostics_channel` channels of the PostgreSQL bus. */
export const PostgresBusChannel = Object.freeze({
  /**
   * The bus gained or lost its connection to PostgreSQL: a `PostgresConnectionMessage`,
   * `{ connected, nodeId, channelPrefix }`. `connected: false` is published once per outage (as the log
   * line), `connected: true` when the listening connection is up with every channel LISTENed and
   * NOTIFYs go through, first and after each outage.
   */
  Connection: 'mcp-subscriptions:postgres:connection',
});

/** Published on `PostgresBusChannel.Connection`. */
export interface PostgresConnectionMessage {
  readonly connected: boolean;
  /** The bus's `nodeId`. */
  readonly nodeId: string;
  /** The bus's `channelPrefix`. */
  readonly channelPrefix: string;
}

/** A snapshot of the bus's state and counters since it was created (`bus.stats()`). */
export interface PostgresBusStats {
  /**
   * The listening connection is up with every wanted channel LISTENed, and NOTIFYs go through: other
   * nodes hear this one, and it hears them.
   */
  connected: boolean;
  /** The routing in use: `'interest'` or `'broadcast'` (the `routing` option). */
  routing: PostgresBusRouting;
  /** Messages (events and cancellations) PostgreSQL acknowledged NOTIFYing, spilled ones included. */
  published: number;
  /** Notifications queued by `publishIn()` in callers' transactions (delivered on COMMIT only). */
  publishedIn: number;
  /** Messages published through the spill table (over a NOTIFY payload's 8,000 bytes). */
  spilled: number;
  /** Valid messages received from other nodes (or from `publishIn()`) and handed to this node's members. */
  received: number;
  /**
   * Messages lost: publishes not sent because the bus was not connected (or PostgreSQL refused them, or
   * they were over 4 MiB, or over 8,000 bytes with `spillTable: false`), plus received messages refused
   * as malformed or foreign, and spilled messages whose row could not be read (expired, deleted).
   */
  dropped: number;
  /** Times the bus got its connection back after losing it. */
  reconnects: number;
  /** Channels this node LISTENs to now, as PostgreSQL's replies said. */
  subscriptions: number;
  /** Channels this node wants that PostgreSQL has not confirmed LISTENed yet. */
  unsubscribed: number;
  /** Times the bus LISTENed its channels again on a new listening connection. */
  resubscribes: number;
  /**
   * Resyncs this node ran: a channel LISTENed again after a gap (its keys' streams were told they may
   * have changed), or a resync of everything another node asked for.
   */
  resyncs: number;
  /** Keys whose latest change this node could not publish yet, published once PostgreSQL is back; -1 past the bound. */
  unsent: number;
  /** Changes published late, once PostgreSQL was back, and resyncs of everything asked of the other nodes. */
  republished: number;
}

const connectionChannel = diagnostics.channel(PostgresBusChannel.Connection);

/** How long `close()` waits for each graceful step (the last NOTIFYs, the sessions' ends) before going on. */
const CLOSE_STEP_MS = 1000;

/**
 * How long a stream's acknowledgement may wait for the LISTEN of a key new to this node. PostgreSQL
 * answers in a millisecond; this bounds one that stops answering without closing (the channel then
 * has a gap, and its keys are resynced once it is LISTENed).
 */
const FOLLOW_TIMEOUT_MS = 2000;

/** How soon NOTIFYs are tried again after a failure (the backlog, or a probe), while they fail. */
const RETRY_MS = 1000;

/** How long a channel no stream follows stays LISTENed (a page reload costs no UNLISTEN + LISTEN). */
const UNLISTEN_DELAY_MS = 1000;

/** The most channels in one LISTEN or UNLISTEN batch (one simple query of that many statements). */
const CHANNELS_PER_COMMAND = 500;

/**
 * The most received messages that may wait behind a spilled one whose row is being read: past it, a
 * message is dropped and its channel resynced (a pool that stopped answering must not fill the memory).
 */
const MAX_WAITING = 10_000;

/** The most messages in one NOTIFY query (one `SELECT pg_notify(…), …`: delivered in order, together). */
const MESSAGES_PER_QUERY = 100;

/**
 * How many bytes of messages may wait for their NOTIFY before more are set aside (dropped, their keys
 * remembered): bounds the memory of a PostgreSQL that stops answering without the socket closing.
 */
const MAX_OUTBOX_BYTES = 16 * 1024 * 1024;

/**
 * How long without a failure ends an outage that never cost the connection (refused NOTIFYs), so that
 * the next failure is logged again; one that cost it ends when it is back.
 */
const OUTAGE_QUIET_MS = 10_000;

const OUTAGE_MESSAGE =
  "PostgreSQL is unreachable (or refuses the bus's LISTEN or NOTIFY); events reach this node's streams only until it is back";

/** The settings of the pool the url form owns: small, and quick to give up while PostgreSQL is away. */
const OWNED_POOL = { max: 4, connectionTimeoutMillis: 5000, idleTimeoutMillis: 10_000 } as const;

/** What the url form loads. */
interface PgModule {
  readonly Pool: new (config: object) => PostgresPool & { end(): Promise<void> };
  readonly Client: new (config: object) => PostgresListenClient;
}

/** A constructor of listening clients, as a pool carries it (`pool.Client`) and its settings (`pool.options`). */
interface PoolInternals {
  readonly Client?: new (config: object) => PostgresListenClient;
  readonly options?: object;
}

/** One message waiting for its NOTIFY. */
interface Outgoing {
  readonly channel: string;
  readonly payload: string;
  /** UTF-8 bytes of the payload (decides the spill). */
  readonly bytes: number;
  /** What to remember when it does not go out: an event, a resync of everything, or nothing (a cancellation). */
  readonly unsent: SubscriptionEvent | 'resync' | undefined;
  /** Sent late, from the backlog: counted in `republished` once PostgreSQL took it. */
  readonly late: boolean;
}

/** A received message in the order it came: decoded, or waiting for its spill row. */
interface Incoming {
  decoded: Decoded | undefined;
  readonly channel: string;
}

async function loadPg(): Promise<PgModule> {
  try {
    const loaded = (await import('pg')) as unknown as { default?: PgModule } & PgModule;
    return loaded.default ?? loaded;
  } catch (error) {
    throw new OptionsError(
      ErrorCode.PostgresClientMissing,
      `new PostgresBus({ url }) needs pg (node-postgres): npm install pg (${error instanceof Error ? error.message : String(error)})`,
    );
  }
}

/**
 * A `SubscriptionBus` over PostgreSQL LISTEN/NOTIFY, for several processes (or machines) serving one MCP
 * server. Give it your `Pool`, or a URL for the bus to own a small pool; either way it keeps one
 * dedicated listening connection of its own.
 *
 * Best effort, as listen itself, with nothing unnoticed: an event reaches each stream of every node
 * at most once, in publish order per publishing node; after a gap (the listening connection lost) the
 * streams are told what may have changed, and what this node could not NOTIFY is NOTIFYed once
 * PostgreSQL is back. A failure never throws into host code: it is logged once per outage, counted in
 * {@link stats}, and published on `PostgresBusChannel.Connection`.
 *
 * @example
 * ```ts
 * import pg from 'pg';
 * const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });
 * const bus = new PostgresBus({ pool });
 * const hub = new SubscriptionHub({ bus });
 * // in a transaction: await bus.publishIn(client, { kind: 'resource_updated', uri }); delivered on COMMIT
 * // on shutdown: await hub.close(); await bus.close(); await pool.end();
 * ```
 * @example
 * ```ts
 * const bus = new PostgresBus({ url: 'postgres://app@db:5432/app' }); // owns its pool and listening client
 * ```
 */
export class PostgresBus implements SubscriptionBus {
  /** This node's id on the bus. */
  readonly nodeId: string;

  private readonly options: ResolvedPostgresBusOptions;
  private readonly logger: Logger;
  private readonly wire: Wire;
  /** Writes `publishIn()`'s messages: under a node id of their own, so that this node delivers them too, on COMMIT. */
  private readonly committedWire: Wire;
  private readonly channels: Channels;
  private readonly members: BusMembers;
  private readonly counters = {
    published: 0,
    publishedIn: 0,
    spilled: 0,
    received: 0,
    dropped: 0,
    reconnects: 0,
    resubscribes: 0,
    resyncs: 0,
    republished: 0,
  };
  /** The pool NOTIFYs and spill reads go through, once there is one (the url form makes it asynchronously). */
  private pool: PostgresPool | undefined;
  private ownedPool: (PostgresPool & { end(): Promise<void> }) | undefined;
  private listener: ListeningConnection | undefined;
  /** Settles when the url form has made its pool and listener, or failed to. */
  private readonly setUp: Promise<void>;
  private readonly spill: SpillTable | undefined;

  /** Whether NOTIFYs go through: false from a failed one until one succeeds again. */
  private notifying = true;
  /** While the backlog is queued as a probe of a bus whose NOTIFYs failed: {@link send} queues all the same. */
  private probing = false;
  /** Whether the reconciler has had a reply since the listening connection was last ready. */
  private listenedSinceReady = false;
  /**
   * Whether every channel has been LISTENed again since the listening connection was last ready. A
   * channel lost alone afterwards (a spilled message it could not read) is resynced by itself, and does
   * not make the bus disconnected: the connection is what `connected` speaks of.
   */
  private restoredSinceReady = false;
  private everReady = false;
  private connected = false;
  private everConnected = false;
  /** Whether the current outage has been reported: once per outage, however many errors it brings. */
  private outageReported = false;
  private lastProblemAt = 0;
  private readonly reportedOnce = new Set<string>();
  private closing: Promise<void> | undefined;

  /** The one source of truth of what this node follows and of what PostgreSQL LISTENs to for it. */
  private readonly interest: InterestReconciler;
  /** The latest change of each key this node could not publish, for when PostgreSQL is back. */
  private readonly backlog = new UnsentBacklog();
  private retryTimer: NodeJS.Timeout | undefined;

  /** Messages waiting for their NOTIFY, in publish order; one query at a time keeps that order. */
  private readonly outbox: Outgoing[] = [];
  private outboxBytes = 0;
  private sending = false;
  /** Resolves whoever waits for the outbox to empty (close()). */
  private drained: (() => void) | undefined;
  /** Received messages, in order: one waiting for its spill row holds back those after it. */
  private readonly inbox: Incoming[] = [];

  constructor(options: PostgresBusOptions) {
    this.options = resolvePostgresBusOptions(options);
    this.logger = this.options.logger;
    this.members = new BusMembers(this.logger);
    this.nodeId = this.options.nodeId;
    this.channels = new Channels(this.options.channelPrefix, this.options.routing === 'broadcast');
    this.wire = new Wire(this.nodeId, { refs: true });
    this.committedWire = new Wire(`tx:${this.nodeId}`.slice(0, MAX_NODE_ID_LENGTH), { refs: true });
    const spillTable = this.options.spillTable;
    this.spill = spillTable === false ? undefined : new SpillTable(spillTable, this.options.spillTtlMs);
    this.interest = new InterestReconciler(
      {
        isReady: () => this.closing === undefined && this.listener?.isReady() === true,
        subscribe: (channels) =>
          this.listener!.query(channels.map((name) => `LISTEN ${quoteIdentifier(name)}`).join(';')),
        unsubscribe: (channels) =>
          this.listener!.query(channels.map((name) => `UNLISTEN ${quoteIdentifier(name)}`).join(';')),
      },
      {
        gap: (keys) => {
          if (this.options.resync) this.resync(keys);
        },
        failed: (error) => this.evaluate(error, true),
        settled: () => {
          this.listenedSinceReady = true;
          this.evaluate();
        },
      },
      {
        channelOf: (type, key) => this.channels.of(type, key),
        lingerMs: UNLISTEN_DELAY_MS,
        followTimeoutMs: FOLLOW_TIMEOUT_MS,
        batchSize: CHANNELS_PER_COMMAND,
      },
    );
    // One server: every channel shares the listening connection's fate, and the keys' own gaps say what
    // to resync. Broadcast routing's one channel has no keys: its gap resyncs everything.
    if (this.options.routing === 'broadcast') {
      this.interest.hold(this.channels.all, () => {
        if (this.options.resync) this.resync('all');
      });
    } else {
      this.interest.hold(this.channels.resync);
    }

    const connections = this.options.connections;
    const internals = connections.form === 'pool' ? (connections.pool as unknown as PoolInternals) : undefined;
    if (connections.form === 'pool' && (typeof this.options.listener === 'function' || internals?.Client)) {
      this.attach(connections.pool, this.clientMaker(internals?.Client, internals?.options));
      this.setUp = Promise.resolve();
    } else {
      this.setUp = loadPg().then(
        (pg) => {
          if (this.closing !== undefined) return;
          if (connections.form === 'url') {
            const pool = new pg.Pool({ connectionString: connections.url, ...OWNED_POOL });
            // An idle client of the pool lost (a restart): the pool drops it, and the next NOTIFY says more.
            pool.on('error', () => {});
            this.ownedPool = pool;
            this.attach(pool, this.clientMaker(pg.Client, { connectionString: connections.url }));
          } else {
            this.attach(connections.pool, this.clientMaker(pg.Client, internals?.options));
          }
        },
        (error: unknown) => {
          // Reported like an outage (once, logged and published), with the reason in the message.
          this.outageReported = true;
          const reason = error instanceof Error ? error.message : String(error);
          this.logger.error(`PostgresBus could not load pg; events reach this node only: ${reason}`, { error });
          this.announce(false);
        },
      );
    }
  }

  /** Joins the bus: `listener` receives what every other member, here or on another node, publishes. */
  join(listener: BusListener): BusMember {
    const member = this.members.wrap(listener);
    if (this.closing === undefined) this.members.add(member);
    const joined: BusMember = {
      publish: (event, context) => {
        if (!this.members.has(member)) return;
        // Members in this process get the caller's context as it is, as on a MemoryBus.
        this.members.event(event, context, member);
        let body: string;
        try {
          body = this.wire.body(event);
        } catch (error) {
          this.counters.dropped++;
          this.reportOnce('serialize', 'an event could not be serialized for PostgreSQL; it reached this node only', {
            kind: event.kind,
            error,
          });
          return;
        }
        this.sendEvent(event, body, context);
      },
      cancel: (principal, id) => {
        if (!this.members.has(member)) return;
        this.members.cancel(principal, id, member);
        this.send(this.channels.key('c', principal), this.wire.cancel(principal, id), undefined);
      },
      leave: () => {
        this.members.delete(member);
      },
    };
    if (this.options.routing === 'broadcast') return joined;
    return {
      ...joined,
      // A lease: released once, by the stream that took it, so that no other hub's release can take it.
      follow: (interest) =>
        this.members.has(member) && this.closing === undefined ? this.interest.follow(interest) : undefined,
    };
  }

  /**
   * Publishes `event` in the caller's transaction: the NOTIFY (and, for a message over 8,000 bytes, the
   * spill row) goes through `client`, the `PoolClient` (or `Client`) your transaction runs on, so every
   * node, this one included, receives the event when the transaction COMMITs, and none if it rolls
   * back. Resolves once the statement ran; rejects with PostgreSQL's error (which aborts your
   * transaction), or with an `EventError` (`ERR_MCP_SUBSCRIPTIONS_INVALID_EVENT`) for an invalid event or
   * one too large to send (over 8,000 bytes with `spillTable: false`, over 4 MiB), before anything is sent.
   *
   * This node's own streams receive it through PostgreSQL too (not directly, as a hub's publish does), so
   * only while it LISTENs to the event's channel: with interest routing, while one of its streams follows
   * the key, which is all that matters.
   */
  async publishIn(client: PostgresQueryable, event: SubscriptionEvent): Promise<void> {
    const checked = validateEvent(event);
    const message = this.committedWire.event(this.committedWire.body(checked));
    const channel = this.eventChannel(checked);
    const bytes = Buffer.byteLength(message);
    if (bytes <= MAX_NOTIFY_PAYLOAD_BYTES) {
      await client.query('SELECT pg_notify($1, $2)', [channel, message]);
    } else {
      const spill = this.spill;
      if (spill === undefined || tooLarge(message)) {
        throw new EventError(
          `the event takes ${bytes} bytes as a message, over ${spill === undefined ? `a NOTIFY payload's ${MAX_NOTIFY_PAYLOAD_BYTES} and \`spillTable\` is false` : `the bus's ${MAX_MESSAGE_BYTES}`}`,
        );
      }
      // The url form makes its pool once pg is loaded: the spill table is made sure of through it.
      if (this.pool === undefined) await this.setUp;
      const pool = this.pool;
      if (pool === undefined)
        throw new OptionsError(
          ErrorCode.PostgresClientMissing,
          'PostgresBus could not load pg: it has no pool to spill through',
        );
      await spill.ensure(pool);
      await spill.publish(client, channel, message, this.committedWire.refHead);
      this.counters.spilled++;
      this.cleanUpSpill(pool);
    }
    this.counters.publishedIn++;
  }

  /** A snapshot of the connection state and the counters. */
  stats(): PostgresBusStats {
    return {
      connected: this.connected,
      routing: this.options.routing,
      ...this.counters,
      subscriptions: this.interest.subscribed,
      unsubscribed: this.interest.missing,
      unsent: this.backlog.overflow ? -1 : this.backlog.size,
    };
  }

  /**
   * Leaves PostgreSQL: nothing reaches the members any more, the messages already handed to the bus are
   * NOTIFYed (within a second), the listening connection ends (its LISTENs with it), and the pool the
   * url form made is ended (yours stays open). Idempotent, and bounded: each step gets a second. Close
   * your hubs first.
   */
  close(): Promise<void> {
    this.closing ??= this.shutdown();
    return this.closing;
  }

  private async shutdown(): Promise<void> {
    this.members.clear();
    this.connected = false;
    clearTimeout(this.retryTimer);
    this.backlog.clear();
    this.inbox.length = 0;
    this.interest.close();
    await within(this.setUp, CLOSE_STEP_MS);
    if (this.sending || this.outbox.length > 0) {
      await within(new Promise<void>((resolve) => (this.drained = resolve)), CLOSE_STEP_MS);
    }
    await this.listener?.close(CLOSE_STEP_MS);
    if (this.ownedPool !== undefined) await within(this.ownedPool.end(), CLOSE_STEP_MS);
  }

  // -------------------------------------------------------------------------------------------------
  // Connections

  /** How the bus makes each listening client: the caller's factory, or a `Client` of the given settings. */
  private clientMaker(
    Client: (new (config: object) => PostgresListenClient) | undefined,
    settings: object | undefined,
  ): () => PostgresListenClient {
    const listener = this.options.listener;
    if (typeof listener === 'function') return listener;
    const config = { ...(listener ?? settings ?? {}) };
    // A dead peer is noticed by TCP keepalives too, not only when a LISTEN or a NOTIFY fails.
    return () => new Client!({ keepAlive: true, ...config });
  }

  private attach(pool: PostgresPool, makeClient: () => PostgresListenClient): void {
    this.pool = pool;
    this.listener = new ListeningConnection(makeClient, {
      ready: () => this.listenerReady(),
      down: (error) => {
        // Whatever PostgreSQL held for the session is gone: the reconciler LISTENs again once it is back.
        this.interest.lost();
        this.listenedSinceReady = false;
        this.restoredSinceReady = false;
        this.evaluate(error, error === undefined);
      },
      notification: this.onNotification,
    });
    this.listener.start();
  }

  /** The listening connection is up (first, or again): LISTEN what is wanted. */
  private listenerReady(): void {
    if (this.closing !== undefined) return;
    if (this.everReady) this.counters.resubscribes++;
    this.everReady = true;
    this.listenedSinceReady = false;
    this.restoredSinceReady = false;
    this.interest.ready();
    this.evaluate();
  }

  /**
   * Works out `connected` after any change, and reports a change: the first failure of an outage is
   * logged and published, the recovery counted and published (and the backlog sent).
   */
  private evaluate(error?: unknown, failed = false): void {
    if (this.closing !== undefined) return;
    const listening = this.listener?.isReady() === true && this.listenedSinceReady;
    if (listening && this.interest.restored) this.restoredSinceReady = true;
    const up = listening && this.restoredSinceReady && this.notifying;
    if (up && !this.connected) {
      this.connected = true;
      if (this.everConnected) this.counters.reconnects++;
      this.everConnected = true;
      this.outageReported = false;
      this.announce(true);
      this.flushBacklog();
    } else if (!up && (this.connected || error !== undefined || failed)) {
      this.connected = false;
      this.reportOutage(error);
    } else if (up && (error !== undefined || failed)) {
      this.reportOutage(error);
    }
  }

  /**
   * Logs an outage once, however many errors, failed NOTIFYs and failed LISTENs it brings. Only a
   * lost connection is announced as `connected: false`.
   */
  private reportOutage(error: unknown): void {
    if (this.closing !== undefined) return;
    const now = Date.now();
    const sinceLast = now - this.lastProblemAt;
    this.lastProblemAt = now;
    if (this.outageReported && (!this.connected || sinceLast < OUTAGE_QUIET_MS)) return;
    this.outageReported = true;
    this.logger.error(OUTAGE_MESSAGE, { channelPrefix: this.options.channelPrefix, nodeId: this.nodeId, error });
    if (!this.connected) this.announce(false);
  }

  private announce(connected: boolean): void {
    if (connectionChannel.hasSubscribers) {
      connectionChannel.publish({
        connected,
        nodeId: this.nodeId,
        channelPrefix: this.options.channelPrefix,
      } satisfies PostgresConnectionMessage);
    }
  }

  // -------------------------------------------------------------------------------------------------
  // Publishing

  /** The channel an event travels on. */
  private eventChannel(event: SubscriptionEvent): string {
    switch (event.kind) {
      case 'resource_updated':
        return this.channels.key('u', event.uri);
      case 'task_status':
        return this.channels.key('t', event.task.taskId);
      default:
        return this.channels.list(event.kind);
    }
  }

  /** Publishes an event (from its body) on its channel, with what fits of its context. */
  private sendEvent(event: SubscriptionEvent, body: string, context: EventContext | undefined, late = false): void {
    let message = this.wire.event(body, context);
    // The context is what gives way at the size bound: an event that fits alone still travels.
    if (context !== undefined && tooLarge(message)) message = this.wire.event(body, undefined);
    this.send(this.eventChannel(event), message, event, late);
  }

  /**
   * Queues one message for its NOTIFY. Nothing is queued while NOTIFYs fail (it is remembered, by key,
   * for when they go through again); what waits is bounded.
   */
  private send(channel: string, payload: string, unsent: SubscriptionEvent | 'resync' | undefined, late = false): void {
    if (this.closing !== undefined) return;
    if (this.pool === undefined || (!this.notifying && !this.probing)) {
      this.counters.dropped++;
      this.remember(unsent);
      return;
    }
    if (tooLarge(payload)) {
      this.counters.dropped++;
      this.reportOnce(
        'too-large',
        `an event over ${MAX_MESSAGE_BYTES} bytes was not sent to PostgreSQL; it reached this node only`,
      );
      return;
    }
    const bytes = Buffer.byteLength(payload);
    if (bytes > MAX_NOTIFY_PAYLOAD_BYTES && this.spill === undefined) {
      this.counters.dropped++;
      this.reportOnce(
        'no-spill',
        `an event over a NOTIFY payload's ${MAX_NOTIFY_PAYLOAD_BYTES} bytes was not sent (spillTable is false); it reached this node only`,
      );
      return;
    }
    if (this.outboxBytes + bytes > MAX_OUTBOX_BYTES) {
      this.counters.dropped++;
      this.remember(unsent);
      this.reportOutage(new Error(`PostgreSQL has not answered ${MAX_OUTBOX_BYTES} bytes of NOTIFYs`));
      return;
    }
    this.outbox.push({ channel, payload, bytes, unsent, late });
    this.outboxBytes += bytes;
    this.pump();
  }

  /**
   * Sends what waits, one query at a time so that the order of publishes is the order of
   * notifications: up to {@link MESSAGES_PER_QUERY} small messages in one `SELECT pg_notify(…), …` (one
   * transaction, delivered together and in order), or one spilled message. PostgreSQL folds identical
   * notifications of one transaction into one, so a batch ends before a message it already holds.
   */
  private pump(): void {
    const pool = this.pool;
    if (this.sending || pool === undefined) return;
    if (this.outbox.length === 0) {
      this.drained?.();
      return;
    }
    this.sending = true;
    let batch: Outgoing[];
    let sent: Promise<unknown>;
    const first = this.outbox[0]!;
    if (first.bytes > MAX_NOTIFY_PAYLOAD_BYTES) {
      batch = this.outbox.splice(0, 1);
      sent = this.spillOut(pool, first);
    } else {
      const seen = new Set<string>();
      let count = 0;
      for (const message of this.outbox) {
        const key = `${message.channel}\n${message.payload}`;
        if (count === MESSAGES_PER_QUERY || message.bytes > MAX_NOTIFY_PAYLOAD_BYTES || seen.has(key)) break;
        seen.add(key);
        count++;
      }
      batch = this.outbox.splice(0, count);
      const values: string[] = [];
      const calls = batch.map((message, index) => {
        values.push(message.channel, message.payload);
        return `pg_notify($${index * 2 + 1}, $${index * 2 + 2})`;
      });
      sent = pool.query(`SELECT ${calls.join(', ')}`, values);
    }
    for (const message of batch) this.outboxBytes -= message.bytes;
    sent
      .then(
        () => {
          this.counters.published += batch.length;
          for (const message of batch) if (message.late) this.counters.republished++;
          if (!this.notifying) {
            this.notifying = true;
            this.evaluate();
          }
        },
        (error: unknown) => this.notifyFailed(batch, error),
      )
      .finally(() => {
        this.sending = false;
        this.pump();
      });
  }

  /** One spilled message: its row and its notification in one statement, then the cleanup when due. */
  private async spillOut(pool: PostgresPool, message: Outgoing): Promise<void> {
    const spill = this.spill!;
    await spill.ensure(pool);
    await spill.publish(pool, message.channel, message.payload, this.wire.refHead);
    this.counters.spilled++;
    this.cleanUpSpill(pool);
  }

  /** Deletes the spill table's expired rows when due, through the pool (never a caller's transaction). */
  private cleanUpSpill(pool: PostgresPool): void {
    this.spill?.cleanUp(pool).catch((error: unknown) => {
      this.reportOnce('spill-cleanup', 'could not delete expired rows of the spill table (DELETE refused?)', { error });
    });
  }

  /**
   * A NOTIFY query failed. A statement's own failure (a spill table it may not create or write) loses
   * that message alone and is reported once; any other failure is an outage: the batch and everything
   * queued behind it are remembered for later, and NOTIFYs stop until one goes through again.
   */
  private notifyFailed(batch: readonly Outgoing[], error: unknown): void {
    if (this.closing !== undefined) return;
    if (isStatementError(error)) {
      this.counters.dropped += batch.length;
      this.reportOnce(
        'statement',
        'PostgreSQL refused a NOTIFY or a spill (a privilege? see docs/postgres.md); those messages reached this node only',
        {
          error,
        },
      );
      // Tried while NOTIFYs were failing (the backlog as a probe): the next try finds out whether they go through.
      if (!this.notifying) this.armRetry();
      return;
    }
    const set = [...batch, ...this.outbox.splice(0)];
    this.outboxBytes = 0;
    this.counters.dropped += set.length;
    for (const message of set) this.remember(message.unsent);
    this.notifying = false;
    this.armRetry();
    this.evaluate(error, true);
  }

  /** Keeps what could not be published for later. */
  private remember(unsent: SubscriptionEvent | 'resync' | undefined): void {
    // Pure at-most-once (`resync: false`): what could not go out is gone. A cancellation is never kept.
    if (!this.options.resync || unsent === undefined) return;
    if (unsent === 'resync') this.backlog.markAll();
    else this.backlog.remember(unsent);
    this.armRetry();
  }

  /**
   * Tries again in {@link RETRY_MS}: the backlog when there is one (it goes out, or comes back), or else
   * a plain query, while NOTIFYs fail; so a bus that stopped NOTIFYing finds out when it may again.
   */
  private armRetry(): void {
    if (this.retryTimer !== undefined || this.closing !== undefined) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      if (this.closing !== undefined) return;
      if (this.backlog.pending) this.flushBacklog(true);
      else if (!this.notifying) this.probe();
    }, RETRY_MS);
    this.retryTimer.unref();
  }

  private probe(): void {
    const pool = this.pool;
    if (pool === undefined) return;
    pool.query('SELECT 1').then(
      () => {
        if (this.notifying || this.closing !== undefined) return;
        this.notifying = true;
        this.evaluate();
      },
      () => this.armRetry(),
    );
  }

  /**
   * Publishes what could not go out before: the latest change of each key (without its context: the
   * span it was published in is long over), or, past the backlog's bound, a request that every node
   * resync everything. Runs once connected again, or as the probe while NOTIFYs fail (`force`).
   */
  private flushBacklog(force = false): void {
    if (!this.backlog.pending || this.closing !== undefined) return;
    if (!this.connected && !force) return;
    const { events, all } = this.backlog.take();
    // Queued as a probe while NOTIFYs fail: the first success says they go through again, a failure
    // puts everything back and arms the next try.
    this.probing = true;
    for (const event of events) {
      let body: string;
      try {
        body = this.wire.body(event);
      } catch {
        continue; // counted when first refused
      }
      this.sendEvent(event, body, undefined, true);
    }
    if (all) {
      this.send(this.channels.resync, this.wire.resync(), 'resync', true);
    }
    this.probing = false;
    if (!this.notifying && this.outbox.length === 0) this.probe();
  }

  // -------------------------------------------------------------------------------------------------
  // Receiving

  /** A notification from the listening connection. Runs in the client's event handler: nothing may throw out of it. */
  private readonly onNotification = (channel: string, payload: string): void => {
    if (this.closing !== undefined) return;
    const decoded = this.wire.decode(payload);
    if (this.inbox.length >= MAX_WAITING) {
      this.take({ type: 'drop', reason: 'ref' }, channel);
      return;
    }
    if (decoded.type === 'ref') {
      const entry: Incoming = { decoded: undefined, channel };
      this.inbox.push(entry);
      void this.readSpilled(decoded.ref).then((read) => {
        entry.decoded = read;
        this.drainInbox();
      });
      return;
    }
    if (this.inbox.length > 0) {
      this.inbox.push({ decoded, channel });
      return;
    }
    this.take(decoded, channel);
  };

  /** Hands on what has arrived, in order, up to the first message still waiting for its spill row. */
  private drainInbox(): void {
    while (this.inbox.length > 0 && this.inbox[0]!.decoded !== undefined) {
      const { decoded, channel } = this.inbox.shift()!;
      this.take(decoded!, channel);
    }
  }

  /** Reads and decodes a spilled message; never rejects. */
  private async readSpilled(id: string): Promise<Decoded> {
    const pool = this.pool;
    if (pool === undefined || this.spill === undefined) return { type: 'drop', reason: 'ref' };
    let payload: string | undefined;
    try {
      payload = await this.spill.read(pool, id);
    } catch (error) {
      if (this.closing !== undefined) return { type: 'drop', reason: 'ref' };
      this.reportOnce('spill-read', 'could not read a spilled message (PostgreSQL unreachable, or SELECT refused)', {
        error,
      });
      return { type: 'drop', reason: 'ref' };
    }
    if (payload === undefined) return { type: 'drop', reason: 'ref' };
    const decoded = this.wire.decode(payload);
    // A stored message is a message itself, never a reference to another.
    return decoded.type === 'ref' ? { type: 'drop', reason: 'ref' } : decoded;
  }

  private take(message: Decoded, channel: string): void {
    if (this.closing !== undefined) return;
    switch (message.type) {
      case 'own':
        return;
      case 'drop':
        this.counters.dropped++;
        if (message.reason === 'ref') {
          // A message lost on its way (its row gone or unreadable): its channel has a gap, and the keys
          // on it are resynced, as after a lost connection.
          this.reportOnce(
            'spill-missing',
            'a spilled message could not be read (its row expired or was deleted: is spillTtlMs long enough? or too many messages waited behind one); the streams following its channel are resynced',
          );
          this.interest.lost([channel]);
          return;
        }
        this.reportDrop(channel, message.reason);
        return;
      case 'event':
        this.counters.received++;
        this.members.event(message.event, message.context);
        return;
      case 'cancel':
        this.counters.received++;
        this.members.cancel(message.principal, message.id);
        return;
      case 'resync':
        this.counters.received++;
        if (this.options.resync) this.resync('all');
        return;
      case 'ref':
        return; // read by onNotification before it gets here
    }
  }

  /** Keys whose channel had a gap (now LISTENed again): this node's streams that follow them are told. */
  private resync(keys: GapKeys | 'all'): void {
    this.counters.resyncs++;
    this.members.resync(keys);
  }

  private reportDrop(channel: string, reason: DropReason): void {
    this.reportOnce(
      'drop',
      `a message on ${channel} was dropped (${reason}): another format version, or not from mcp-subscriptions; further ones are only counted (stats().dropped)`,
      { reason },
    );
  }

  private reportOnce(kind: string, message: string, details?: Record<string, unknown>): void {
    if (this.reportedOnce.has(kind)) return;
    this.reportedOnce.add(kind);
    this.logger.warn(message, details);
  }
}
