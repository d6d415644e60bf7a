/**
 * OpenTelemetry instruments and cross-node trace links, through `@opentelemetry/api` when the app
 * has it (an optional peer dependency). Nothing to configure: the first hub loads the API, and the
 * instruments report through the MeterProvider the app registered globally before that hub was made.
 * Without the API, or without a registered provider, nothing is recorded and nothing costs more than a
 * check of a local.
 *
 * Counters and gauges are observable: read from every live hub's `stats()` (and its bus's) when the
 * app's reader collects, summed over hubs, so they equal `hub.stats()` by construction and cost the
 * hot path nothing. Only what `stats()` cannot answer is recorded as it happens, once per listen or
 * per received event: the acknowledgement's latency, the authorization's duration and outcomes, the
 * bus's publish → receive lag.
 *
 * No attribute carries a principal, a URI, a task id, a listen id or any other value a client or the
 * host's data chooses: every attribute value comes from a closed set written here (cardinality, and
 * the operator's scraper is no place for personal data).
 */
import type * as OpenTelemetry from '@opentelemetry/api';
import type {
  Attributes,
  BatchObservableResult,
  Counter,
  Histogram,
  Link,
  Meter,
  Observable,
  Span,
  SpanContext,
  Tracer,
} from '@opentelemetry/api';
import type { StageCounts } from './authorize.ts';
import type { RefusalReason } from './errors.ts';
import type { CloseReason, EventContext, HubStats, ListChangedKind, SubscriptionEvent } from './types.ts';

type Api = typeof OpenTelemetry;

/** The instrumentation scope's name: the package's. */
export const INSTRUMENTATION_NAME = 'mcp-subscriptions';

/** The longest `tracestate` carried with an event; a longer one is left out (the link keeps its trace and span). */
export const MAX_TRACESTATE_LENGTH = 512;

const TRACEPARENT = /^00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$/;

/** What telemetry reads of a hub when the app's reader collects. */
export interface TelemetrySource {
  stats(): HubStats;
  /** Open streams that follow at least one resource URI, and at least one task. */
  streamsWithKeys(): { readonly uris: number; readonly taskIds: number };
  /** The hub's bus, whose `stats()` (the Redis bus's) are read when it has one. */
  bus(): object;
}

/** A bus's counters as the Redis bus reports them (`bus.stats()`); other buses may have none. */
interface BusCounters {
  readonly connected?: unknown;
  readonly published?: unknown;
  readonly received?: unknown;
  readonly dropped?: unknown;
  readonly resyncs?: unknown;
  readonly unsent?: unknown;
  readonly unsubscribed?: unknown;
}

/** Which host check an authorization outcome is about. */
export type CheckName = 'can_read' | 'handle_subscribe_resource' | 'can_access_task';

/** How one check of one item ended. */
export type CheckOutcome = 'allowed' | 'denied' | 'error' | 'timeout';

const OUTCOMES: readonly CheckOutcome[] = ['allowed', 'denied', 'error', 'timeout'];

/**
 * Bucket boundaries of the duration histograms, in seconds (advice the SDK applies unless the app's
 * views say otherwise): from half a millisecond, where a listen of a few URIs and a same-region Redis
 * hop land, to ten seconds, the default authorization deadline. The SDK's own defaults suit
 * milliseconds and would put every one of these durations in the first bucket.
 */
const SECONDS_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

interface Instruments {
  readonly meter: Meter;
  readonly ack: Histogram;
  readonly authorization: Histogram;
  readonly checks: Counter;
  readonly lag: Histogram;
  /** Attribute sets of the checks counter, made once (an object per record would be garbage per listen). */
  readonly checkAttributes: ReadonlyMap<CheckName, readonly Attributes[]>;
}

let api: Api | undefined;
let loading: Promise<void> | undefined;
let instruments: Instruments | undefined;
let tracer: Tracer | undefined;
const sources = new Set<WeakRef<TelemetrySource>>();
/** The sources not yet attached to a meter (registered before the API was loaded). */
let waiting: TelemetrySource[] = [];

/**
 * Registers a hub. The API is loaded on the first call (a dynamic import, so the package needs it only
 * when it is there); the hub is read from the next collection on. Held weakly: a hub that is gone
 * stops being read.
 */
