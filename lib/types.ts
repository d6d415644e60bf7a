/**
 * Every public option and type of `mcp-subscriptions`, in one place. The engine's modules hold
 * behaviour only and take their public shapes from here.
 *
 * A leaf: it imports nothing, so that every module may take its shapes from here without an import
 * circle. The types only the engine and its adapters use live beside the code that uses them
 * (`StreamResponse` with the stream, `Reservation` with the hub, `ListenHandler` with the HTTP face),
 * behind lib/internal.ts.
 */

// ---------------------------------------------------------------------------------------------------
// Events: what host code publishes
// ---------------------------------------------------------------------------------------------------

/** The JSON-RPC request id of a listen request: used verbatim as its subscription id. */
export type RequestId = string | number;

/** The state of a task, as the Tasks extension's `notifications/tasks` carries it (spec §7). */
export interface TaskState {
  readonly taskId: string;
  readonly status: 'working' | 'input_required' | 'completed' | 'failed' | 'cancelled';
  readonly statusMessage?: string;
  /** ISO 8601 timestamp. */
  readonly createdAt: string;
  /** ISO 8601 timestamp. */
  readonly lastUpdatedAt: string;
  /** How long the task is kept after it ends, in milliseconds; `null` for no limit. */
  readonly ttlMs: number | null;
  /** How often a client should poll the task, in milliseconds. */
  readonly pollIntervalMs?: number;
  /** `result`, `error`, `inputRequests`, … where the status has them. */
  readonly [field: string]: unknown;
}

/**
 * A change event. The first four are the official SDK's `ServerEvent` shapes (`kind` and, for
 * `resource_updated`, `uri`), so a hub can stand in for the SDK's `ServerEventBus`.
 */
export type SubscriptionEvent =
  | { readonly kind: 'tools_list_changed' }
  | { readonly kind: 'prompts_list_changed' }
  | { readonly kind: 'resources_list_changed' }
  | {
      readonly kind: 'resource_updated';
      /** An absolute URI, exactly as clients name it in `resourceSubscriptions`. */
      readonly uri: string;
    }
  | {
      readonly kind: 'task_status';
      /** The task's full state, sent as the notification's params. */
      readonly task: TaskState;
      /** The principal that owns the task: only its streams receive the event. */
      readonly owner: string;
    };

/**
 * The four MCP change events, exactly the official SDK's `ServerEvent` kinds: what a `ServerEventBus`
 * listener understands.
 */
export type McpChangeEvent = Exclude<SubscriptionEvent, { readonly kind: 'task_status' }>;

/** The `kind` of a {@link SubscriptionEvent}. */
export type SubscriptionEventKind = SubscriptionEvent['kind'];

/** The list-change kinds: level-triggered events that carry nothing but their kind. */
export type ListChangedKind = 'tools_list_changed' | 'prompts_list_changed' | 'resources_list_changed';

/** The filter of a listen request after validation (spec §1): absent means "not wanted". */
export interface NotificationFilter {
  readonly toolsListChanged?: true;
  readonly promptsListChanged?: true;
  readonly resourcesListChanged?: true;
  /** Absolute URIs, de-duplicated, in request order. */
  readonly resourceSubscriptions?: readonly string[];
  /** Task ids (Tasks extension), de-duplicated, in request order. */
  readonly taskIds?: readonly string[];
}

// ---------------------------------------------------------------------------------------------------
// Capabilities: what the host offers, declared once
// ---------------------------------------------------------------------------------------------------

/**
 * The change notifications a host can deliver. Every field defaults to `false`. The same declaration
 * narrows every acknowledgement and, through `advertiseOffer()`, is what `server/discover`
 * advertises.
 *
 * @example
 * ```ts
 * const offer = defineCapabilities({ toolsListChanged: true, resourceSubscriptions: true });
 * const server = advertiseOffer(new McpServer(info), offer);
 * app.post('/mcp', mcpSubscriptions({ hub, capabilities: offer, canRead }));
 * ```
 */
