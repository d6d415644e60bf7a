/**
 * `RedisBus`: the hubs of several processes joined over Redis pub/sub. One bus is one node: it
 * publishes what its members publish, and hands its members what other nodes publish on the channels
 * it subscribes to. With interest routing (the default) those are the channels of the keys its streams
 * follow, so a node receives what its own streams follow and not the fleet's traffic. Members in the
 * same process (several hubs joining one bus) reach each other directly, as on a `MemoryBus`, without a
 * round trip through Redis.
 */
import { createHash } from 'node:crypto';
import diagnostics from 'node:diagnostics_channel';
import {
  BusMembers,
  InterestReconciler,
  UnsentBacklog,
  type BusListener,
  type BusMember,
  type EventContext,
  type GapKeys,
  type InterestKeyType,
  type ListChangedKind,
  type Logger,
  type SubscriptionBus,
  type SubscriptionEvent,
} from '../../lib/internal.ts';
import { ClusterConnection } from './cluster-connection.ts';
import { within, wrap, type Connection } from './connection.ts';
import {
  resolveRedisBusOptions,
  type ClientShape,
  type RedisBusOptions,
  type ResolvedRedisBusOptions,
  type ResolvedRouting,
} from './options.ts';
import { createOwnedCluster, createOwnedConnections, type OwnedConnections } from './owned.ts';
import { MAX_MESSAGE_BYTES, tooLarge, Wire, type DropReason } from './wire.ts';

/** `node:diagnostics_channel` channels of the Redis bus. */
export const RedisBusChannel = Object.freeze({
  /**
   * The bus gained or lost its connection to Redis: a `RedisConnectionMessage`,
   * `{ connected, nodeId, channel }`. `connected: false` is published once per outage (as the log line),
   * `connected: true` when both connections are ready and subscribed, first and after each outage.
   */
  Connection: 'mcp-subscriptions:redis:connection',
});

/** Published on `RedisBusChannel.Connection`. */
export interface RedisConnectionMessage {
  readonly connected: boolean;
  /** The bus's `nodeId`. */
  readonly nodeId: string;
  /** The bus's legacy channel, `${channelPrefix}:bus`, which names its prefix. */
  readonly channel: string;
}

/** A snapshot of the bus's state and counters since it was created (`bus.stats()`). */
export interface RedisBusStats {
  /** Both connections are ready and the subscriber is subscribed: other nodes hear this one, and it hears them. */
  connected: boolean;
  /** The routing in use: `'interest'`, `'buckets'` or `'broadcast'` (the `routing` option). */
  routing: ResolvedRouting['mode'];
  /** Messages (events and cancellations, legacy copies included) Redis acknowledged publishing. */
  published: number;
  /** Valid messages received from other nodes and handed to this node's members. */
  received: number;
  /**
   * Messages lost: publishes not sent because the bus was not connected (or Redis refused them, or they were over
   * 4 MiB, or 16 MiB of PUBLISHes already awaited Redis's reply), plus received messages refused as
   * malformed or foreign (another format version, over 4 MiB).
   */
  dropped: number;
  /** Times the bus got its connection back after losing it. */
  reconnects: number;
  /**
   * Redis channels this node is subscribed to now, as Redis's replies said: the fixed ones and those of
   * the keys its streams follow (and those let go less than a second ago).
   */
  subscriptions: number;
  /** Channels this node wants (the fixed ones, and those of the keys its streams follow) that Redis has not confirmed yet. */
  unsubscribed: number;
  /** Times the bus subscribed its channels again after losing them: a reconnect, a failover or a slot move. */
  resubscribes: number;
  /**
   * Resyncs this node ran: a channel subscribed again after a gap (its keys' streams were told they
   * may have changed), or a resync of everything another node asked for.
   */
  resyncs: number;
  /** Keys whose latest change this node could not publish yet, published once Redis is back (see docs/redis.md). */
  unsent: number;
  /** Changes published late, once Redis was back, and resyncs of everything asked of the other nodes. */
  republished: number;
  /**
   * Nodes of the first release (wire version 1) on this Redis, as last counted (every second): while
   * there are any, each message is also published for them on `${channelPrefix}:bus`. Always 0 on a cluster.
   */
  legacyNodes: number;
}