export function registerHub(source: TelemetrySource): void {
  if (api !== undefined) {
    attach(api, source);
    return;
  }
  waiting.push(source);
  loading ??= import('@opentelemetry/api').then(
    (loaded) => {
      api = loaded;
      const early = waiting;
      waiting = [];
      for (const each of early) attach(loaded, each);
    },
    () => {
      // Not installed: no instruments, and nothing waits for them.
      waiting = [];
    },
  );
}

/** Resolves once the API has been loaded, or found missing (for tests and for a host that must know). */
export function telemetryLoaded(): Promise<void> {
  return loading ?? Promise.resolve();
}

function attach(loaded: Api, source: TelemetrySource): void {
  sources.add(new WeakRef(source));
  // The meter of the provider registered now: an app registers its provider before it makes its hubs
  // (a provider registered later is used from the next hub made after it).
  const meter = loaded.metrics.getMeter(INSTRUMENTATION_NAME);
  // No provider registered: the API's no-op meter. Nothing is made, so the listen path does not even
  // read the clock for instruments that would discard it.
  if (meter !== loaded.createNoopMeter() && instruments?.meter !== meter) instruments = createInstruments(meter);
  tracer = registeredTracer(loaded);
}

/**
 * The tracer of the TracerProvider registered now, or none. The API's global provider is a proxy that
 * answers a no-op tracer until one is registered: taking its tracer would make a delivery read the clock
 * and build a span that records nothing (a node without tracing that receives traced events). A
 * provider registered later is used from the next hub made after it, as for the meter.
 */
function registeredTracer(loaded: Api): Tracer | undefined {
  const provider: OpenTelemetry.TracerProvider & { getDelegateTracer?: unknown } = loaded.trace.getTracerProvider();
  if (typeof provider.getDelegateTracer !== 'function') return provider.getTracer(INSTRUMENTATION_NAME);
  return (provider as OpenTelemetry.ProxyTracerProvider).getDelegateTracer(INSTRUMENTATION_NAME);
}

/**
 * An observable instrument read from the hubs' (and their buses') summed stats at collection: one value,
 * or one per value of `attribute` (a closed set), or none (a bus without those counters).
 */
interface ObservedSpec {
  readonly name: string;
  readonly description: string;
  readonly unit: string;
  /** `updown`: a count that goes up and down (streams); `gauge`: a state (connected). */
  readonly type: 'counter' | 'updown' | 'gauge';
  readonly attribute?: string;
  readonly read: (sum: Sums) => number | Readonly<Record<string, number>> | undefined;
}