export interface SubscriptionCapabilities {
  /** Advertise `tools.listChanged` and honour `toolsListChanged`. @default false */
  readonly toolsListChanged?: boolean;
  /** Advertise `prompts.listChanged` and honour `promptsListChanged`. @default false */
  readonly promptsListChanged?: boolean;
  /** Advertise `resources.listChanged` and honour `resourcesListChanged`. @default false */
  readonly resourcesListChanged?: boolean;
  /** Advertise `resources.subscribe` and honour `resourceSubscriptions`. @default false */
  readonly resourceSubscriptions?: boolean;
  /** Advertise the Tasks extension (`io.modelcontextprotocol/tasks`) and honour `taskIds`. @default false */
  readonly tasks?: boolean;
}

/** A resolved, frozen capability declaration: every field present. */
export type ResolvedCapabilities = Readonly<Required<SubscriptionCapabilities>>;

/** The `ServerCapabilities` fragment matching a declaration, as `server/discover` advertises it. */
export interface ServerCapabilitiesFragment {
  tools?: { listChanged: true };
  prompts?: { listChanged: true };
  resources?: { listChanged?: true; subscribe?: true };
  extensions?: Record<string, Record<string, never>>;
}

// ---------------------------------------------------------------------------------------------------
// The hub
// ---------------------------------------------------------------------------------------------------

/** Where runtime failures are reported. `console` fits; so do pino and winston loggers. */
export interface Logger {
  warn(message: string, details?: Record<string, unknown>): void;
  error(message: string, details?: Record<string, unknown>): void;
}

/**
 * What may travel with an event from the node that published it, besides the event: when it was
 * published (for the publish → receive lag) and the W3C trace context of the span it was published in
 * (so that each node's delivery links to it). All optional: a bus that carries none of it loses only
 * those two measurements.
 */
export interface EventContext {
  /** When the event was published, in milliseconds since the epoch, by the publishing node's clock. */
  readonly publishedAt?: number;
  /** The W3C `traceparent` of the span the event was published in (`00-<trace id>-<span id>-<flags>`). */
  readonly traceparent?: string;
  /**
   * The W3C `tracestate` of that span, at most 512 characters. A bus leaves out what its readers would
   * refuse (a longer or malformed `tracestate`, a malformed `traceparent`, a publish time that is not a
   * finite non-negative number) rather than lose the event.
   */
  readonly tracestate?: string;
}

/** What a bus hands a member: what the other members published. Called synchronously or not. */
export interface BusListener {
  /**
   * An event another node published: deliver it to this node's streams. `context` is what the bus
   * carried of the publisher's {@link EventContext}, when it carries any.
   */
  event(event: SubscriptionEvent, context?: EventContext): void;
  /**
   * A `notifications/cancelled` another node received for a stream it does not hold: close this
   * node's streams of `principal` whose listen id is `id`.
   */
  cancel(principal: string, id: RequestId): void;
  /**
   * Optional, for a bus that can lose messages and knows when (an outage, a failover, a slot move):
   * these keys may have changed while this node could not hear of it. The hub tells each of its
   * streams that follows one of them, once per key, as if it had changed: listen's notifications are
   * hints to read again, so a hint too many costs a read and a hint missed loses a change. `'all'`:
   * every key of every stream (the bus could not tell which).
   */
  resync?(keys: ResyncKeys | 'all'): void;
}

/** The keys a bus asks the hub to resync ({@link BusListener.resync}). */
export interface ResyncKeys {
  readonly lists: readonly ListChangedKind[];
  readonly uris: readonly string[];
  readonly taskIds: readonly string[];
}

/**
 * What a bus that routes by interest returns from {@link BusMember.follow}: the stream's interest,
 * held until {@link release} (once: later calls do nothing), so that no other stream's or hub's release
 * can take it away.
 */
export interface InterestLease {
  /**
   * Settles when the node is subscribed to every key new to it (the hub writes the acknowledgement
   * then), or when the bus gave up waiting; `undefined` when there is nothing to wait for. Never rejects.
   */
  readonly ready: Promise<void> | undefined;
  /** Lets go of the interest. Idempotent. */
  release(): void;
}

/**
 * What one stream of a hub follows, as its bus sees it: the bus may use it to carry to this node only
 * the events some stream here follows (interest routing). Arrays are the stream's own: read, never kept
 * or changed.
 */
