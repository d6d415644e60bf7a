/**
 * `RedisBus`: the hubs of several processes joined over Redis pub/sub. One bus is one node: it
 * publishes what its members publish on one channel, and hands its members what other nodes publish
 * there. Members in the same process (several hubs joining one bus) reach each other directly, as on a
 * `MemoryBus`, without a round trip through Redis.
 */
import diagnostics from 'node:diagnostics_channel';
import type {
  BusListener,
  BusMember,
  Logger,
  RequestId,
  SubscriptionBus,
  SubscriptionEvent,
} from '../../lib/internal.ts';
import { within, wrap, type Connection } from './connection.ts';
import { resolveRedisBusOptions, type RedisBusOptions, type ResolvedRedisBusOptions } from './options.ts';
import { createOwnedConnections, type OwnedConnections } from './owned.ts';
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
  /** The Redis channel the bus uses, `${channelPrefix}:bus`. */
  readonly channel: string;
}

/** A snapshot of the bus's state and counters since it was created (`bus.stats()`). */
export interface RedisBusStats {
  /** Both connections are ready and the subscriber is subscribed: other nodes hear this one, and it hears them. */
  connected: boolean;
  /** Messages (events and cancellations) Redis acknowledged publishing. */
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

const OUTAGE_MESSAGE =
  "Redis is unreachable (or refuses the bus's commands); events reach this node's streams only until it is back";

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
  /** The Redis channel the bus publishes and subscribes on: `${channelPrefix}:bus`. */
  readonly channel: string;

  private readonly options: ResolvedRedisBusOptions;
  private readonly logger: Logger;
  private readonly wire: Wire;
  private readonly members = new Set<BusListener>();
  private readonly counters = { published: 0, received: 0, dropped: 0, reconnects: 0 };
  /** The connections, once there are any (the url form creates them asynchronously). */
  private publisher: Connection | undefined;
  private subscriber: Connection | undefined;
  /** Settles when the url form has created its connections, or failed to. */
  private readonly setUp: Promise<void>;
  private subscribed = false;
  private connected = false;
  private everConnected = false;
  /** Whether the current outage has been reported: once per outage, however many errors it brings. */
  private outageReported = false;
  private inFlightBytes = 0;
  /** Problems reported once per bus (a malformed message, an oversized event): their kinds. */
  private readonly reportedOnce = new Set<string>();
  private closing: Promise<void> | undefined;

