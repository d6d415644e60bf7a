/**
 * The hub host services publish to. It keeps every open stream of this process in indexes by what it
 * listens for, so that an event costs in proportion to the streams that want it, and joins a bus so
 * that events published on other nodes reach this node's streams too.
 */
import { MemoryBus } from './bus.ts';
import {
  consoleLogger,
  publishChannel,
  streamCloseChannel,
  streamOpenChannel,
  uncheckedListenChannel,
} from './diagnostics.ts';
import {
  describeValue,
  DRAINING_MESSAGE,
  ErrorCode,
  McpSubscriptionsError,
  OptionsError,
  ProtocolError,
  SUBSCRIPTION_LIMIT_MESSAGE,
  type RefusalReason,
} from './errors.ts';
import {
  KeepAliveClocks,
  LifetimeClock,
  ListenStream,
  TickFlush,
  type StreamCounters,
  type StreamResponse,
  type StreamShared,
} from './listen-stream.ts';
import { ANONYMOUS_GROUP, isAnonymous, quotaKey } from './principal.ts';
import { publishContext, recordLag, registerHub, tracedDelivery, type TelemetrySource } from './telemetry.ts';
import { eventFrame, validateEvent } from './protocol.ts';
import type { SplitFrame } from './sse.ts';
import type {
  BusInterest,
  BusMember,
  CloseReason,
  DrainOptions,
  InterestLease,
  FilterSummary,
  Hub,
  HubStats,
  ListChangedKind,
  McpChangeEvent,
  NotificationFilter,
  PublishMessage,
  PublishReport,
  RequestId,
  ResolvedHubOptions,
  ResyncKeys,
  StreamCloseMessage,
  StreamOpenMessage,
  SubscriptionBus,
  SubscriptionEvent,
  SubscriptionHubOptions,
  TaskState,
  UncheckedListenMessage,
} from './types.ts';
import {
  durationMs,
  durationOrFalse,
  durationOrZero,
  given,
  knownKeys,
  loggerOption,
  optionKeys,
  optionsObject,
  positiveInteger,
  positiveIntegerOrFalse,
  removedOptions,
} from './validate.ts';

/** Every key of {@link SubscriptionHubOptions}, checked against the interface by the compiler. */
export const HUB_OPTION_KEYS = optionKeys<SubscriptionHubOptions>({
  maxSubscriptions: true,
  maxSubscriptionsPerPrincipal: true,
  bus: true,
  logger: true,
  completeTimeoutMs: true,
  retryAfterSeconds: true,
  stallTimeoutMs: true,
  maxStreamDurationMs: true,
});

/** Every key of {@link DrainOptions}. */
const DRAIN_OPTION_KEYS = optionKeys<DrainOptions>({ overMs: true });

/**
 * The hub's removed options, each with what replaced it: refused with `ERR_MCP_SUBSCRIPTIONS_REMOVED_OPTION`
 * wherever they are given (the hub, the middleware, the Nest module), never ignored.
 */
export const REMOVED_HUB_OPTIONS: Readonly<Record<string, string>> = Object.freeze({
  maxBuffer:
    "a stream's queue holds one entry per key its filter follows (the latest event of each list kind, URI " +
    'and task id), so no bound is needed, and `stallTimeoutMs` bounds the memory of a client that stops reading; ' +
    'remove it',
  overflow:
    "a stream's queue holds one entry per key its filter follows, so it never overflows and no policy " +
    'applies; `stallTimeoutMs` closes a stream whose client stops reading; remove it',
});

/**
 * Applies defaults to hub options and validates them; never mutates its input. Unknown keys are
 * refused, with the nearest known one suggested; removed ones with what replaced them.
 */
export function resolveHubOptions(options: SubscriptionHubOptions = {}): ResolvedHubOptions {
  optionsObject(options);
  removedOptions(options, REMOVED_HUB_OPTIONS, 'new SubscriptionHub()');
  knownKeys(options, HUB_OPTION_KEYS, 'new SubscriptionHub()');
  const bus = options.bus === undefined ? new MemoryBus() : options.bus;
  if (typeof (bus as Partial<SubscriptionBus> | null)?.join !== 'function') {
    throw new OptionsError(
      ErrorCode.InvalidBus,
      `Expected \`bus\` to be a SubscriptionBus (\`new MemoryBus()\`, a \`RedisBus\` from 'mcp-subscriptions/redis', or an object whose \`join({ event, cancel })\` returns a member), got ${describeValue(bus)}`,
    );
  }
  const logger = loggerOption('logger', given<unknown>(options.logger, consoleLogger));
  return Object.freeze({
    maxSubscriptions: positiveInteger('maxSubscriptions', given(options.maxSubscriptions, 1024)),
    maxSubscriptionsPerPrincipal: positiveIntegerOrFalse(
      'maxSubscriptionsPerPrincipal',
      given(options.maxSubscriptionsPerPrincipal, 32),
    ),
    bus,
    logger,
    completeTimeoutMs: durationMs('completeTimeoutMs', given(options.completeTimeoutMs, 3000)),
    retryAfterSeconds: positiveInteger('retryAfterSeconds', given(options.retryAfterSeconds, 1)),
    stallTimeoutMs: durationOrFalse('stallTimeoutMs', given(options.stallTimeoutMs, 60_000)),
    maxStreamDurationMs: durationOrFalse('maxStreamDurationMs', given(options.maxStreamDurationMs, false)),
  });
}