export interface BusInterest {
  /**
   * The stream's principal, for cancellations (a `notifications/cancelled` sent to another node);
   * absent for an anonymous caller, whose stream nothing else may cancel.
   */
  readonly principal?: string;
  /** The list changes it follows. */
  readonly lists: readonly ListChangedKind[];
  /** The resource URIs it follows. */
  readonly uris: readonly string[];
  /** The task ids it follows. */
  readonly taskIds: readonly string[];
}

/**
 * A hub's membership of a bus. No method may throw or reject into the hub: a bus that is down logs,
 * counts and reports, and never fails the host's call.
 */
export interface BusMember {
  /**
   * Sends an event to every other member (never back to this one: the hub has delivered it locally).
   * A bus that can should carry `context` to them as it is (validated on receipt like the event).
   */
  publish(event: SubscriptionEvent, context?: EventContext): void;
  /** Sends a cancellation to every other member. */
  cancel(principal: string, id: RequestId): void;
  /**
   * Optional, for a bus that routes by interest: a stream of this member is about to open with this
   * interest. Return an {@link InterestLease}: the hub writes the stream's acknowledgement only once its
   * `ready` settles, so an event published anywhere after the acknowledgement reaches the stream (the
   * bus bounds the wait, and does not wait while it is disconnected), and releases it exactly once when
   * the stream closes or never opens. The older form, a promise (or nothing) paired with
   * {@link unfollow}, is still accepted. Never rejects into the hub.
   */
  follow?(interest: BusInterest): InterestLease | void | Promise<void>;
  /**
   * Optional, the older form's release: the stream that followed `interest` closed (or never opened).
   * Called once per `follow` that returned no lease.
   */
  unfollow?(interest: BusInterest): void;
  /** Leaves the bus; nothing reaches this member afterwards. Idempotent. */
  leave(): void | Promise<void>;
}

/**
 * What carries events and cancellations between the hubs of several nodes. Implement it over your
 * own pub/sub to add a transport; `MemoryBus` is the in-process default, `RedisBus`
 * (`mcp-subscriptions/redis`) the one for several processes.
 */
export interface SubscriptionBus {
  /** Joins the bus: `listener` receives what every other member publishes. */
  join(listener: BusListener): BusMember;
}

/**
 * Options of `new SubscriptionHub(options)`. Unknown keys are refused, and so are the removed
 * `maxBuffer` and `overflow`, with what replaced them.
 *
 * A stream's queue needs no bound of its own: while its client does not keep up, it holds one entry
 * per key its filter follows (one per list kind, URI and task id: at most 3 + 2 × `maxFilterEntries`),
 * and a newer event for a key replaces the queued one in place. So no list change, resource update or
 * task's final state is ever dropped unseen, and a stream that drains receives the latest of
 * everything it follows. Memory stays bounded all the same: a queued entry is a reference to the frame
 * its publish shares with every stream it reached (whatever the listen id's size), and a stream that
 * accepts nothing for `stallTimeoutMs` is closed.
 */