const connectionChannel = diagnostics.channel(RedisBusChannel.Connection);

/**
 * How many bytes of PUBLISHes may await Redis's reply before more are dropped. A connection that is up
 * drains far faster; this only bites when Redis stops answering without the socket closing (a network
 * partition), where the client would otherwise queue every event in memory until TCP gives up.
 */
const MAX_IN_FLIGHT_BYTES = 16 * 1024 * 1024;

/** How long `close()` waits for each graceful step (unsubscribe, QUIT) before going on without it. */
const CLOSE_STEP_MS = 1000;

/**
 * How long a stream's acknowledgement may wait for the SUBSCRIBE of a key new to this node. Redis
 * answers in well under a millisecond; this bounds a Redis that stops answering without closing (the
 * channel then has a gap, and its keys are resynced once it is subscribed).
 */
const FOLLOW_TIMEOUT_MS = 2000;

/**
 * How soon a backlog of unsent changes is tried again while the bus is connected (a PUBLISH refused,
 * or the in-flight bound reached, without an outage).
 */
const BACKLOG_RETRY_MS = 1000;

/**
 * How long a channel no stream follows any more stays subscribed: a client that reconnects (or a
 * page that reloads) follows the same keys again within this, and pays no UNSUBSCRIBE + SUBSCRIBE.
 * The channels let go in one interval go out as one UNSUBSCRIBE.
 */
const UNSUBSCRIBE_DELAY_MS = 1000;

/** The most channels in one SUBSCRIBE or UNSUBSCRIBE: a large open is sent in pieces, none of them huge. */
const CHANNELS_PER_COMMAND = 1000;

/** How often a node counts the first-release nodes on its Redis (one PUBSUB CHANNELS and one NUMSUB). */
const LEGACY_CHECK_MS = 1000;

/**
 * How long without a failure ends an outage that never cost the connection (a cluster shard, refused
 * publishes), so that the next failure is logged again; one that cost it ends when it is back.
 */
const OUTAGE_QUIET_MS = 10_000;

const OUTAGE_MESSAGE =
  "Redis is unreachable (or refuses the bus's commands); events reach this node's streams only until it is back";

/** The channel suffix of each list kind. */
const LIST_SUFFIX: Record<ListChangedKind, string> = {
  tools_list_changed: 'tools',
  prompts_list_changed: 'prompts',
  resources_list_changed: 'resources',
};

/**
 * A key's digest in a channel name: 22 base64url characters of its SHA-256 (132 bits). Channel names
 * stay short whatever the URI's length, carry no URI, task id or principal (which `PUBSUB CHANNELS`,
 * `MONITOR` and ACL logs would show), and spread evenly over a cluster's slots.
 */
function digest(key: string): string {
  return createHash('sha256').update(key).digest('base64url').slice(0, 22);
}

/** The routings, by the name of their presence channel. */
const ROUTING_NAMES = ['interest', 'broadcast', 'buckets'] as const;

/** A caller's client as the bus's connection in `role`: a cluster client publishes and subscribes sharded. */
function callerConnection(shape: ClientShape, role: 'publisher' | 'subscriber'): Connection {
  return shape.cluster ? ClusterConnection.wrap(shape.client, false, role) : wrap(shape.library, shape.client, false);
}