/** Why {@link SubscriptionHub.subscribe} refuses, and the fix. */
const UNCHECKED_LISTEN_MESSAGE =
  "a subscriptions/listen request reached the MCP SDK's own handler, past mcp-subscriptions, so its URIs were " +
  'never checked: it was refused (HTTP 500). Mount mcpSubscriptions() in front of the SDK handler, on the same ' +
  'route (Express); in Nest, serve MCP from a controller route, not from a handler mounted on the HTTP adapter';

/** What `Reservation.open()` needs besides the response. */
export interface OpenInit {
  readonly id: RequestId;
  readonly filter: NotificationFilter;
  readonly keepAliveMs: number | false;
  readonly ackFrame: string;
  /**
   * Builds the terminal result frame from the id as JSON, when the stream ends gracefully: one function
   * per engine, so that an open stream keeps no copy of a frame it writes at most once.
   */
  readonly resultFrame: (idJson: string) => string;
}

/** A capacity slot held while a listen request is authorized (see {@link HubEngine.reserve}). */
export interface Reservation {
  /**
   * Tells the bus what the stream will follow, before it opens: returns a promise to await before
   * {@link open} when the bus routes by interest and must subscribe first (so that an event published
   * anywhere after the ack reaches the stream), or nothing when there is nothing to wait for. At most
   * once; {@link release} undoes it when the stream never opens.
   */
  follow(filter: NotificationFilter): Promise<void> | undefined;
  /** Opens the stream on `res` (headers, then the ack) and registers it; or completes it at once when its filter is empty. */
  open(res: StreamResponse, init: OpenInit): ListenStream;
  /** Gives the slot back without opening (the client left, or authorization failed). Idempotent. */
  release(): void;
  /**
   * Lets a `notifications/cancelled` end this listen while it waits to open (for its checks, or for
   * the bus): one naming its id from the same principal, received here ({@link HubEngine.cancel}) or
   * by another node (over the bus). The cancel gives the slot and the bus interest back at once,
   * counts the listen as opened and closed `cancelled`, and calls `onCancelled` once, for the caller
   * to abort its checks and end the response; {@link open} must not be called after it. Called before
   * the listen first waits (a listen that never waits cannot be cancelled before it opens); a later
   * call replaces `onCancelled`. An anonymous listen is never listed: nothing may cancel it.
   */
  cancellable(onCancelled: () => void): void;
}

/** What the listen engine does with a hub beyond its public face ({@link Hub}). */
export interface HubEngine {
  /**
   * Holds a slot for a listen request before its URIs are authorized, so concurrent requests cannot
   * exceed the bounds. Throws the spec's -32603 "Subscription limit reached" (HTTP 503) when full.
   */
  reserve(principal: string, id?: RequestId | null): Reservation;
  /**
   * A `notifications/cancelled` for `principal`'s listen `id`: closes, without writing anything
   * more, this node's open streams of that principal with that id, ends those still waiting to open
   * ({@link Reservation.cancellable}), and returns how many. When this node holds none, the
   * cancellation goes to the bus, so that the node holding the listen ends it (for the same principal
   * only).
   */
  cancel(principal: string, id: RequestId): number;
  /** Counts a listen request refused before a stream opened (`stats().refusals`). */
  refused(reason: RefusalReason): void;
}

/**
 * The brand of a hub, under which it keeps its {@link HubEngine}. A registered symbol, so that a hub
 * made by one copy of the package is still a hub to the engine of another (the style's "checks go by
 * code, not instanceof"); the engine face is not on the public type, so host code never sees it.
 */
const HUB_ENGINE = Symbol.for('mcp-subscriptions.hub-engine');

/** Whether `value` is a `SubscriptionHub` (of this copy of the package or another): by its brand. */
export function isHub(value: unknown): value is SubscriptionHub {
  return (
    typeof value === 'object' && value !== null && typeof (value as { [HUB_ENGINE]?: unknown })[HUB_ENGINE] === 'object'
  );
}

/** The engine face of a hub that {@link isHub} admitted. */
export function hubEngine(hub: Hub): HubEngine {
  return (hub as Hub & { readonly [HUB_ENGINE]: HubEngine })[HUB_ENGINE];
}

function requestKey(principal: string, id: RequestId): string {
  return `${principal}\u0000${typeof id === 'number' ? 'n' : 's'}${id}`;
}

/**
 * An index entry: the one stream that holds a key, or a set once two or more do. Most URIs, task ids
 * and request keys are held by one stream: a Set each (about 350 bytes, and an allocation per key on
 * open) would be most of an idle stream's memory and of a thousand-URI open's cost.
 */
type Entry<T extends object = ListenStream> = T | Set<T>;