export interface SubscriptionHubOptions {
  /** Open listen streams in this process (a positive integer); the next one is refused with HTTP 503. @default 1024 */
  readonly maxSubscriptions?: number;
  /**
   * Open listen streams per principal (a positive integer), or `false` for no per-principal bound; the
   * next one of that principal is refused with HTTP 503 and `Retry-After`, while other principals still
   * open theirs. On by default so that one caller cannot hold every slot of `maxSubscriptions`: a client
   * needs one stream per session, and 32 leaves room for many tabs, agents and reconnects in flight.
   * @default 32
   */
  readonly maxSubscriptionsPerPrincipal?: number | false;
  /** Carries events between the hubs of several nodes. @default new MemoryBus() */
  readonly bus?: SubscriptionBus;
  /** Where runtime failures are reported. @default console, prefixed `[mcp-subscriptions]` */
  readonly logger?: Logger;
  /**
   * How long `complete()` waits for a client that does not read its last events before cutting it
   * off, in milliseconds (1 to 2147483647).
   * @default 3000
   */
  readonly completeTimeoutMs?: number;
  /** Seconds the `Retry-After` header of a capacity refusal names (a positive integer). @default 1 */
  readonly retryAfterSeconds?: number;
  /**
   * How long an open stream whose socket pushes back may accept no byte before it is closed, in
   * milliseconds (1 to 2147483647), or `false` to keep such streams for ever. The clock starts when a
   * `write()` is refused and stops at `'drain'`; a stream that drains in time loses nothing it follows.
   * A stalled stream is closed with the reason `'stalled'` (counted in `stats().closed.stalled`, published
   * on `DiagnosticsChannel.StreamClose`) and its socket destroyed: a client that stopped reading would
   * otherwise hold a slot, and up to several MB of kernel buffers, until it hangs up.
   * @default 60000
   */
  readonly stallTimeoutMs?: number | false;
  /**
   * How long a stream may stay open, in milliseconds (1 to 2147483647), or `false` for no limit. A
   * stream is ended gracefully (what it has queued, then its terminal result, exactly as `complete()`
   * ends it) after a random time drawn uniformly between 0.75 and 1 times this from its
   * acknowledgement (to within 1 % of it, at most 1 s), never later; its client listens again. For a
   * platform that cuts requests after a time limit (serverless: set it below the limit), and to
   * rebalance a fleet (a stream opened before a node joined moves to it on its next listen). Counted
   * as closed `'expired'`.
   *
   * Why a quarter of the duration of jitter: clients that listened together (after a deploy or an
   * outage) would otherwise all come back together, every `maxStreamDurationMs`. Drawn from the last
   * quarter, their first round of re-listens is spread over a quarter of the duration, and each later
   * round adds its own draw, so their phases soon spread over the whole period; the limit itself is
   * never passed, and streams live 7/8 of it on average: re-listens per second are about
   * `openStreams / (0.875 × maxStreamDurationMs)` (docs/deploy.md).
   * @default false
   */
  readonly maxStreamDurationMs?: number | false;
}

/** Options of {@link Hub.drain}. */
export interface DrainOptions {
  /**
   * Over how many milliseconds (0 to 2147483647) the open streams are ended, evenly spread: with `n`
   * streams, one every `overMs / n`, the first at once. `0` ends them all at once.
   * @default 0
   */
  readonly overMs?: number;
}

/** The hub's options after defaults and validation (`hub.options`). */
export type ResolvedHubOptions = Readonly<Required<SubscriptionHubOptions>>;

/** What one publish did on this node. */
export interface PublishReport {
  /** Streams whose honoured filter wanted the event. */
  matched: number;
  /** Streams that took it for writing at the end of this tick (not queued behind a slow socket). */
  written: number;
  /** Streams that queued it behind a slow socket. */
  queued: number;
  /** Streams that merged it into the queued event of the same key (the same list kind, URI or task). */
  coalesced: number;
}

/** Why a stream ended. */
export type CloseReason =
  /** The client closed the response (HTTP cancellation, spec §4). */
  | 'client'
  /**
   * The client posted `notifications/cancelled` for it: an open stream, or a listen still waiting to
   * open (its checks, or the bus), which is then counted as opened too, though nothing was written.
   */
  | 'cancelled'
  /** The server completed it gracefully (`hub.complete()`, shutdown). */
  | 'complete'
  /** Ended gracefully (its terminal result) after `maxStreamDurationMs`: its client listens again. */
  | 'expired'
  /** Ended gracefully (its terminal result) by `hub.drain()`, before a deploy stops the process. */
  | 'drained'
  /** Nothing of the filter was honoured: acknowledged, then completed at once. */
  | 'empty'
  /** Its client accepted no byte for `stallTimeoutMs`: the socket was destroyed. */
  | 'stalled'
  /**
   * Writing to its response threw (a middleware's wrapped `res.write`, say), the acknowledgement's
   * write included: the response was destroyed.
   */
  | 'failed'
  /**
   * Ended gracefully (its terminal result) because a task it follows may have changed while the bus
   * could not hear of it: a task's notification carries its whole state, which the hub does not hold,
   * so its client listens again and reads the task (docs/redis.md, "Nothing unnoticed").
   */
  | 'resync';