/**
 * A `SubscriptionBus` over Redis pub/sub, for several processes (or machines) serving one MCP server.
 * Give it your own ioredis or node-redis connections (a publisher and a dedicated subscriber), or a URL
 * for the bus to create and own its two connections.
 *
 * Best effort, as listen itself: an event reaches each stream of every node at most once, in publish
 * order per publishing node; while Redis is unreachable events reach only the streams of the node that
 * published them, and nothing is replayed when it is back. A Redis failure never throws into host code:
 * it is logged once per outage, counted in {@link stats}, and published on `RedisBusChannel.Connection`.
 *
 * @example
 * ```ts
 * import { Redis } from 'ioredis';
 * const publisher = new Redis(process.env.REDIS_URL);
 * const bus = new RedisBus({ publisher, subscriber: publisher.duplicate() });
 * const hub = new SubscriptionHub({ bus });
 * // on shutdown: await hub.close(); await bus.close();
 * ```
 * @example
 * ```ts
 * const bus = new RedisBus({ url: 'redis://127.0.0.1:6379' }); // owns its connections (ioredis or redis)
 * ```
 */
export class RedisBus implements SubscriptionBus {
  /** This node's id on the bus. */
  readonly nodeId: string;
  /**
   * The first release's channel, `${channelPrefix}:bus`: this node hears first-release nodes there and,
   * while there are any, publishes a copy of each message there for them (see docs/redis.md, rolling upgrades).
   */
  readonly channel: string;

  private readonly options: ResolvedRedisBusOptions;
  private readonly routing: ResolvedRouting;
  private readonly logger: Logger;
  private readonly wire: Wire;
  private readonly members: BusMembers;
  private readonly counters = {
    published: 0,
    received: 0,
    dropped: 0,
    reconnects: 0,
    resubscribes: 0,
    resyncs: 0,
    republished: 0,
  };
  /** `${channelPrefix}:2:`: how every channel of this release starts. */
  private readonly base: string;
  private readonly listChannels: Record<ListChangedKind, string>;
  /** The channel of `'broadcast'` routing. */
  private readonly allChannel: string;
  /** The channel every node holds for a resync of everything (`'broadcast'` routing: {@link allChannel}). */
  private readonly resyncChannel: string;
  /**
   * The presence channels of every routing, `${prefix}:2:nodes:<routing>` (and, for buckets, one more
   * naming their number): a node subscribes to its routing's, which tells the others its release and its
   * routing through one `PUBSUB NUMSUB` of known names (never a scan of the server's channels).
   */
  private readonly presence: Record<(typeof ROUTING_NAMES)[number], string>;
  /** With buckets: `${prefix}:2:nodes:buckets-<n>`, held besides `presence.buckets`. */
  private readonly bucketsPresence: string | undefined;
  /** The connections, once there are any (the url form creates them asynchronously). */
  private publisher: Connection | undefined;
  private subscriber: Connection | undefined;
  /** Settles when the url form has created its connections, or failed to. */
  private readonly setUp: Promise<void>;
  /** Whether the subscriber has been ready before: a later ready is a re-subscription. */
  private everSubscribed = false;
  private connected = false;
  private everConnected = false;
  /** Whether the current outage has been reported: once per outage, however many errors it brings. */
  private outageReported = false;
  private inFlightBytes = 0;
  /** When the last failure was seen (see {@link reportOutage}). */
  private lastProblemAt = 0;
  /** Problems reported once per bus (a malformed message, an oversized event): their kinds. */
  private readonly reportedOnce = new Set<string>();
  private closing: Promise<void> | undefined;

  /**
   * The one source of truth of what this node follows (reference counts, through leases) and of what
   * Redis has (its replies): every SUBSCRIBE and UNSUBSCRIBE goes through it.
   */
  private readonly interest: InterestReconciler;
  /** The latest change of each key this node could not publish, for when Redis is back. */
  private readonly backlog = new UnsentBacklog();
  private backlogTimer: NodeJS.Timeout | undefined;
  /** Nodes of the first release on this Redis, as last counted; -1 before the first count. */
  private legacyNodes = -1;
  private legacyTimer: NodeJS.Timeout | undefined;
  private legacyChecking = false;