function addTo<K, T extends object>(index: Map<K, Entry<T>>, key: K, holder: T): void {
  const entry = index.get(key);
  if (entry === undefined) index.set(key, holder);
  else if (entry instanceof Set) entry.add(holder);
  else if (entry !== holder) index.set(key, new Set([entry, holder]));
}

function removeFrom<K, T extends object>(index: Map<K, Entry<T>>, key: K, holder: T): void {
  const entry = index.get(key);
  if (entry === holder) index.delete(key);
  else if (entry instanceof Set && entry.delete(holder) && entry.size === 1) {
    // Back to one holder: the set goes, as it came.
    index.set(key, entry.values().next().value as T);
  }
}

/** The holders of an entry, as a list safe to iterate while they close. */
function holdersOf<T extends object>(entry: Entry<T> | undefined): T[] {
  return entry === undefined ? [] : entry instanceof Set ? [...entry] : [entry];
}

/** Offers one event to one stream and counts what became of it: the hot path's inner step. */
function offer(
  stream: ListenStream,
  frame: SplitFrame,
  key: string,
  owner: string | undefined,
  report: PublishReport,
): void {
  // A task's changes reach only streams whose principal owns it now (spec §7).
  if (owner !== undefined && stream.principal !== owner) return;
  report.matched++;
  switch (stream.deliver(frame, key)) {
    case 'written':
      report.written++;
      break;
    case 'queued':
      report.queued++;
      break;
    case 'coalesced':
      report.coalesced++;
      break;
    case 'closed':
      break;
  }
}

function filterSummary(filter: NotificationFilter): FilterSummary {
  return {
    toolsListChanged: filter.toolsListChanged === true,
    promptsListChanged: filter.promptsListChanged === true,
    resourcesListChanged: filter.resourcesListChanged === true,
    resourceSubscriptions: filter.resourceSubscriptions?.length ?? 0,
    taskIds: filter.taskIds?.length ?? 0,
  };
}

function isEmptyFilter(filter: NotificationFilter): boolean {
  return (
    filter.toolsListChanged !== true &&
    filter.promptsListChanged !== true &&
    filter.resourcesListChanged !== true &&
    filter.resourceSubscriptions === undefined &&
    filter.taskIds === undefined
  );
}

const NO_KEYS: readonly string[] = Object.freeze([]);

const LIST_KINDS: readonly ListChangedKind[] = Object.freeze([
  'tools_list_changed',
  'prompts_list_changed',
  'resources_list_changed',
]);

/** What a stream follows, for the bus: built again on close from the same filter, so nothing is kept per stream. */
function interestOf(principal: string, filter: NotificationFilter): BusInterest {
  const lists: ListChangedKind[] = [];
  if (filter.toolsListChanged === true) lists.push('tools_list_changed');
  if (filter.promptsListChanged === true) lists.push('prompts_list_changed');
  if (filter.resourcesListChanged === true) lists.push('resources_list_changed');
  return {
    principal: isAnonymous(principal) ? undefined : principal,
    lists,
    uris: filter.resourceSubscriptions ?? NO_KEYS,
    taskIds: filter.taskIds ?? NO_KEYS,
  };
}

/**
 * Fans change events out to every open listen stream that asked for them. Its methods are documented
 * on {@link Hub}, the public face it implements.
 *
 * @example
 * ```ts
 * const hub = new SubscriptionHub({ maxSubscriptions: 1024 });
 * hub.toolsListChanged();
 * hub.resourceUpdated('note://alice/todo');
 * await hub.close(); // on shutdown: every stream ends with its terminal result
 * ```
 */
export class SubscriptionHub implements Hub {
  readonly options: ResolvedHubOptions;