const OBSERVED: readonly ObservedSpec[] = [
  {
    name: 'mcp.subscriptions.streams',
    type: 'updown',
    unit: '{stream}',
    description: 'Open listen streams.',
    read: (sum) => sum.open,
  },
  {
    name: 'mcp.subscriptions.streams.following',
    type: 'updown',
    unit: '{stream}',
    description: 'Open listen streams that follow an event kind (a stream may follow several).',
    attribute: 'mcp.subscriptions.event.kind',
    read: (sum) => sum.following,
  },
  {
    name: 'mcp.subscriptions.streams.pending',
    type: 'updown',
    unit: '{stream}',
    description: 'Listen requests holding a slot while their URIs and task ids are authorized.',
    read: (sum) => sum.pending,
  },
  {
    name: 'mcp.subscriptions.hubs.draining',
    type: 'updown',
    unit: '{hub}',
    description:
      'Hubs draining (hub.drain() called, not closed yet): new listens are refused, open streams are being ended.',
    read: (sum) => sum.draining,
  },
  {
    name: 'mcp.subscriptions.queue.depth',
    type: 'updown',
    unit: '{event}',
    description: 'Events waiting in the queues of streams whose clients do not keep up, over all streams.',
    read: (sum) => sum.queued,
  },
  {
    name: 'mcp.subscriptions.listens.opened',
    type: 'counter',
    unit: '{stream}',
    description: 'Listen streams opened, and listens cancelled before they opened.',
    read: (sum) => sum.opened,
  },
  {
    name: 'mcp.subscriptions.listens.refused',
    type: 'counter',
    unit: '{request}',
    description: 'Listen requests refused before a stream opened, by reason (error.type).',
    attribute: 'error.type',
    read: (sum) => sum.refusals,
  },
  {
    name: 'mcp.subscriptions.streams.closed',
    type: 'counter',
    unit: '{stream}',
    description: 'Listen streams closed, by reason.',
    attribute: 'mcp.subscriptions.close.reason',
    read: (sum) => sum.closed,
  },
  {
    name: 'mcp.subscriptions.events.published',
    type: 'counter',
    unit: '{event}',
    description:
      'Events the hub handled, published on this node or received over the bus, whether or not a stream followed them.',
    read: (sum) => sum.published,
  },
  {
    name: 'mcp.subscriptions.deliveries',
    type: 'counter',
    unit: '{event}',
    description: 'Event frames written to listen streams.',
    read: (sum) => sum.written,
  },
  {
    name: 'mcp.subscriptions.events.coalesced',
    type: 'counter',
    unit: '{event}',
    description: 'Queued events replaced by a newer event of the same key before their stream drained.',
    read: (sum) => sum.coalesced,
  },
  {
    name: 'mcp.subscriptions.events.dropped',
    type: 'counter',
    unit: '{event}',
    description: 'Events that did not reach a stream that follows them (the stream was closed while they waited).',
    read: (sum) => sum.dropped,
  },
  {
    name: 'mcp.subscriptions.resyncs',
    type: 'counter',
    unit: '{notification}',
    description:
      'Notifications a resync offered to streams: after a gap, each stream following a key that may have changed was told once.',
    read: (sum) => sum.resynced,
  },
  {
    name: 'mcp.subscriptions.bus.connected',
    type: 'gauge',
    unit: '1',
    description: 'Whether the bus is connected (1) or not (0); absent for a bus with no connection state.',
    read: (sum) => (sum.busConnected === undefined ? undefined : sum.busConnected ? 1 : 0),
  },
  {
    name: 'mcp.subscriptions.bus.published',
    type: 'counter',
    unit: '{message}',
    description: 'Messages the bus published.',
    read: (sum) => (sum.bus ? sum.busPublished : undefined),
  },
  {
    name: 'mcp.subscriptions.bus.received',
    type: 'counter',
    unit: '{message}',
    description: 'Valid messages the bus received from other nodes.',
    read: (sum) => (sum.bus ? sum.busReceived : undefined),
  },
  {
    name: 'mcp.subscriptions.bus.dropped',
    type: 'counter',
    unit: '{message}',
    description: 'Messages the bus lost: not sent while disconnected or refused, or received and invalid.',
    read: (sum) => (sum.bus ? sum.busDropped : undefined),
  },
  {
    name: 'mcp.subscriptions.bus.gaps',
    type: 'counter',
    unit: '{gap}',
    description:
      'Gaps the bus resynced: subscriptions back after an outage, a failover or a slot move, and resyncs of everything other nodes asked for.',
    read: (sum) => (sum.bus ? sum.busResyncs : undefined),
  },
  {
    name: 'mcp.subscriptions.bus.unsubscribed',
    type: 'updown',
    unit: '{channel}',
    description:
      'Channels the bus wants that the server has not confirmed: above 0 for long, a shard down or a refused subscription.',
    read: (sum) => (sum.bus ? sum.busUnsubscribed : undefined),
  },
  {
    name: 'mcp.subscriptions.bus.unsent',
    type: 'updown',
    unit: '{key}',
    description:
      'Keys whose latest change waits to be published once the server is back (-1 per bus past its bound: everything will be resynced).',
    read: (sum) => (sum.bus ? sum.busUnsent : undefined),
  },
];