/** A snapshot of the hub's state and counters since it was created (`hub.stats()`). */
export interface HubStats {
  openStreams: number;
  /** Listen requests holding a slot while their URIs are being authorized (or the bus subscribes). */
  pendingStreams: number;
  /**
   * How many distinct principals hold open streams. Counts only: stats are meant to be exposed, so
   * they carry no principal name, URI or task id (operators have `hub.openByPrincipal()`).
   */
  principals: number;
  /** The most open streams one principal holds. */
  maxOpenPerPrincipal: number;
  /** Open streams per honoured kind: how many want each list change, resource updates, task updates. */
  listening: {
    toolsListChanged: number;
    promptsListChanged: number;
    resourcesListChanged: number;
    resourceUris: number;
    taskIds: number;
  };
  /** Events currently queued behind slow sockets, over all streams. */
  queued: number;
  /** Events this node's hub handled (published here or received from the bus), whether or not a stream followed them. */
  published: number;
  /** Frames handed to sockets (batched per tick; a stream cancelled in the same tick discards its batch). */
  written: number;
  /** Events merged into the queued event of the same key. */
  coalesced: number;
  /** Events discarded unsent from the queues of streams closed as `'stalled'`. */
  dropped: number;
  /**
   * Notifications the bus's resyncs offered to streams: after a gap (an outage, a failover, a slot
   * move), each stream following a key that may have changed meanwhile is told once, as if it had.
   */
  resynced: number;
  /**
   * Streams opened, and listens cancelled while still waiting to open (also in `closed.cancelled`):
   * always `openStreams` plus the sum of {@link closed}.
   */
  opened: number;
  /** Streams closed, by reason: each stream counted in {@link opened} once, when it stops taking events. */
  closed: Record<CloseReason, number>;
  /** Ending streams cut off because their client did not read the last frames within `completeTimeoutMs`. */
  cutOff: number;
  /** Listen requests refused for capacity or because the hub was shutting down (both are in {@link refusals} too). */
  refused: number;
  /**
   * Listen requests answered with an error before a stream opened, by reason (the reasons of
   * docs/error-codes.md's refusal table): every reason is present, 0 when none happened.
   */
  refusals: Record<RefusalReason, number>;
  /**
   * Listen requests that reached the MCP SDK's own listen handler past this library (the hub being the
   * SDK's `bus`) and were refused by `subscribe()`: a mount-order mistake whenever above 0
   * (docs/mount-order.md). The first one is logged as an error.
   */
  uncheckedListens: number;
  maxSubscriptions: number;
  /**
   * Whether `hub.drain()` was called (and `close()` was not): new listens are refused (503,
   * `Retry-After`, counted in `refusals.draining`) and the open streams are being ended, or have been.
   */
  draining: boolean;
}

/**
 * What host code can do with a hub: the public face of `SubscriptionHub`, which implements it. An
 * entry point that takes a `hub` wants a `new SubscriptionHub()` (recognised by a brand that two copies
 * of the package share, not by its shape): an object of this shape made by hand is refused.
 */