  constructor(options: RedisBusOptions) {
    this.options = resolveRedisBusOptions(options);
    this.logger = this.options.logger;
    this.nodeId = this.options.nodeId;
    this.channel = `${this.options.channelPrefix}:bus`;
    this.wire = new Wire(this.nodeId);
    const connections = this.options.connections;
    if (connections.form === 'clients') {
      this.attach(
        wrap(connections.publisher.library, connections.publisher.client, false),
        wrap(connections.subscriber.library, connections.subscriber.client, false),
      );
      this.setUp = Promise.resolve();
    } else {
      this.setUp = createOwnedConnections(
        connections.url,
        connections.client,
        this.options.channelPrefix,
        this.nodeId,
      ).then(
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
    // Each membership is its own object, so one hub joining twice is two members.
    const member: BusListener = {
      event: (event) => listener.event(event),
      cancel: (principal, id) => listener.cancel(principal, id),
    };
    if (this.closing === undefined) this.members.add(member);
    return {
      publish: (event) => {
        if (!this.members.has(member)) return;
        for (const other of this.members) if (other !== member) this.hand(other, event);
        let payload: string;
        try {
          payload = this.wire.event(event);
        } catch (error) {
          this.counters.dropped++;
          this.reportOnce('serialize', 'an event could not be serialized for Redis; it reached this node only', {
            kind: event.kind,
            error,
          });
          return;
        }
        this.send(payload);
      },
      cancel: (principal, id) => {
        if (!this.members.has(member)) return;
        for (const other of this.members) if (other !== member) this.handCancel(other, principal, id);
        this.send(this.wire.cancel(principal, id));
      },
      leave: () => {
        this.members.delete(member);
      },
    };
  }

  /** A snapshot of the connection state and the counters. */
  stats(): RedisBusStats {
    return { connected: this.connected, ...this.counters };
  }

  /**
   * Leaves Redis: nothing reaches the members any more, the subscription ends, and the connections the
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
    // The url form may still be loading its library: wait for it (bounded), then close what it made.
    await within(this.setUp, CLOSE_STEP_MS);
    const { publisher, subscriber } = this;
    await Promise.all(
      [publisher, subscriber].map(async (connection) => {
        if (connection === undefined) return;
        if (connection.owned) {
          // QUIT ends the subscription with the connection. The connection keeps the bus's error
          // listener: whatever it still emits goes nowhere.
          await connection.end(CLOSE_STEP_MS);
          return;
        }
        // A caller's subscriber stays open: unsubscribe, then let go of it. While it is down the
        // UNSUBSCRIBE is not waited for: a client with an offline queue sends it when it is back (so
        // no stale subscription outlives the bus), one without refuses it, and neither may hold up close().
        if (connection === subscriber) {
          const unsubscribed = connection.unsubscribe(this.channel);
          if (connection.isReady()) await within(unsubscribed, CLOSE_STEP_MS);
          else unsubscribed.catch(() => {});
        }
        connection.detach();
      }),
    );
  }

  /** The url form's connections are ready to be listened to: adopt them, unless closed meanwhile. */
  private adopt(owned: OwnedConnections): void {
    this.attach(owned.publisher, owned.subscriber);
    if (this.closing === undefined) owned.start();
  }

  private attach(publisher: Connection, subscriber: Connection): void {
    this.publisher = publisher;
    this.subscriber = subscriber;
    publisher.watch({
      ready: () => this.evaluate(),
      down: (error) => this.evaluate(error),
    });
    subscriber.watch({
      ready: () => this.subscribe(),
      down: (error) => {
        this.subscribed = false;
        this.evaluate(error);
      },
    });
    if (subscriber.isReady()) this.subscribe();
    this.evaluate();
  }

  /** Subscribes (again): at start and on every 'ready' of the subscriber. */
  private subscribe(): void {
    const subscriber = this.subscriber;
    if (subscriber === undefined || this.closing !== undefined) return;
    subscriber.subscribe(this.channel, this.onMessage).then(
      () => {
        this.subscribed = subscriber.isReady();
        this.evaluate();
      },
      (error: unknown) => {
        this.subscribed = false;
        this.evaluate(error, true);
      },
    );
  }

  /**
   * Works out `connected` from the connections' state after any change, and reports a change: the
   * first failure of an outage is logged and published, the recovery is counted and published.
   */
  private evaluate(error?: unknown, failed = false): void {
    if (this.closing !== undefined) return;
    const up = this.publisher?.isReady() === true && this.subscriber?.isReady() === true && this.subscribed;
    if (up && !this.connected) {
      this.connected = true;
      if (this.everConnected) this.counters.reconnects++;
      this.everConnected = true;
      this.outageReported = false;
      this.announce(true);
    } else if (!up && (this.connected || error !== undefined || failed)) {
      this.connected = false;
      this.reportOutage(error);
    }
  }

  private reportOutage(error: unknown): void {
    if (this.outageReported || this.closing !== undefined) return;
    this.outageReported = true;
    this.logger.error(OUTAGE_MESSAGE, { channel: this.channel, nodeId: this.nodeId, error });
    this.announce(false);
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
   * Sends one message to the other nodes: one PUBLISH, whatever the number of streams or nodes. Nothing
   * is sent while the bus is not connected: a caller's client would queue it offline and send it after
   * the outage, late (and possibly after a newer event); and the first connection seen down stops both
   * (they share one server). The bytes awaiting Redis's reply are bounded.
   */
  private send(payload: string): void {
    const publisher = this.publisher;
    if (this.closing !== undefined) return;
    if (publisher === undefined || !this.connected || !publisher.isReady()) {
      this.counters.dropped++;
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
      this.reportOutage(new Error(`Redis has not answered ${MAX_IN_FLIGHT_BYTES} bytes of PUBLISHes`));
      return;
    }
    this.inFlightBytes += bytes;
    publisher.publish(this.channel, payload).then(
      () => {
        this.inFlightBytes -= bytes;
        this.counters.published++;
        // A failure that was not an outage (a refused PUBLISH, a saturated link) is over once one
        // goes through; an outage ends only when the connections are back.
        if (this.connected) this.outageReported = false;
      },
      (error: unknown) => {
        this.inFlightBytes -= bytes;
        this.counters.dropped++;
        this.reportOutage(error);
      },
    );
  }

  /** A message from the channel. Runs in the client's event handler: nothing may throw out of it. */
  private readonly onMessage = (raw: string): void => {
    if (this.closing !== undefined) return;
    const message = this.wire.decode(typeof raw === 'string' ? raw : String(raw));
    switch (message.type) {
      case 'own':
        return;
      case 'drop':
        this.counters.dropped++;
        this.reportDrop(message.reason);
        return;
      case 'event':
        this.counters.received++;
        for (const member of this.members) this.hand(member, message.event);
        return;
      case 'cancel':
        this.counters.received++;
        for (const member of this.members) this.handCancel(member, message.principal, message.id);
        return;
    }
  };

  private hand(member: BusListener, event: SubscriptionEvent): void {
    try {
      member.event(event);
    } catch (error) {
      this.logger.error('a bus member failed to take an event', { error });
    }
  }

  private handCancel(member: BusListener, principal: string, id: RequestId): void {
    try {
      member.cancel(principal, id);
    } catch (error) {
      this.logger.error('a bus member failed to take a cancellation', { error });
    }
  }

  private reportDrop(reason: DropReason): void {
    this.reportOnce(
      'drop',
      `a message on ${this.channel} was dropped (${reason}): another format version, or not from mcp-subscriptions; further ones are only counted (stats().dropped)`,
      { reason },
    );
  }

  private reportOnce(kind: string, message: string, details?: Record<string, unknown>): void {
    if (this.reportedOnce.has(kind)) return;
    this.reportedOnce.add(kind);
    this.logger.warn(message, details);
  }
}