  private readonly streams = new Set<ListenStream>();
  private readonly byList: Record<ListChangedKind, Set<ListenStream>> = {
    tools_list_changed: new Set(),
    prompts_list_changed: new Set(),
    resources_list_changed: new Set(),
  };
  private readonly byUri = new Map<string, Entry>();
  private readonly byTask = new Map<string, Entry>();
  private readonly byRequest = new Map<string, Entry>();
  /**
   * Listens waiting to open (for their checks, or for the bus) by principal and id, each as the cancel
   * that ends it: what a `notifications/cancelled` finds before the stream opens. Only those that wait
   * are listed ({@link Reservation.cancellable}).
   */
  private readonly waiting = new Map<string, Entry<() => void>>();
  /** Open and pending streams per principal; entries at zero are deleted. */
  private readonly perPrincipal = new Map<string, number>();
  private readonly listeners = new Set<(event: SubscriptionEvent) => void>();
  private readonly counters: StreamCounters = { written: 0, coalesced: 0, dropped: 0, cutOff: 0 };
  /** What every stream of this hub shares (bounds, counters, callbacks, the tick flush, the keepalive clocks). */
  private readonly shared: StreamShared;
  private readonly closedBy: Record<CloseReason, number> = {
    client: 0,
    cancelled: 0,
    complete: 0,
    expired: 0,
    drained: 0,
    empty: 0,
    stalled: 0,
    failed: 0,
    resync: 0,
  };
  /** A write that threw is logged once per hub; later ones are counted in `closed.failed`. */
  private writeFailureLogged = false;
  private readonly member: BusMember;
  private pending = 0;
  private published = 0;
  private resynced = 0;
  private opened = 0;
  private refused = 0;
  private readonly refusals: Record<RefusalReason, number> = {
    'parse-error': 0,
    'invalid-request': 0,
    'unsupported-media-type': 0,
    'not-acceptable': 0,
    'body-too-large': 0,
    'invalid-params': 0,
    'header-mismatch': 0,
    'unsupported-protocol-version': 0,
    'method-not-found': 0,
    'missing-capability': 0,
    capacity: 0,
    draining: 0,
    'shutting-down': 0,
    internal: 0,
  };
  /** What telemetry reads of this hub; held here, since telemetry holds it weakly. */
  private readonly telemetry: TelemetrySource = {
    stats: () => this.stats(),
    streamsWithKeys: () => this.streamsWithKeys(),
    bus: () => this.options.bus,
  };
  /** Listens the SDK served itself, refused by {@link subscribe}. */
  private uncheckedListens = 0;
  private closing = false;
  /** The drain under way or done (`drain()`), from its first call: new listens are refused meanwhile. */
  private drainRun: Promise<void> | undefined;
  /** Ends at once what a drain under way has not ended yet: for `close()`. */
  private hurryDrain: (() => void) | undefined;
  /** `maxStreamDurationMs`'s clock, when it is set: nothing per stream otherwise. */
  private readonly lifetime: LifetimeClock | undefined;
  /** Whether the bus failed last time: a bus that is down is reported once per outage, not per event. */
  private busFailing = false;

  constructor(options: SubscriptionHubOptions = {}) {
    this.options = resolveHubOptions(options);
    this.shared = {
      endTimeoutMs: this.options.completeTimeoutMs,
      stallTimeoutMs: this.options.stallTimeoutMs,
      counters: this.counters,
      onClose: this.onStreamClose,
      flush: new TickFlush(),
      keepAlive: new KeepAliveClocks(),
    };
    const maxStreamDurationMs = this.options.maxStreamDurationMs;
    this.lifetime =
      maxStreamDurationMs === false
        ? undefined
        : new LifetimeClock(maxStreamDurationMs, (stream) => {
            void stream.end('expired', true, this.options.completeTimeoutMs);
          });
    // The engine face: a property of its own, not a member of the class, so that it is on no public type.
    const engine: HubEngine = Object.freeze({
      reserve: (principal: string, id: RequestId | null = null) => this.#reserve(principal, id),
      cancel: (principal: string, id: RequestId) => this.#cancel(principal, id),
      refused: (reason: RefusalReason) => {
        this.refusals[reason]++;
      },
    });
    Object.defineProperty(this, HUB_ENGINE, { value: engine });
    this.member = this.options.bus.join({
      event: (event, context) => {
        try {
          recordLag(context);
          if (context?.traceparent === undefined) this.deliver(event);
          else tracedDelivery(event, context, true, () => this.deliver(event));
        } catch (error) {
          this.fromBusFailed(error);
        }
      },
      cancel: (principal, id) => {
        try {
          this.cancelHere(principal, id);
        } catch (error) {
          this.fromBusFailed(error);
        }
      },
      resync: (keys) => {
        try {
          this.resync(keys);
        } catch (error) {
          this.fromBusFailed(error);
        }
      },
    });
    registerHub(this.telemetry);
  }

  toolsListChanged(): PublishReport {
    return this.publish({ kind: 'tools_list_changed' });
  }

  promptsListChanged(): PublishReport {
    return this.publish({ kind: 'prompts_list_changed' });
  }

  resourcesListChanged(): PublishReport {
    return this.publish({ kind: 'resources_list_changed' });
  }

  resourceUpdated(uri: string): PublishReport {
    return this.publish({ kind: 'resource_updated', uri });
  }

  taskStatus(task: TaskState, owner: string): PublishReport {
    return this.publish({ kind: 'task_status', task, owner });
  }

  publish(event: SubscriptionEvent): PublishReport {
    const valid = validateEvent(event);
    // Host code may still publish while the app shuts down: a closed hub delivers nothing, quietly.
    if (this.closing) return { matched: 0, written: 0, queued: 0, coalesced: 0 };
    const context = publishContext();
    const report =
      context.traceparent === undefined
        ? this.deliver(valid)
        : tracedDelivery(valid, context, false, () => this.deliver(valid));
    // The bus contract says publish never throws; one that does must still not reach the host's route
    // (the event was delivered here). Inline, not through a helper: no closure per publish.
    try {
      this.member.publish(valid, context);
      this.busFailing = false;
    } catch (error) {
      this.busFailed(error);
    }
    return report;
  }