function createInstruments(meter: Meter): Instruments {
  const observables = OBSERVED.map((spec) => {
    const options = { description: spec.description, unit: spec.unit };
    return spec.type === 'counter'
      ? meter.createObservableCounter(spec.name, options)
      : spec.type === 'updown'
        ? meter.createObservableUpDownCounter(spec.name, options)
        : meter.createObservableGauge(spec.name, options);
  });
  const attributeSets = new Map<string, Attributes>();
  const attributes = (key: string, value: string): Attributes => {
    const id = `${key}=${value}`;
    let made = attributeSets.get(id);
    if (made === undefined) attributeSets.set(id, (made = Object.freeze({ [key]: value })));
    return made;
  };

  meter.addBatchObservableCallback((result: BatchObservableResult) => {
    const sum = emptySums();
    const buses = new Set<object>();
    for (const ref of sources) {
      const source = ref.deref();
      if (source === undefined) {
        sources.delete(ref);
        continue;
      }
      addStats(sum, source.stats(), source.streamsWithKeys());
      // Two hubs on one bus: its counters once.
      const bus = source.bus();
      if (!buses.has(bus)) {
        buses.add(bus);
        addBus(sum, bus);
      }
    }
    OBSERVED.forEach((spec, i) => {
      const instrument = observables[i] as Observable;
      const value = spec.read(sum);
      if (typeof value === 'number') result.observe(instrument, value);
      else if (value !== undefined) {
        for (const [key, count] of Object.entries(value)) {
          result.observe(instrument, count, attributes(spec.attribute as string, key));
        }
      }
    });
  }, observables);

  const checkAttributes = new Map<CheckName, readonly Attributes[]>();
  for (const check of ['can_read', 'handle_subscribe_resource', 'can_access_task'] as const) {
    checkAttributes.set(
      check,
      OUTCOMES.map((outcome) =>
        Object.freeze({ 'mcp.subscriptions.check': check, 'mcp.subscriptions.check.outcome': outcome }),
      ),
    );
  }
  return {
    meter,
    checkAttributes,
    ack: meter.createHistogram('mcp.subscriptions.ack.duration', {
      description: 'From a listen request reaching the handler to its acknowledgement written.',
      unit: 's',
      advice: { explicitBucketBoundaries: SECONDS_BUCKETS },
    }),
    authorization: meter.createHistogram('mcp.subscriptions.authorization.duration', {
      description: "How long a listen request's URIs and task ids took to pass the host's checks.",
      unit: 's',
      advice: { explicitBucketBoundaries: SECONDS_BUCKETS },
    }),
    checks: meter.createCounter('mcp.subscriptions.authorization.checks', {
      description: 'Host checks of one URI or task id, by check and outcome.',
      unit: '{check}',
    }),
    lag: meter.createHistogram('mcp.subscriptions.bus.lag', {
      description:
        "From an event's publish in one process to its receipt in another, by the two nodes' clocks (their offset included); hubs of one process record none.",
      unit: 's',
      advice: { explicitBucketBoundaries: SECONDS_BUCKETS },
    }),
  };
}

interface Sums {
  open: number;
  pending: number;
  queued: number;
  opened: number;
  published: number;
  written: number;
  coalesced: number;
  dropped: number;
  resynced: number;
  draining: number;
  following: Record<ListChangedKind | 'resource_updated' | 'task_status', number>;
  refusals: Record<string, number>;
  closed: Record<string, number>;
  bus: boolean;
  busConnected: boolean | undefined;
  busPublished: number;
  busReceived: number;
  busDropped: number;
  busResyncs: number;
  busUnsubscribed: number;
  busUnsent: number;
}

function emptySums(): Sums {
  return {
    open: 0,
    pending: 0,
    queued: 0,
    opened: 0,
    published: 0,
    written: 0,
    coalesced: 0,
    dropped: 0,
    resynced: 0,
    draining: 0,
    following: {
      tools_list_changed: 0,
      prompts_list_changed: 0,
      resources_list_changed: 0,
      resource_updated: 0,
      task_status: 0,
    },
    refusals: {},
    closed: {},
    bus: false,
    busConnected: undefined,
    busPublished: 0,
    busReceived: 0,
    busDropped: 0,
    busResyncs: 0,
    busUnsubscribed: 0,
    busUnsent: 0,
  };
}

function addStats(sum: Sums, stats: HubStats, withKeys: { readonly uris: number; readonly taskIds: number }): void {
  sum.open += stats.openStreams;
  sum.pending += stats.pendingStreams;
  sum.queued += stats.queued;
  sum.opened += stats.opened;
  sum.published += stats.published;
  sum.written += stats.written;
  sum.coalesced += stats.coalesced;
  sum.dropped += stats.dropped;
  sum.resynced += stats.resynced;
  if (stats.draining) sum.draining++;
  sum.following.tools_list_changed += stats.listening.toolsListChanged;
  sum.following.prompts_list_changed += stats.listening.promptsListChanged;
  sum.following.resources_list_changed += stats.listening.resourcesListChanged;
  sum.following.resource_updated += withKeys.uris;
  sum.following.task_status += withKeys.taskIds;
  for (const [reason, count] of Object.entries(stats.refusals) as [RefusalReason, number][]) {
    sum.refusals[reason] = (sum.refusals[reason] ?? 0) + count;
  }
  for (const [reason, count] of Object.entries(stats.closed) as [CloseReason, number][]) {
    sum.closed[reason] = (sum.closed[reason] ?? 0) + count;
  }
}