export interface Hub {
  /** The resolved options. */
  readonly options: ResolvedHubOptions;
  /** Tells every stream listening for tool list changes. */
  toolsListChanged(): PublishReport;
  /** Tells every stream listening for prompt list changes. */
  promptsListChanged(): PublishReport;
  /** Tells every stream listening for resource list changes. */
  resourcesListChanged(): PublishReport;
  /** Tells every stream subscribed to `uri` (an absolute URI) that the resource changed. */
  resourceUpdated(uri: string): PublishReport;
  /** Sends a task's full state to its owner's streams that listen for its id (Tasks extension). */
  taskStatus(task: TaskState, owner: string): PublishReport;
  /**
   * Publishes an event: delivers it to this node's streams, then hands it to the bus for the other
   * nodes. Accepts the official SDK's `ServerEvent` shape, so the hub can be the SDK's `bus`.
   * Throws an `EventError` for an invalid event; returns what happened on this node.
   */
  publish(event: SubscriptionEvent): PublishReport;
  /**
   * The SDK's `ServerEventBus.subscribe`: registers a listener for the four MCP change events this hub
   * delivers (published here or arriving over the bus), so the hub can be passed as the SDK's `bus`.
   * Task events are left out: an SDK listener does not know them (see {@link subscribeAll}). Returns an
   * idempotent unsubscribe.
   */
  subscribe(listener: (event: McpChangeEvent) => void): () => void;
  /**
   * Registers a listener for every event this hub delivers, task events included: those published here,
   * and those the bus brings (with a bus that routes by interest, such as `RedisBus` by default, only
   * the events of keys this node's streams follow). Returns an idempotent unsubscribe.
   */
  subscribeAll(listener: (event: SubscriptionEvent) => void): () => void;
  /** A snapshot of the hub's state and counters: counts only, safe to expose. */
  stats(): HubStats;
  /**
   * Open streams per principal, by name: for operators only. Principal names are personal data, so
   * {@link stats} (which hosts expose) carries counts only; do not serve this to clients. Anonymous
   * streams are not listed (they are `openStreams` minus the sum).
   */
  openByPrincipal(): Record<string, number>;
  /**
   * Ends every open stream gracefully: writes what each has queued, then the terminal result, then
   * ends the response. New streams may still open afterwards (see {@link close}).
   */
  complete(): Promise<void>;
  /**
   * Drains the hub before a deploy stops the process: from the call, new listens are refused with HTTP
   * 503, `Retry-After` and the JSON-RPC error -32603 "Server is draining" (counted in
   * `stats().refusals.draining`), and the open streams are ended gracefully (each its terminal result,
   * counted as closed `'drained'`) spread evenly over `overMs`, so that their clients do not all listen
   * again elsewhere at the same moment. Resolves once every one has ended. Events still reach the
   * streams not ended yet. The hub stays draining: call {@link close} next.
   *
   * Idempotent: a second call returns the first one's promise. `close()` during a drain ends the
   * streams left at once (the drain then resolves); after `close()`, a drain does nothing. Throws an
   * `OptionsError` (`ERR_MCP_SUBSCRIPTIONS_OPTIONS_NOT_OBJECT`, `ERR_MCP_SUBSCRIPTIONS_NOT_NON_NEGATIVE_INTEGER`,
   * `ERR_MCP_SUBSCRIPTIONS_DURATION_TOO_LONG`, `ERR_MCP_SUBSCRIPTIONS_UNKNOWN_OPTION`) at the call for a
   * mistake in its options.
   *
   * @example
   * ```ts
   * process.on('SIGTERM', async () => {
   *   await hub.drain({ overMs: 20_000 }); // within the orchestrator's grace period
   *   await hub.close();
   *   server.close();
   * });
   * ```
   */
  drain(options?: DrainOptions): Promise<void>;
  /**
   * Refuses new streams (HTTP 503) and ignores further events, completes every open stream, and
   * leaves the bus. Idempotent.
   */
  close(): Promise<void>;
}

// ---------------------------------------------------------------------------------------------------
// Listen: the host's checks and the options every adapter takes
// ---------------------------------------------------------------------------------------------------

/** What the host's checks and hooks are told about the caller. */
export interface CheckContext<Req = unknown> {
  /**
   * The caller's identity, as the adapter resolved it from the host's auth. An anonymous caller's is
   * an identity of its request's own, which starts with a NUL character and matches no principal
   * your auth can name: grant it only what you grant everybody.
   */
  readonly principal: string;
  /** The framework's request (Express `req`, …), for checks that need the host's own auth state. */
  readonly request: Req;
  /**
   * Aborted when this check is abandoned: it took longer than `authorizeTimeoutMs` (the reason is a
   * `CheckTimeoutError`), the listen's checks together passed `authorizeDeadlineMs` (an
   * `AuthorizeDeadlineError`), or the client went away or cancelled the listen
   * (`notifications/cancelled`) before its stream opened. Pass it to your database calls so that an
   * abandoned check stops costing. Read it during the call (a later call may be handed the same
   * context once yours returned synchronously).
   */
  readonly signal: AbortSignal;
}

/**
 * A host check of one URI or task id. Only `true` admits it; `false`, a throw, a rejection or a
 * timeout leaves it out silently.
 */
export type ResourceCheck<Req = unknown> = (item: string, context: CheckContext<Req>) => boolean | PromiseLike<boolean>;

/**
 * The listen options every adapter takes (`mcpSubscriptions()`, `McpSubscriptionsModule.forRoot()`).
 * Unknown keys are refused at construction.
 */