  /**
   * The SDK's `ServerEventBus.subscribe`, which makes the hub fit as the SDK's `bus`
   * (`createMcpHandler(factory, { bus: hub })`, so that `notify.*` reaches the hub) and closes the
   * SDK's own `subscriptions/listen`: the SDK calls it only to serve a listen itself, which happens
   * only when a listen got past this library (the SDK's handler mounted before `mcpSubscriptions()`,
   * or outside Nest routing), with its URIs never checked. So it always refuses: it throws an error
   * coded `ERR_MCP_SUBSCRIPTIONS_UNCHECKED_LISTEN` (the SDK then answers 500 and its acknowledgement
   * is never sent), logs the first such refusal of this hub as an error naming the fix, counts each
   * in `stats().uncheckedListens` and publishes it on the `UncheckedListen` diagnostics channel.
   *
   * To follow the hub's events, use {@link subscribeAll}.
   */
  subscribe(_listener: (event: McpChangeEvent) => void): () => void {
    this.uncheckedListens++;
    if (uncheckedListenChannel.hasSubscribers) {
      uncheckedListenChannel.publish({ uncheckedListens: this.uncheckedListens } satisfies UncheckedListenMessage);
    }
    if (this.uncheckedListens === 1) {
      this.options.logger.error(
        `${UNCHECKED_LISTEN_MESSAGE}; later ones are only counted in stats().uncheckedListens (docs/mount-order.md)`,
      );
    }
    throw new McpSubscriptionsError(ErrorCode.UncheckedListen, `mcp-subscriptions: ${UNCHECKED_LISTEN_MESSAGE}`);
  }

  /**
   * Registers a listener for every event this hub delivers (published here or arriving over the bus),
   * task events included. Returns an idempotent unsubscribe. This is the way to follow the hub's
   * events; {@link subscribe} is the SDK's and refuses.
   */
  subscribeAll(listener: (event: SubscriptionEvent) => void): () => void {
    const own = (event: SubscriptionEvent): void => listener(event);
    this.listeners.add(own);
    return () => {
      this.listeners.delete(own);
    };
  }