function addBus(sum: Sums, bus: object): void {
  const read = (bus as { stats?: unknown }).stats;
  if (typeof read !== 'function') return;
  let counters: BusCounters;
  try {
    counters = (read as () => BusCounters).call(bus);
  } catch {
    return;
  }
  if (typeof counters !== 'object' || counters === null) return;
  const count = (value: unknown): number => (typeof value === 'number' && Number.isFinite(value) ? value : 0);
  sum.bus = true;
  if (typeof counters.connected === 'boolean') sum.busConnected = (sum.busConnected ?? true) && counters.connected;
  sum.busPublished += count(counters.published);
  sum.busReceived += count(counters.received);
  sum.busDropped += count(counters.dropped);
  sum.busResyncs += count(counters.resyncs);
  sum.busUnsubscribed += count(counters.unsubscribed);
  sum.busUnsent += count(counters.unsent);
}

/** Whether the instruments record: the API loaded and a MeterProvider registered before a hub was made. */
export function recording(): boolean {
  return instruments !== undefined;
}

/** A listen's acknowledgement was written `ms` after its request reached the handler. */
export function recordAck(ms: number): void {
  instruments?.ack.record(ms / 1000);
}

/** A listen request's items were authorized in `ms`, with these outcomes per check. */
export function recordAuthorization(ms: number, outcomes: ReadonlyMap<CheckName, StageCounts>): void {
  const made = instruments;
  if (made === undefined) return;
  made.authorization.record(ms / 1000);
  for (const [check, counts] of outcomes) {
    const sets = made.checkAttributes.get(check) as readonly Attributes[];
    for (let i = 0; i < counts.length; i++) {
      const count = counts[i] as number;
      if (count > 0) made.checks.add(count, sets[i]);
    }
  }
}

/**
 * Marks the context of an event published in this process, while the lag is recorded. A bus hands the
 * hubs of this process the publisher's own object (or a copy of its properties); one that carries it
 * to another process rebuilds it from a message, without the mark. Registered, so that two copies of
 * the package in one process agree.
 */
const PUBLISHED_HERE = Symbol.for('mcp-subscriptions.published-here');

type Marked = { [PUBLISHED_HERE]?: true };

/**
 * An event whose publisher's context is `context` arrived now: the bus lag, from its publish time (the
 * publisher's clock), for an event that crossed from another process. Two hubs of one process measure
 * nothing: the bus handed the event over without crossing anything.
 */
export function recordLag(context: EventContext | undefined): void {
  // A custom bus may hand over anything: only a finite time is measured.
  const publishedAt: unknown = context?.publishedAt;
  if (instruments === undefined || typeof publishedAt !== 'number' || !Number.isFinite(publishedAt)) return;
  if ((context as Marked)[PUBLISHED_HERE] === true) return;
  // Clocks of two machines differ: a negative lag is their offset, counted as none.
  instruments.lag.record(Math.max(0, Date.now() - publishedAt) / 1000);
}

/**
 * What travels with an event published now: its time, and the W3C trace context of the active span
 * when there is a valid one (a publish inside an operation the app traces); marked as published here
 * while the lag is recorded.
 */
export function publishContext(): EventContext {
  const context = traceContext(Date.now());
  if (instruments !== undefined) (context as Marked)[PUBLISHED_HERE] = true;
  return context;
}

function traceContext(publishedAt: number): EventContext {
  const loaded = api;
  if (loaded === undefined) return { publishedAt };
  const span = loaded.trace.getSpan(loaded.context.active());
  if (span === undefined) return { publishedAt };
  const context = span.spanContext();
  if (!loaded.isSpanContextValid(context)) return { publishedAt };
  const traceparent = `00-${context.traceId}-${context.spanId}-${(context.traceFlags & 0xff).toString(16).padStart(2, '0')}`;
  const state = context.traceState?.serialize();
  return state !== undefined && state !== '' && state.length <= MAX_TRACESTATE_LENGTH
    ? { publishedAt, traceparent, tracestate: state }
    : { publishedAt, traceparent };
}