export interface ListenHandlerOptions<Req = unknown> {
  /** The hub whose events the streams deliver: a `new SubscriptionHub()`. Required. */
  readonly hub: Hub;
  /**
   * What the server offers, declared once: the acknowledgement is narrowed to it, and
   * `advertiseOffer(server, capabilities)` makes `server/discover` advertise exactly it. Required.
   */
  readonly capabilities: SubscriptionCapabilities;
  /**
   * The read check `resources/read` uses: may this caller read `uri`? Required when
   * `capabilities.resourceSubscriptions` is on: a URI nobody checked is never honoured.
   */
  readonly canRead?: ResourceCheck<Req>;
  /**
   * The subscribe hook (ConduitMCP's `handle_subscribe_resource`), run after `canRead` passed: may this
   * URI be subscribed to here (a scheme you serve, a resource you can watch)?
   * @default accepts every readable URI
   */
  readonly handleSubscribeResource?: ResourceCheck<Req>;
  /**
   * Tasks extension: does the caller own `taskId` (and does it exist)? Required when
   * `capabilities.tasks` is on. An unknown id and a foreign one must both answer `false`.
   */
  readonly canAccessTask?: ResourceCheck<Req>;
  /** Interval of SSE keepalive comments in milliseconds (1 to 2147483647), or `false` for none. @default 15000 */
  readonly keepAliveMs?: number | false;
  /** Most URIs, and most task ids, one listen request may name (a positive integer). @default 1000 */
  readonly maxFilterEntries?: number;
  /** Checks in flight at once for one listen request (a positive integer). @default 16 */
  readonly authorizeConcurrency?: number;
  /**
   * How long one check may take before its item is dropped, in milliseconds (1 to 2147483647), or
   * `false` for no limit. The check's `signal` aborts when it runs out.
   * @default 5000
   */
  readonly authorizeTimeoutMs?: number | false;
  /**
   * How long all the checks of one listen request may take together, in milliseconds (1 to
   * 2147483647), or `false` for no limit, counted from the first check that answers with a promise
   * (checks that answer synchronously finish before any I/O). When it passes, the items not decided yet are left out,
   * the signals of the checks in flight abort, and the stream opens with what passed: a request
   * naming many slow URIs cannot hold its slot for minutes.
   * @default 10000
   */
  readonly authorizeDeadlineMs?: number | false;
  /**
   * Host checks in flight at once over every listen request this engine serves (one per mounted
   * route: in practice, per process), a positive integer: a burst of listens cannot flood your
   * database. A check holds its place until it settles or times out; the others wait their turn.
   * @default 256
   */
  readonly maxChecksInFlight?: number;
  /** Protocol revisions served: a non-empty array of strings. @default ['2026-07-28'] */
  readonly protocolVersions?: readonly string[];
  /** Stamped on the terminal result's `_meta` as `io.modelcontextprotocol/serverInfo`. @default none */
  readonly serverInfo?: { readonly name: string; readonly version: string; readonly [key: string]: unknown };
  /** Where failed checks are reported. @default the hub's logger */
  readonly logger?: Logger;
}

/** Listen options after defaults and validation. */
export interface ResolvedListenOptions<Req = unknown> {
  readonly hub: Hub;
  readonly capabilities: ResolvedCapabilities;
  readonly canRead: ResourceCheck<Req> | undefined;
  readonly handleSubscribeResource: ResourceCheck<Req> | undefined;
  readonly canAccessTask: ResourceCheck<Req> | undefined;
  readonly keepAliveMs: number | false;
  readonly maxFilterEntries: number;
  readonly authorizeConcurrency: number;
  readonly authorizeTimeoutMs: number | false;
  readonly authorizeDeadlineMs: number | false;
  readonly maxChecksInFlight: number;
  readonly protocolVersions: readonly string[];
  readonly serverInfo: ListenHandlerOptions['serverInfo'];
  readonly logger: Logger;
}

/**
 * What the Node-based adapters (Express, Nest on Express) add to {@link ListenHandlerOptions}: how to
 * read the caller and the body from Node's request.
 */