  constructor(options: RedisBusOptions) {
    this.options = resolveRedisBusOptions(options);
    this.logger = this.options.logger;
    this.members = new BusMembers(this.logger);
    this.nodeId = this.options.nodeId;
    this.routing = this.options.routing;
    const prefix = this.options.channelPrefix;
    this.channel = `${prefix}:bus`;
    this.base = `${prefix}:2:`;
    this.listChannels = {
      tools_list_changed: `${this.base}l:${LIST_SUFFIX.tools_list_changed}`,
      prompts_list_changed: `${this.base}l:${LIST_SUFFIX.prompts_list_changed}`,
      resources_list_changed: `${this.base}l:${LIST_SUFFIX.resources_list_changed}`,
    };
    this.allChannel = `${this.base}all`;
    this.resyncChannel = this.routing.mode === 'broadcast' ? this.allChannel : `${this.base}resync`;
    const routing = this.routing;
    this.presence = {
      interest: `${this.base}nodes:interest`,
      broadcast: `${this.base}nodes:broadcast`,
      buckets: `${this.base}nodes:buckets`,
    };
    this.bucketsPresence = routing.mode === 'buckets' ? `${this.base}nodes:buckets-${routing.buckets}` : undefined;
    this.wire = new Wire(this.nodeId);
    this.interest = new InterestReconciler(
      {
        isReady: () => this.closing === undefined && this.subscriber?.isReady() === true,
        subscribe: (channels) => this.subscriber!.subscribe(channels),
        unsubscribe: (channels) => this.subscriber!.unsubscribe(channels),
      },
      {
        gap: (keys) => {
          if (this.options.resync) this.resync(keys);
        },
        failed: (error) => this.evaluate(error, true),
        settled: () => this.evaluate(),
      },
      {
        channelOf: (type, key) => this.channelOf(type, key),
        lingerMs: UNSUBSCRIBE_DELAY_MS,
        followTimeoutMs: FOLLOW_TIMEOUT_MS,
        batchSize: CHANNELS_PER_COMMAND,
      },
    );
    const connections = this.options.connections;
    if (connections.form === 'clients') {
      this.attach(
        callerConnection(connections.publisher, 'publisher'),
        callerConnection(connections.subscriber, 'subscriber'),
      );
      this.setUp = Promise.resolve();
    } else {
      const owned =
        connections.form === 'url'
          ? createOwnedConnections(connections.url, connections.client, prefix, this.nodeId)
          : createOwnedCluster(connections.seeds, connections.client, prefix, this.nodeId);
      this.setUp = owned.then(
        (owned) => this.adopt(owned),
        (error: unknown) => {
          // Reported like an outage (once, logged and published), with the reason in the message: a
          // missing library is an OptionsError whose message says what to install.
          this.outageReported = true;
          const reason = error instanceof Error ? error.message : String(error);
          this.logger.error(`RedisBus could not create its Redis connections; events reach this node only: ${reason}`, {
            error,
          });
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
          this.reportOnce('serialize', 'an event could not be serialized for Redis; it reached this node only', {
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
        this.send(this.keyChannel('c', principal), this.wire.cancel(principal, id));
        if (this.legacyNodes > 0) this.send(this.channel, this.wire.legacyCancel(principal, id));
      },
      leave: () => {
        this.members.delete(member);
      },
    };
    if (this.routing.mode === 'broadcast') return joined;
    return {
      ...joined,
      // A lease: released once, by the stream that took it, so that no other hub's release can take it.
      follow: (interest) =>
        this.members.has(member) && this.closing === undefined ? this.interest.follow(interest) : undefined,
    };
  }

  /** A snapshot of the connection state and the counters. */
  stats(): RedisBusStats {
    return {
      connected: this.connected,
      routing: this.routing.mode,
      ...this.counters,
      subscriptions: this.interest.subscribed,
      unsubscribed: this.interest.missing,
      unsent: this.backlog.overflow ? -1 : this.backlog.size,
      legacyNodes: Math.max(0, this.legacyNodes),
    };
  }

  /**
   * Leaves Redis: nothing reaches the members any more, the subscriptions end, and the connections the
   * bus created are closed (yours stay open, and the listeners the bus put on them are removed).
   * Idempotent, and bounded: each graceful step gets a second, then the bus's own connections are
   * closed hard, so it returns promptly even while Redis is down. Close your hubs first.
   */
  close(): Promise<void> {
    this.closing ??= this.shutdown();
    return this.closing;
  }

  private async shutdown(): Promise<void> {
    this.members.clear();
    this.connected = false;
    clearInterval(this.legacyTimer);
    clearTimeout(this.backlogTimer);
    this.backlog.clear();
    const channels = this.interest.close();
    // The url form may still be loading its library: wait for it (bounded), then close what it made.
    await within(this.setUp, CLOSE_STEP_MS);
    const { publisher, subscriber } = this;
    await Promise.all(
      [publisher, subscriber].map(async (connection, index) => {
        if (connection === undefined) return;
        // One object may be both (a cluster client): closed once.
        if (index === 1 && connection === publisher) return;
        if (connection.owned) {
          // QUIT ends the subscriptions with the connection. The connection keeps the bus's error
          // listener: whatever it still emits goes nowhere.
          await connection.end(CLOSE_STEP_MS);
          return;
        }
        // A caller's subscriber stays open: unsubscribe, then let go of it. While it is down the
        // UNSUBSCRIBE is not waited for: a client with an offline queue sends it when it is back (so
        // no stale subscription outlives the bus), one without refuses it, and neither may hold up close().
        if (connection === subscriber) {
          const unsubscribed = Promise.all(this.chunks(channels).map((chunk) => connection.unsubscribe(chunk)));
          if (connection.isReady()) await within(unsubscribed, CLOSE_STEP_MS);
          else unsubscribed.catch(() => {});
        }
        connection.detach();
      }),
    );
  }

  // -------------------------------------------------------------------------------------------------
  // Channels

  /** The channels every node of this routing subscribes to, whatever its streams follow. */
  private fixedChannels(): string[] {
    const fixed: string[] = [];
    if (this.routing.mode === 'broadcast') fixed.push(this.allChannel);
    // The legacy channel and the presence channel serve rolling upgrades from the first release,
    // which never ran on a cluster.
    if (this.subscriber?.sharded !== true) {
      fixed.push(this.channel, this.presence[this.routing.mode]);
      if (this.bucketsPresence !== undefined) fixed.push(this.bucketsPresence);
    }
    return fixed;
  }

  /** The channel an event travels on. */
  private eventChannel(event: SubscriptionEvent): string {
    if (this.routing.mode === 'broadcast') return this.allChannel;
    switch (event.kind) {
      case 'resource_updated':
        return this.keyChannel('u', event.uri);
      case 'task_status':
        return this.keyChannel('t', event.task.taskId);
      default:
        return this.listChannels[event.kind];
    }
  }

  /** The channel of a resource URI (`u`), a task id (`t`) or a principal's cancellations (`c`). */
  private keyChannel(type: 'u' | 't' | 'c', key: string): string {
    const routing = this.routing;
    if (routing.mode === 'broadcast') return this.allChannel;
    const hash = digest(`${type}:${key}`);
    if (routing.mode === 'interest') return `${this.base}${type}:${hash}`;
    // The digest's first 48 bits, as a number, spread keys evenly over the buckets.
    const bucket = Buffer.from(hash.slice(0, 8), 'base64url').readUIntBE(0, 6) % routing.buckets;
    return `${this.base}b:${bucket}`;
  }

  /** The channel of a key, for the reconciler. */
  private channelOf(type: InterestKeyType, key: string): string {
    return type === 'l' ? this.listChannels[key as ListChangedKind] : this.keyChannel(type, key);
  }

  /** Keys whose channel had a gap (now subscribed again): this node's streams that follow them are told. */
  private resync(keys: GapKeys | 'all'): void {
    this.counters.resyncs++;
    this.members.resync(keys);
  }

  private chunks(channels: readonly string[]): string[][] {
    const chunks: string[][] = [];
    for (let at = 0; at < channels.length; at += CHANNELS_PER_COMMAND) {
      chunks.push(channels.slice(at, at + CHANNELS_PER_COMMAND));
    }
    return chunks;
  }

  // -------------------------------------------------------------------------------------------------
  // Connections

  /** The url form's connections are ready to be listened to: adopt them, unless closed meanwhile. */
  private adopt(owned: OwnedConnections): void {
    this.attach(owned.publisher, owned.subscriber);
    if (this.closing === undefined) owned.start();
  }

  private attach(publisher: Connection, subscriber: Connection): void {
    this.publisher = publisher;
    this.subscriber = subscriber;
    subscriber.onMessage(this.onMessage);
    for (const channel of this.fixedChannels()) this.interest.hold(channel);
    // On a cluster the resync channel is on a shard of its own, which can fail alone: a resync of
    // everything asked meanwhile may be lost, so this node runs one. On one server every channel shares
    // the connection's fate, and the keys' own gaps already say what to resync.
    const resyncAll = (): void => {
      if (this.options.resync) this.resync('all');
    };
    if (subscriber.sharded) this.interest.hold(this.resyncChannel, resyncAll);
    else if (this.resyncChannel !== this.allChannel) this.interest.hold(this.resyncChannel);
    if (this.routing.mode === 'broadcast') this.interest.hold(this.allChannel, resyncAll);
    publisher.watch({
      ready: () => this.evaluate(),
      down: (error) => this.evaluate(error),
    });
    // One client may do both (a cluster client): it is watched twice, once for each role.
    subscriber.watch({
      ready: () => this.subscriberReady(),
      down: (error) => {
        // Whatever Redis held for this connection is unknown now: the reconciler finds out.
        this.interest.lost();
        this.evaluate(error);
      },
      // A cluster shard failed or a slot moved: those channels only; the bus stays connected.
      lost: (channels, error) => {
        this.interest.lost(channels);
        if (error !== undefined) this.reportOutage(error);
      },
    });
    if (subscriber.isReady()) this.subscriberReady();
    this.evaluate();
  }

  /** The subscriber is ready (first, or after a reconnect, a failover or a slot move): subscribe what is wanted. */
  private subscriberReady(): void {
    if (this.closing !== undefined) return;
    if (this.everSubscribed) this.counters.resubscribes++;
    this.everSubscribed = true;
    this.interest.ready();
    this.startLegacyChecks();
    this.evaluate();
  }

  /**
   * Works out `connected` from the connections' state after any change, and reports a change: the
   * first failure of an outage is logged and published, the recovery is counted and published. Outside
   * a cluster the first count of first-release nodes comes before `connected`, so that nothing published
   * once the bus says it is connected misses one of them.
   */
  private evaluate(error?: unknown, failed = false): void {
    if (this.closing !== undefined) return;
    // On one server every subscription shares the connection's fate: connected means all of them are
    // back. On a cluster a shard fails alone: the bus stays connected, and `unsubscribed` says what waits.
    const up =
      this.publisher?.isReady() === true &&
      this.subscriber?.isReady() === true &&
      (this.subscriber.sharded || (this.interest.restored && this.legacyNodes >= 0));
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

  // -------------------------------------------------------------------------------------------------
  // Rolling upgrades

  /** Whether first-release nodes can be on this Redis at all (not on a cluster). */
  private legacyChecks(): boolean {
    return this.subscriber?.sharded !== true;
  }

  /** Counts first-release nodes now and every LEGACY_CHECK_MS, outside a cluster. */
  private startLegacyChecks(): void {
    if (!this.legacyChecks() || this.closing !== undefined) return;
    void this.checkLegacy();
    if (this.legacyTimer === undefined) {
      this.legacyTimer = setInterval(() => void this.checkLegacy(), LEGACY_CHECK_MS);
      this.legacyTimer.unref();
    }
  }

  /**
   * Every node of this release subscribes to the legacy channel and to the presence channel of its
   * routing; a first-release node to the legacy channel only. So the first-release nodes are the legacy
   * channel's subscribers less the presence channels'. A node of another routing (or another number of
   * buckets) on this prefix is a misconfiguration: the two would not hear each other's channels, so it
   * is reported. One `PUBSUB NUMSUB` of five channels at most: its cost does not grow with the channels
   * the server holds.
   */
  private async checkLegacy(): Promise<void> {
    const publisher = this.publisher;
    if (publisher === undefined || !publisher.isReady() || this.legacyChecking || this.closing !== undefined) return;
    this.legacyChecking = true;
    try {
      const asked = [this.channel, ...ROUTING_NAMES.map((name) => this.presence[name])];
      if (this.bucketsPresence !== undefined) asked.push(this.bucketsPresence);
      const reply = (await publisher.command(['PUBSUB', 'NUMSUB', ...asked])) as unknown[];
      const count = (index: number): number => Number(reply[index * 2 + 1]);
      const byRouting = ROUTING_NAMES.map((name, index) => [name, count(index + 1)] as const);
      this.legacyNodes = Math.max(0, count(0) - byRouting.reduce((sum, [, nodes]) => sum + nodes, 0));
      const mine = this.routing.mode;
      const others: string[] = byRouting.filter(([name, nodes]) => name !== mine && nodes > 0).map(([name]) => name);
      const routing = this.routing;
      if (routing.mode === 'buckets' && count(4) < count(3)) others.push(`buckets other than ${routing.buckets}`);
      if (others.length > 0) {
        this.reportOnce(
          'routing',
          `nodes with another routing share the channel prefix ${JSON.stringify(this.options.channelPrefix)} (${others.join(', ')}; this node: ${routing.mode === 'buckets' ? `buckets ${routing.buckets}` : mine}); events between them are lost: give every node the same \`routing\``,
        );
      }
    } catch (error) {
      // Not counted (an ACL that refuses PUBSUB): copies go out, so first-release nodes miss nothing.
      if (this.legacyNodes < 0) this.legacyNodes = 1;
      this.reportOnce(
        'legacy-check',
        'could not count first-release nodes (PUBSUB refused?); copies for them are published on the legacy channel all the same',
        { error },
      );
    } finally {
      this.legacyChecking = false;
    }
    this.evaluate();
  }

  // -------------------------------------------------------------------------------------------------
  // Messages

  /**
   * Logs an outage once, however many errors, failed publishes and failed subscriptions it brings: the
   * whole connection, or (on a cluster) a shard, while the bus stays connected to the rest. Only a lost
   * connection is announced as `connected: false`.
   */
  private reportOutage(error: unknown): void {
    if (this.closing !== undefined) return;
    // Failures less than OUTAGE_QUIET_MS apart are one outage: a cluster client that keeps refusing
    // publishes for a while after a failover (its slot map refreshing) is not a new one each time.
    const now = Date.now();
    const sinceLast = now - this.lastProblemAt;
    this.lastProblemAt = now;
    if (this.outageReported && (!this.connected || sinceLast < OUTAGE_QUIET_MS)) return;
    this.outageReported = true;
    this.logger.error(OUTAGE_MESSAGE, { channel: this.channel, nodeId: this.nodeId, error });
    if (!this.connected) this.announce(false);
  }

  private announce(connected: boolean): void {
    if (connectionChannel.hasSubscribers) {
      connectionChannel.publish({
        connected,
        nodeId: this.nodeId,
        channel: this.channel,
      } satisfies RedisConnectionMessage);
    }
  }

  /**
   * Publishes an event (from its body) on its channel, with what fits of its context, and its legacy
   * copy while first-release nodes share the Redis. What cannot go out now is remembered, by key, and
   * published once Redis is back.
   */
  private sendEvent(event: SubscriptionEvent, body: string, context: EventContext | undefined): void {
    let message = this.wire.event(body, context);
    // The context is what gives way at the size bound: an event that fits alone still travels.
    if (context !== undefined && tooLarge(message)) message = this.wire.event(body, undefined);
    this.send(this.eventChannel(event), message, event);
    // The first release's wire has no context: the copy carries the event alone.
    if (this.legacyNodes > 0) this.send(this.channel, this.wire.legacyEvent(body));
  }

  /** Keeps what could not be published for later, and makes sure a later comes while connected. */
  private remember(unsent: SubscriptionEvent | 'resync'): void {
    // Pure at-most-once (`resync: false`): what could not go out is gone.
    if (!this.options.resync) return;
    if (unsent === 'resync') this.backlog.markAll();
    else this.backlog.remember(unsent);
    if (this.connected && this.backlogTimer === undefined && this.closing === undefined) {
      this.backlogTimer = setTimeout(() => {
        this.backlogTimer = undefined;
        if (this.connected) this.flushBacklog();
      }, BACKLOG_RETRY_MS);
      this.backlogTimer.unref();
    }
  }

  /**
   * Publishes what could not go out before: the latest change of each key (without its context: the
   * span it was published in is long over), or, when more keys changed than the backlog holds, a
   * request that every node resync everything. Listen's notifications are hints, so a late one loses
   * nothing, and a key's latest change stands for every change of it.
   */
  private flushBacklog(): void {
    if (!this.backlog.pending || this.closing !== undefined) return;
    const { events, all } = this.backlog.take();
    for (const event of events) {
      let body: string;
      try {
        body = this.wire.body(event);
      } catch {
        continue; // counted when first refused
      }
      this.counters.republished++;
      this.sendEvent(event, body, undefined);
    }
    if (all) {
      this.counters.republished++;
      this.send(this.resyncChannel, this.wire.resync(), 'resync');
    }
  }

  /**
   * Sends one message to the other nodes: one PUBLISH, whatever the number of streams or nodes. Nothing
   * is sent while the bus is not connected: a caller's client would queue it offline and send it after
   * the outage, late (and possibly after a newer event); and the first connection seen down stops both
   * (they share one server). The bytes awaiting Redis's reply are bounded. `unsent` is what to remember
   * when the message does not go out (an event, or a resync of everything); a cancellation is not kept.
   */
  private send(channel: string, payload: string, unsent?: SubscriptionEvent | 'resync'): void {
    const publisher = this.publisher;
    if (this.closing !== undefined) return;
    if (publisher === undefined || !this.connected || !publisher.isReady()) {
      this.counters.dropped++;
      if (unsent !== undefined) this.remember(unsent);
      return;
    }
    if (tooLarge(payload)) {
      this.counters.dropped++;
      this.reportOnce(
        'too-large',
        `an event over ${MAX_MESSAGE_BYTES} bytes was not sent to Redis; it reached this node only`,
      );
      return;
    }
    const bytes = payload.length;
    if (this.inFlightBytes + bytes > MAX_IN_FLIGHT_BYTES) {
      this.counters.dropped++;
      if (unsent !== undefined) this.remember(unsent);
      this.reportOutage(new Error(`Redis has not answered ${MAX_IN_FLIGHT_BYTES} bytes of PUBLISHes`));
      return;
    }
    this.inFlightBytes += bytes;
    publisher.publish(channel, payload).then(
      () => {
        this.inFlightBytes -= bytes;
        this.counters.published++;
      },
      (error: unknown) => {
        this.inFlightBytes -= bytes;
        this.counters.dropped++;
        if (unsent !== undefined) this.remember(unsent);
        // Once per outage however many publishes fail: the next report comes after a recovery.
        this.reportOutage(error);
      },
    );
  }

  /** A message from a channel. Runs in the client's event handler: nothing may throw out of it. */
  private readonly onMessage = (channel: string, raw: string): void => {
    if (this.closing !== undefined) return;
    // The presence channel carries nothing; anything published there is foreign like any other.
    const message = this.wire.decode(typeof raw === 'string' ? raw : String(raw), channel === this.channel);
    switch (message.type) {
      case 'own':
        return;
      case 'drop':
        this.counters.dropped++;
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
    }
  };

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