  /** {@link HubEngine.reserve}. */
  #reserve(principal: string, id: RequestId | null): Reservation {
    const { maxSubscriptions, maxSubscriptionsPerPrincipal, retryAfterSeconds } = this.options;
    // Anonymous callers are counted as one principal: each has an identity of its own (lib/principal.ts).
    const quota = quotaKey(principal);
    const mine = this.perPrincipal.get(quota) ?? 0;
    if (this.closing) {
      this.refused++;
      throw this.shuttingDown(id);
    }
    if (this.drainRun !== undefined) {
      this.refused++;
      throw this.drainingRefusal(id);
    }
    if (
      this.streams.size + this.pending >= maxSubscriptions ||
      (maxSubscriptionsPerPrincipal !== false && mine >= maxSubscriptionsPerPrincipal)
    ) {
      this.refused++;
      throw new ProtocolError('capacity', SUBSCRIPTION_LIMIT_MESSAGE, { id, retryAfterSeconds });
    }
    this.pending++;
    this.perPrincipal.set(quota, mine + 1);
    let held = true;
    /** The bus's hold on what the stream will follow, while the stream is not open: released with the slot. */
    let lease: InterestLease | undefined;
    /** While listed in `waiting`: its key, and the cancel listed under it. */
    let waitingKey: string | undefined;
    let cancelWaiting: (() => void) | undefined;
    let onCancelled: (() => void) | undefined;
    /** A bus that routes by interest: this principal's cancellations, heard while the listen waits. */
    let cancels: InterestLease | undefined;
    const unlist = (): void => {
      if (waitingKey === undefined) return;
      removeFrom(this.waiting, waitingKey, cancelWaiting as () => void);
      waitingKey = undefined;
      cancels?.release();
      cancels = undefined;
    };
    const release = (): void => {
      if (!held) return;
      held = false;
      unlist();
      this.pending--;
      this.decrementPrincipal(principal);
      lease?.release();
      lease = undefined;
    };
    return {
      release,
      cancellable: (listener) => {
        onCancelled = listener;
        if (!held || waitingKey !== undefined || id === null || isAnonymous(principal)) return;
        cancelWaiting = () => {
          if (!held) return;
          release();
          // Counted as a stream opened and cancelled, though not a byte was written: the listen was
          // admitted and its client ended it, as a cancel of an open stream does (not a refusal: the
          // server said no to nothing), and `opened = openStreams + sum(closed)` still holds.
          this.opened++;
          this.closedBy.cancelled++;
          onCancelled?.();
        };
        waitingKey = requestKey(principal, id);
        addTo(this.waiting, waitingKey, cancelWaiting);
        // A node that routes by interest hears a principal's cancellations sent to other nodes only while
        // it follows them: from now, not from the stream's own lease just before the ack (not waited for:
        // a cancel sent before this node subscribed is the client's race with its own listen).
        if (this.member.follow !== undefined) cancels = this.follow(principal, {});
      },
      follow: (filter) => {
        if (!held || lease !== undefined || this.member.follow === undefined || isEmptyFilter(filter)) return undefined;
        lease = this.follow(principal, filter);
        return lease.ready?.catch((error: unknown) => this.busFailed(error));
      },
      open: (res, init) => {
        if (!held) {
          throw new McpSubscriptionsError(
            ErrorCode.Internal,
            'mcp-subscriptions: a reservation opens at most one stream, and none once released or cancelled',
          );
        }
        // The hub may have closed while this request's URIs were being checked: nothing would end
        // a stream opened now.
        if (this.closing) {
          release();
          throw this.shuttingDown(id);
        }
        // Or started to drain: the drain has listed the streams it ends, and this one is not among them.
        if (this.drainRun !== undefined) {
          release();
          throw this.drainingRefusal(id);
        }
        // The slot stays held until the stream is registered, so that a failed open (headers
        // already sent by host middleware) can still give it back through release().
        const stream = this.attach(res, principal, init, lease);
        held = false;
        unlist();
        this.pending--;
        // From here the stream's close releases the lease (an empty filter took none).
        lease = undefined;
        return stream;
      },
    };
  }

  /** {@link HubEngine.cancel}. */
  #cancel(principal: string, id: RequestId): number {
    const closed = this.cancelHere(principal, id);
    if (closed === 0 && !this.closing) {
      try {
        this.member.cancel(principal, id);
        this.busFailing = false;
      } catch (error) {
        this.busFailed(error);
      }
    }
    return closed;
  }

  stats(): HubStats {
    let queued = 0;
    for (const stream of this.streams) queued += stream.queued;
    const byPrincipal = this.countByPrincipal();
    let maxOpenPerPrincipal = 0;
    for (const count of byPrincipal.values()) if (count > maxOpenPerPrincipal) maxOpenPerPrincipal = count;
    return {
      openStreams: this.streams.size,
      pendingStreams: this.pending,
      principals: byPrincipal.size,
      maxOpenPerPrincipal,
      listening: {
        toolsListChanged: this.byList.tools_list_changed.size,
        promptsListChanged: this.byList.prompts_list_changed.size,
        resourcesListChanged: this.byList.resources_list_changed.size,
        resourceUris: this.byUri.size,
        taskIds: this.byTask.size,
      },
      queued,
      published: this.published,
      written: this.counters.written,
      coalesced: this.counters.coalesced,
      dropped: this.counters.dropped,
      resynced: this.resynced,
      opened: this.opened,
      closed: { ...this.closedBy },
      cutOff: this.counters.cutOff,
      refused: this.refused,
      refusals: { ...this.refusals },
      uncheckedListens: this.uncheckedListens,
      maxSubscriptions: this.options.maxSubscriptions,
      draining: this.drainRun !== undefined && !this.closing,
    };
  }

  openByPrincipal(): Record<string, number> {
    const counts = this.countByPrincipal();
    counts.delete(ANONYMOUS_GROUP);
    return Object.fromEntries(counts);
  }

  /**
   * Open streams that follow at least one URI, and at least one task id: counted when telemetry
   * collects (a scrape), as `stats()` counts its queues, rather than kept up on every open and close.
   */
  private streamsWithKeys(): { uris: number; taskIds: number } {
    let uris = 0;
    let taskIds = 0;
    for (const stream of this.streams) {
      if (stream.filter.resourceSubscriptions !== undefined) uris++;
      if (stream.filter.taskIds !== undefined) taskIds++;
    }
    return { uris, taskIds };
  }

  /** Open streams per principal, anonymous ones as one. */
  private countByPrincipal(): Map<string, number> {
    const counts = new Map<string, number>();
    for (const stream of this.streams) {
      const key = quotaKey(stream.principal);
      counts.set(key, (counts.get(key) ?? 0) + 1);
    }
    return counts;
  }

  async complete(): Promise<void> {
    const timeout = this.options.completeTimeoutMs;
    await Promise.all([...this.streams].map((stream) => stream.end('complete', true, timeout)));
  }

  drain(options: DrainOptions = {}): Promise<void> {
    optionsObject(options, 'hub.drain() options');
    knownKeys(options, DRAIN_OPTION_KEYS, 'hub.drain()');
    const overMs = durationOrZero('overMs', given(options.overMs, 0));
    if (this.closing) return Promise.resolve();
    this.drainRun ??= this.runDrain(overMs);
    return this.drainRun;
  }

  /**
   * Ends the streams open now, one every `overMs / n`, the first at once, oldest first; resolves once
   * every one has ended (a client that does not read is cut off within `completeTimeoutMs`). One timer
   * at a time, re-armed for the next stream due: with more streams than milliseconds, a wake-up ends
   * every stream due by then.
   */
  private async runDrain(overMs: number): Promise<void> {
    const streams = [...this.streams];
    const stepMs = streams.length === 0 ? 0 : overMs / streams.length;
    const timeoutMs = this.options.completeTimeoutMs;
    const started = performance.now();
    const ends: Promise<void>[] = [];
    let next = 0;
    await new Promise<void>((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const run = (): void => {
        clearTimeout(timer);
        timer = undefined;
        const elapsed = performance.now() - started;
        while (next < streams.length && (this.closing || next * stepMs <= elapsed)) {
          // Those left when close() hurries the drain are close()'s to count: `'complete'`.
          const stream = streams[next++] as ListenStream;
          ends.push(stream.end(this.closing ? 'complete' : 'drained', true, timeoutMs));
        }
        if (next < streams.length) {
          timer = setTimeout(run, Math.max(1, Math.ceil(next * stepMs - elapsed)));
          return;
        }
        this.hurryDrain = undefined;
        resolve();
      };
      this.hurryDrain = run;
      run();
    });
    await Promise.all(ends);
  }

  async close(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    try {
      this.hurryDrain?.();
      await this.complete();
    } finally {
      this.lifetime?.stop();
      await this.leaveBus();
    }
  }

  /**
   * This node's listens of `principal` with listen id `id`, ended: its open streams closed, and those
   * still waiting to open (for their checks, or for the bus) ended before they open; how many.
   */
  private cancelHere(principal: string, id: RequestId): number {
    const key = requestKey(principal, id);
    const open = holdersOf(this.byRequest.get(key));
    const waiting = holdersOf(this.waiting.get(key));
    for (const stream of open) stream.cancel('cancelled');
    for (const cancel of waiting) cancel();
    return open.length + waiting.length;
  }

  /** A bus that threw: logged once per outage, not per event. */
  private busFailed(error: unknown): void {
    if (this.busFailing) return;
    this.busFailing = true;
    this.options.logger.error('the bus failed; events reach this node only until it recovers', { error });
  }

  /** What the bus delivered failed here: logged, never thrown back into the bus. */
  private fromBusFailed(error: unknown): void {
    this.options.logger.error('delivering a message from the bus failed', { error });
  }

  /**
   * Leaves the bus within `completeTimeoutMs`: a bus that hangs or fails on leave must not hold up the
   * app's shutdown.
   */
  private async leaveBus(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), this.options.completeTimeoutMs);
      timer.unref();
    });
    const left = Promise.resolve()
      .then(() => this.member.leave())
      .then(
        () => 'left' as const,
        (error: unknown) => {
          this.options.logger.error('leaving the bus failed; closed anyway', { error });
          return 'failed' as const;
        },
      );
    if ((await Promise.race([left, timedOut])) === 'timeout') {
      this.options.logger.error(`the bus did not let go within ${this.options.completeTimeoutMs} ms; closed anyway`);
    }
    clearTimeout(timer);
  }

  private drainingRefusal(id: RequestId | null): ProtocolError {
    return new ProtocolError('draining', DRAINING_MESSAGE, { id, retryAfterSeconds: this.options.retryAfterSeconds });
  }

  private shuttingDown(id: RequestId | null): ProtocolError {
    return new ProtocolError('shutting-down', 'Server is shutting down', {
      id,
      retryAfterSeconds: this.options.retryAfterSeconds,
    });
  }

  private attach(
    res: StreamResponse,
    principal: string,
    init: OpenInit,
    lease: InterestLease | undefined,
  ): ListenStream {
    const filter = init.filter;
    const stream = new ListenStream(
      res,
      {
        id: init.id,
        principal,
        filter,
        keepAliveMs: init.keepAliveMs,
        resultFrame: init.resultFrame,
      },
      this.shared,
    );
    // Headers first: a response that cannot take them (host middleware sent its own) throws here,
    // before anything is counted, and the reservation, still held, gives the slot back.
    stream.open();
    // Counted before the ack: from here every stream closes exactly once, through onStreamClose, which
    // releases its lease.
    this.opened++;
    stream.lease = lease;
    stream.acknowledge(init.ackFrame);
    // The ack's write threw (a wrapped `res.write`): the stream closed as `failed`, unregistered.
    if (!stream.isOpen) return stream;
    if (isEmptyFilter(filter)) {
      void stream.end('empty', false, this.options.completeTimeoutMs);
      return stream;
    }
    // Registered only now, after the ack was written: no event can overtake it.
    this.streams.add(stream);
    if (filter.toolsListChanged) this.byList.tools_list_changed.add(stream);
    if (filter.promptsListChanged) this.byList.prompts_list_changed.add(stream);
    if (filter.resourcesListChanged) this.byList.resources_list_changed.add(stream);
    for (const uri of filter.resourceSubscriptions ?? []) addTo(this.byUri, uri, stream);
    for (const taskId of filter.taskIds ?? []) addTo(this.byTask, taskId, stream);
    addTo(this.byRequest, requestKey(principal, init.id), stream);
    this.lifetime?.join(stream);
    if (streamOpenChannel.hasSubscribers) {
      streamOpenChannel.publish({ principal, filter: filterSummary(filter) } satisfies StreamOpenMessage);
    }
    return stream;
  }

  /**
   * Every stream counted in `opened` comes here exactly once (its first transition out of open): a
   * registered one, and one closed before it was registered (an empty filter's, ended at once; one
   * whose acknowledgement's write threw). It gives back the principal's slot and the bus interest.
   */
  private readonly onStreamClose = (stream: ListenStream, reason: CloseReason, error?: unknown): void => {
    const registered = this.streams.delete(stream);
    const filter = stream.filter;
    if (registered) {
      this.byList.tools_list_changed.delete(stream);
      this.byList.prompts_list_changed.delete(stream);
      this.byList.resources_list_changed.delete(stream);
      for (const uri of filter.resourceSubscriptions ?? []) removeFrom(this.byUri, uri, stream);
      for (const taskId of filter.taskIds ?? []) removeFrom(this.byTask, taskId, stream);
      removeFrom(this.byRequest, requestKey(stream.principal, stream.id), stream);
      this.lifetime?.leave(stream);
    }
    if (reason === 'failed' && !this.writeFailureLogged) {
      this.writeFailureLogged = true;
      this.options.logger.error(
        'writing to a listen stream threw; the stream was closed as `failed` (later ones are only counted in stats().closed.failed)',
        { error },
      );
    }
    this.decrementPrincipal(stream.principal);
    // The bus interest the stream's reservation handed over when it opened (an empty filter took none).
    stream.lease?.release();
    stream.lease = undefined;
    this.closedBy[reason]++;
    // The diagnostics pair open and close: only a registered stream was announced as open.
    if (registered && streamCloseChannel.hasSubscribers) {
      streamCloseChannel.publish({
        principal: stream.principal,
        reason,
        filter: filterSummary(filter),
      } satisfies StreamCloseMessage);
    }
  };

  /**
   * The bus's lease on what a stream will follow. A bus of the older form (a promise, or nothing, and
   * `unfollow`) gets a lease made here, whose release calls `unfollow` once.
   */
  private follow(principal: string, filter: NotificationFilter): InterestLease {
    const member = this.member;
    const interest = interestOf(principal, filter);
    let taken: InterestLease | void | Promise<void>;
    try {
      taken = member.follow?.(interest);
    } catch (error) {
      this.busFailed(error);
      return { ready: undefined, release: () => {} };
    }
    if (taken !== undefined && !(taken instanceof Promise) && typeof taken.release === 'function') {
      const lease = taken;
      return {
        ready: lease.ready,
        release: () => {
          try {
            lease.release();
          } catch (error) {
            this.busFailed(error);
          }
        },
      };
    }
    let released = false;
    return {
      ready: taken instanceof Promise ? taken : undefined,
      release: () => {
        if (released) return;
        released = true;
        try {
          member.unfollow?.(interest);
        } catch (error) {
          this.busFailed(error);
        }
      },
    };
  }

  /**
   * The bus could not hear of changes to `keys` for a while: each stream following one is told once,
   * as if it had changed (a hint to read it again). A task's notification carries its whole state,
   * which the hub does not hold: its streams end gracefully instead, and their clients listen again.
   */
  private resync(keys: ResyncKeys | 'all'): void {
    if (this.closing) return;
    const all = keys === 'all';
    const lists = all ? LIST_KINDS : keys.lists;
    const uris = all ? [...this.byUri.keys()] : keys.uris;
    const taskIds = all ? [...this.byTask.keys()] : keys.taskIds;
    const report: PublishReport = { matched: 0, written: 0, queued: 0, coalesced: 0 };
    for (const kind of lists) this.fanOut({ kind }, report);
    for (const uri of uris) this.fanOut({ kind: 'resource_updated', uri }, report);
    this.resynced += report.matched;
    const ending = new Set<ListenStream>();
    for (const taskId of taskIds) for (const stream of holdersOf(this.byTask.get(taskId))) ending.add(stream);
    for (const stream of ending) void stream.end('resync', true, this.options.completeTimeoutMs);
  }

  private decrementPrincipal(principal: string): void {
    const quota = quotaKey(principal);
    const count = (this.perPrincipal.get(quota) ?? 1) - 1;
    if (count <= 0) this.perPrincipal.delete(quota);
    else this.perPrincipal.set(quota, count);
  }

  /** Delivers a valid event to this node's streams and listeners: the hot path. */
  private deliver(event: SubscriptionEvent): PublishReport {
    this.published++;
    const report: PublishReport = { matched: 0, written: 0, queued: 0, coalesced: 0 };
    this.fanOut(event, report);
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch (error) {
        this.options.logger.error('an event listener threw', { error });
      }
    }
    return report;
  }

  /** Offers `event` to every stream that follows its key, counting in `report`. */
  private fanOut(event: SubscriptionEvent, report: PublishReport): void {
    let targets: Entry | undefined;
    switch (event.kind) {
      case 'resource_updated':
        targets = this.byUri.get(event.uri);
        break;
      case 'task_status':
        targets = this.byTask.get(event.task.taskId);
        break;
      default:
        targets = this.byList[event.kind];
    }
    if (targets !== undefined && (!(targets instanceof Set) || targets.size > 0)) {
      const frame = eventFrame(event);
      const key =
        event.kind === 'resource_updated'
          ? `r:${event.uri}`
          : event.kind === 'task_status'
            ? `t:${event.task.taskId}`
            : event.kind;
      const owner = event.kind === 'task_status' ? event.owner : undefined;
      if (targets instanceof Set) {
        for (const stream of targets) offer(stream, frame, key, owner, report);
      } else {
        offer(targets, frame, key, owner, report);
      }
      if (publishChannel.hasSubscribers)
        publishChannel.publish({ kind: event.kind, ...report } satisfies PublishMessage);
    }
  }
}