export interface NodeAdapterOptions<Req = unknown> {
  /**
   * Who the caller is, from the request your auth middleware or guard already authenticated. The
   * principal scopes per-principal limits, `notifications/cancelled` and task ownership, and is handed
   * to your checks. Return `undefined` for an anonymous caller: each anonymous listen is then served
   * under an identity of its own, so that anonymous callers never cancel each other's streams nor
   * share tasks, and all of them together count as one principal for `maxSubscriptionsPerPrincipal`.
   * A string with a NUL character (reserved for those identities) or a value that is not a string is
   * the host's mistake: the request is answered 500 and the mistake logged. The first listen without a
   * principal whose every URI `canRead` refused is logged as a warning (auth mounted after, most likely).
   * `req.auth.clientId` is never used by default: it names the OAuth client, shared by all its users
   * (return it here explicitly if your tokens identify a client only).
   * @default `req.auth` as the SDK's `requireBearerAuth` sets it (`extra.sub`, else `extra.principal`),
   * else `req.user` (a string, or its `id`, `sub` or `username`)
   */
  readonly principal?: (req: Req) => string | undefined;
  /**
   * Largest body, in bytes, read when no body parser ran before listen (a positive integer); a larger
   * one is answered 413.
   * @default 4194304 (4 MiB, as the SDK's own)
   */
  readonly maxBodyBytes?: number;
}

// ---------------------------------------------------------------------------------------------------
// Diagnostics: the payloads of the `node:diagnostics_channel` channels (DiagnosticsChannel)
// ---------------------------------------------------------------------------------------------------

/**
 * A stream's honoured filter as diagnostics describe it: flags and counts, never a URI or a task id
 * (those can be confidential).
 */
export interface FilterSummary {
  readonly toolsListChanged: boolean;
  readonly promptsListChanged: boolean;
  readonly resourcesListChanged: boolean;
  /** How many URIs the stream follows. */
  readonly resourceSubscriptions: number;
  /** How many task ids the stream follows. */
  readonly taskIds: number;
}

/** Published on `DiagnosticsChannel.StreamOpen` when a stream opens and is registered. */
export interface StreamOpenMessage {
  readonly principal: string;
  readonly filter: FilterSummary;
}

/** Published on `DiagnosticsChannel.StreamClose` when a registered stream closes. */
export interface StreamCloseMessage {
  readonly principal: string;
  readonly reason: CloseReason;
  readonly filter: FilterSummary;
}

/** Published on `DiagnosticsChannel.Publish` for an event that matched at least one stream of this node. */
export interface PublishMessage extends Readonly<PublishReport> {
  readonly kind: SubscriptionEventKind;
}

/**
 * Published on `DiagnosticsChannel.CheckError` when a host check or hook threw, rejected or timed out
 * and its item was left out. The error itself is not published (it may quote the URI): its name and
 * code only.
 */
export interface CheckErrorMessage {
  /** Which hook failed: `'canRead'`, `'handleSubscribeResource'` or `'canAccessTask'`. */
  readonly stage: string;
  /** The thrown value's `name`, when it has one (`'CheckTimeoutError'` for a timeout). */
  readonly errorName: unknown;
  /** The thrown value's `code`, when it has one (`'ERR_MCP_SUBSCRIPTIONS_CHECK_TIMEOUT'` for a timeout). */
  readonly errorCode: unknown;
}

/**
 * The payload of the `UncheckedListen` diagnostics channel: a listen reached the MCP SDK's own listen
 * handler past this library and was refused. Nothing about the request: the SDK hands the hub none.
 */
export interface UncheckedListenMessage {
  /** The hub's `stats().uncheckedListens`, this one included. */
  readonly uncheckedListens: number;
}

/**
 * Why a listen request was refused before any stream opened. Each reason has one JSON-RPC code
 * (lib/errors.ts) and one HTTP status (lib/http.ts), and is counted in `stats().refusals`.
 */
export type RefusalReason =
  | 'parse-error'
  | 'invalid-request'
  | 'unsupported-media-type'
  | 'not-acceptable'
  | 'body-too-large'
  | 'invalid-params'
  | 'header-mismatch'
  | 'unsupported-protocol-version'
  | 'method-not-found'
  | 'missing-capability'
  | 'capacity'
  | 'draining'
  | 'shutting-down'
  | 'internal';