/**
 * Runs `deliver` and, when the event carries the context of a publishing span and a tracer is there,
 * records the delivery as a span that continues it; else just runs it. A delivery that matched no stream
 * makes no span (most nodes hold no stream for most events). So the span is made once the delivery is
 * done, with the time it started: it is never the active span, and nothing inside the delivery reads it.
 * The span is named for the event's kind (a closed set), is a child of the publishing span and linked to
 * it, and says how many streams the delivery reached.
 *
 * Its parent is never a new root: the app's sampler decides with the publisher's sampled flag (the
 * SDK's default follows it), so a publish that its trace did not sample is recorded by no node, as
 * OpenTelemetry does for any remote parent. Inside the publishing span (this node's publish, and a bus
 * that hands the event to the hubs of this process before the publish returns) the parent is the
 * active context; elsewhere, the carried context as a remote parent.
 */
export function tracedDelivery<T extends { readonly matched: number }>(
  event: SubscriptionEvent,
  context: EventContext | undefined,
  remote: boolean,
  deliver: () => T,
): T {
  const loaded = api;
  const using = tracer;
  const traceparent: unknown = context?.traceparent;
  if (
    loaded === undefined ||
    using === undefined ||
    typeof traceparent !== 'string' ||
    !TRACEPARENT.test(traceparent)
  ) {
    return deliver();
  }
  const delivery: Delivery = {
    kind: event.kind,
    traceparent,
    tracestate: context?.tracestate,
    remote,
    startTime: epochMs(),
  };
  let report: T;
  try {
    report = deliver();
  } catch (error) {
    // Whether any stream matched is unknown: the failure is worth its span.
    deliverySpan(loaded, using, delivery)?.setStatus({ code: loaded.SpanStatusCode.ERROR }).end(epochMs());
    throw error;
  }
  if (report.matched > 0) {
    deliverySpan(loaded, using, delivery)
      ?.setAttribute('mcp.subscriptions.streams.matched', report.matched)
      .end(epochMs());
  }
  return report;
}

/** What a delivery span is made of. */
interface Delivery {
  readonly kind: SubscriptionEvent['kind'];
  /** A valid `traceparent` (checked against {@link TRACEPARENT}). */
  readonly traceparent: string;
  /** As the bus handed it over: anything. */
  readonly tracestate: unknown;
  readonly remote: boolean;
  /** When the delivery started, in milliseconds since the epoch. */
  readonly startTime: number;
}

/** Now, in milliseconds since the epoch, to the sub-millisecond (a delivery takes microseconds). */
function epochMs(): number {
  return performance.timeOrigin + performance.now();
}

/**
 * The span of `delivery`, or undefined when it cannot be made. What a bus hands over is the publisher's
 * (or a custom bus's) to get wrong: a tracestate that is not a bounded string is left out, and a span
 * that cannot be made never holds the delivery up.
 */
function deliverySpan(loaded: Api, using: Tracer, delivery: Delivery): Span | undefined {
  try {
    const [, traceId, spanId, flags] = delivery.traceparent.split('-') as [string, string, string, string];
    const { tracestate } = delivery;
    const active = loaded.context.active();
    const current = loaded.trace.getSpanContext(active);
    const inside = current?.traceId === traceId && current.spanId === spanId;
    const publishing: SpanContext = {
      traceId,
      spanId,
      traceFlags: Number.parseInt(flags, 16),
      isRemote: !inside,
      ...(typeof tracestate === 'string' && tracestate !== '' && tracestate.length <= MAX_TRACESTATE_LENGTH
        ? { traceState: loaded.createTraceState(tracestate) }
        : {}),
    };
    const link: Link = { context: publishing };
    return using.startSpan(
      `deliver ${delivery.kind}`,
      {
        kind: loaded.SpanKind.CONSUMER,
        links: [link],
        startTime: delivery.startTime,
        attributes: { 'mcp.subscriptions.event.kind': delivery.kind, 'mcp.subscriptions.remote': delivery.remote },
      },
      inside ? active : loaded.trace.setSpanContext(active, publishing),
    );
  } catch {
    return undefined;
  }
}
