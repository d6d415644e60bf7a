/**
 * What a chaos run recorded (its history), and the five invariants checked against it. Pure: the
 * harness hands in the history and what the servers and Redis answered; nothing here does I/O, so the
 * checks are unit-tested on histories written by hand (test/unit/chaos-checks.test.ts).
 *
 * Times are the harness's clock (`performance.now()`, one process). A check is sound before it is
 * strict: where the history cannot tell (an operation whose answer never came, a change sent before
 * the acknowledgement arrived), it counts the change as possible for the upper bound (invariant 5) and
 * does not require it for the lower bound (invariant 1).
 */
import { canRead, type Key, type ListKind } from './schedule.ts';

/** A notification a stream received. */
export interface Received {
  /** `notifications/resources/updated` → the URI; `notifications/<list>/list_changed` → `list:<list>`; else `?<method>`. */
  readonly key: Key;
  readonly at: number;
}

/** One listen stream, as the client saw it. */
export interface StreamRecord {
  /** The schedule step that opened it. */
  readonly step: number;
  readonly id: string;
  readonly node: number;
  readonly principal: string;
  readonly asked: { readonly lists: readonly ListKind[]; readonly uris: readonly string[] };
  /** When the listen request was sent. */
  readonly listenAt: number;
  /** When the acknowledgement arrived; `undefined` while none did (refused, or not yet). */
  ackAt?: number;
  /** The honoured filter, as keys. */
  honoured?: Key[];
  /** The acknowledgement's URIs and lists as sent, for invariant 2. */
  ackedUris?: string[];
  readonly received: Received[];
  /** When the stream ended (its terminal result, the server closing it, or the client hanging up). */
  endAt?: number;
  endedBy?: 'result' | 'lost' | 'closed' | 'refused';
  /** Messages that broke the wire (not JSON, a response with another id, a second acknowledgement…). */
  readonly strange: string[];
}

/** A REST call that may have changed keys. */
export interface ChangeRecord {
  readonly step: number;
  readonly node: number;
  /** The keys it changed (by its answer), or may have changed when the answer never came. */
  keys: Key[];
  readonly invokedAt: number;
  answeredAt?: number;
  /** True once its answer said it changed `keys`; false when no answer came (possible, not certain). */
  definite: boolean;
}

/** One injected fault, from its start to the quiescence that followed it. */
export interface FaultRecord {
  readonly step: number;
  readonly kind: string;
  readonly startAt: number;
  /** When the recovery ended (the quiescence's checks began); `undefined` while it lasts. */
  recoveredAt?: number;
  /**
   * Outages the nodes counted meanwhile: the increase of `reconnects + resubscribes` summed over every
   * node's bus. A bus that resyncs its streams after each gap may send one notification per key per gap.
   */
  gaps: number;
}

export type Invariant = 1 | 2 | 3 | 4 | 5;

export const INVARIANT_NAMES: Readonly<Record<Invariant, string>> = {
  1: 'no change goes unnoticed',
  2: 'no foreign or unreadable key',
  3: "the server's subscriptions equal the followed keys",
  4: "the hub's counters add up",
  5: 'duplicates only from a resync',
};

export interface Violation {
  readonly invariant: Invariant;
  readonly message: string;
  readonly evidence: Readonly<Record<string, unknown>>;
  /**
   * Identifies the same violation seen at two checks, so that it is reported once. Invariant 3's name
   * the channel or node and the kind (leak or hole) only: one still there at the next check is the same.
   */
  readonly id: string;
}

/** The key a notification is about, or `?<method>` for one that no filter can ask for. */
export function notificationKey(method: string, params: Record<string, unknown> | undefined): Key {
  switch (method) {
    case 'notifications/resources/updated':
      return typeof params?.['uri'] === 'string' ? params['uri'] : '?updated-without-uri';
    case 'notifications/tools/list_changed':
      return 'list:tools';
    case 'notifications/prompts/list_changed':
      return 'list:prompts';
    case 'notifications/resources/list_changed':
      return 'list:resources';
    default:
      return `?${method}`;
  }
}

/** Whether `stream` was open (acknowledged, not ended) at `at`. */
function openAt(stream: StreamRecord, at: number): boolean {
  return stream.ackAt !== undefined && stream.ackAt <= at && (stream.endAt === undefined || stream.endAt > at);
}

function label(stream: StreamRecord): Record<string, unknown> {
  return { stream: stream.id, principal: stream.principal, node: `n${stream.node}`, openedAtStep: stream.step };
}

/**
 * Invariant 1: every stream open now learns of every key it follows that changed after its ack: for
 * the last change of each key sent after the acknowledgement arrived, a notification of that key
 * arrived after the change was sent. (Any later notification will do, a resync's included: it means
 * "read it again", and a read then sees the change.)
 */
export function checkDelivery(
  streams: readonly StreamRecord[],
  changes: readonly ChangeRecord[],
  now: number,
): Violation[] {
  const out: Violation[] = [];
  const lastChange = new Map<Key, ChangeRecord[]>();
  for (const change of changes) {
    if (!change.definite) continue;
    for (const key of change.keys) {
      const list = lastChange.get(key) ?? [];
      list.push(change);
      lastChange.set(key, list);
    }
  }
  for (const stream of streams) {
    if (!openAt(stream, now) || stream.honoured === undefined) continue;
    const ackAt = stream.ackAt as number;
    for (const key of stream.honoured) {
      let last: ChangeRecord | undefined;
      for (const change of lastChange.get(key) ?? []) {
        if (change.invokedAt > ackAt && (last === undefined || change.invokedAt > last.invokedAt)) last = change;
      }
      if (last === undefined) continue;
      const since = last.invokedAt;
      if (stream.received.some((item) => item.key === key && item.at > since)) continue;
      out.push({
        invariant: 1,
        id: `1:${stream.id}:${key}:${last.step}`,
        message: `stream ${stream.id} (${stream.principal} on n${stream.node}) follows ${key}, changed at step ${last.step} on n${last.node}, and has had no notification of it since`,
        evidence: {
          ...label(stream),
          key,
          changedAtStep: last.step,
          changedOnNode: `n${last.node}`,
          msSinceChange: Math.round(now - since),
          notificationsOfKey: stream.received.filter((item) => item.key === key).length,
        },
      });
    }
  }
  return out;
}

/**
 * Invariant 2: the acknowledgement honours only what was asked and may be read, and every notification
 * is of a key the acknowledgement honoured (alice never gets `note://bob/...`). Broken wire messages
 * count here too: what a client cannot parse it cannot trust.
 */
export function checkIsolation(streams: readonly StreamRecord[]): Violation[] {
  const out: Violation[] = [];
  for (const stream of streams) {
    for (const uri of stream.ackedUris ?? []) {
      if (!stream.asked.uris.includes(uri) || !canRead(stream.principal, uri)) {
        out.push({
          invariant: 2,
          id: `2:ack:${stream.id}:${uri}`,
          message: `stream ${stream.id}'s acknowledgement honours ${uri}, which ${stream.principal} ${stream.asked.uris.includes(uri) ? 'may not read' : 'never asked for'}`,
          evidence: { ...label(stream), uri, asked: stream.asked },
        });
      }
    }
    const honoured = new Set(stream.honoured ?? []);
    const seen = new Set<Key>();
    for (const item of stream.received) {
      if (honoured.has(item.key) && (!item.key.startsWith('note://') || canRead(stream.principal, item.key))) continue;
      if (seen.has(item.key)) continue;
      seen.add(item.key);
      out.push({
        invariant: 2,
        id: `2:${stream.id}:${item.key}`,
        message: `stream ${stream.id} (${stream.principal} on n${stream.node}) received ${item.key}, which it does not follow${item.key.startsWith('note://') && !canRead(stream.principal, item.key) ? ' and may not read' : ''}`,
        evidence: { ...label(stream), key: item.key, honoured: [...honoured] },
      });
    }
    for (const strange of stream.strange) {
      out.push({
        invariant: 2,
        id: `2:strange:${stream.id}:${strange}`,
        message: `stream ${stream.id} received a message no listen stream may carry: ${strange}`,
        evidence: { ...label(stream), message: strange },
      });
    }
  }
  return out;
}

/** Whether `[from, to)` (an open end: `undefined`) overlaps the life of `stream`. */
function overlaps(stream: StreamRecord, from: number, to: number | undefined): boolean {
  return from < (stream.endAt ?? Infinity) && (to ?? Infinity) > stream.listenAt;
}

/**
 * How long before a fault's start a change still counts as caught by it: its PUBLISH may have been on
 * the wire, unanswered, when Redis paused or died.
 */
const IN_FLIGHT_MS = 1000;

/**
 * Whether `change` may reach `stream`: sent before the stream ended, and answered after the stream was
 * asked for (or never answered), or answered during a fault that recovered only after the stream was
 * asked for. A fault delays a change's delivery to the other nodes: Redis paused holds its PUBLISH,
 * then may serve a later SUBSCRIBE first; a bus that remembers what it could not send publishes it
 * once back. A stream asked for meanwhile may then hear of a change older than itself.
 */
function mayReach(change: ChangeRecord, stream: StreamRecord, faults: readonly FaultRecord[]): boolean {
  if (change.invokedAt >= (stream.endAt ?? Infinity)) return false;
  const answeredAt = change.answeredAt ?? Infinity;
  if (answeredAt > stream.listenAt) return true;
  return faults.some(
    (fault) =>
      answeredAt >= fault.startAt - IN_FLIGHT_MS &&
      answeredAt <= (fault.recoveredAt ?? Infinity) &&
      (fault.recoveredAt ?? Infinity) > stream.listenAt,
  );
}

/**
 * Invariant 5: duplicates come only from a resync. Per stream and key, the notifications are at most
 * the changes that may have reached it ({@link mayReach}), plus the gaps it lived through (each fault
 * overlapping its life counts the outages the nodes saw meanwhile, one at least).
 */
export function checkDuplicates(
  streams: readonly StreamRecord[],
  changes: readonly ChangeRecord[],
  faults: readonly FaultRecord[],
): Violation[] {
  const out: Violation[] = [];
  for (const stream of streams) {
    const counts = new Map<Key, number>();
    for (const item of stream.received) counts.set(item.key, (counts.get(item.key) ?? 0) + 1);
    if (counts.size === 0) continue;
    const gaps = faults
      .filter((fault) => overlaps(stream, fault.startAt, fault.recoveredAt))
      .reduce((sum, fault) => sum + Math.max(1, fault.gaps), 0);
    for (const [key, count] of counts) {
      const possible = changes.filter((change) => change.keys.includes(key) && mayReach(change, stream, faults)).length;
      if (count <= possible + gaps) continue;
      out.push({
        invariant: 5,
        id: `5:${stream.id}:${key}:${count}`,
        message: `stream ${stream.id} (${stream.principal} on n${stream.node}) received ${count} notifications of ${key}: more than the ${possible} change(s) that may have reached it plus the ${gaps} gap(s) it lived through`,
        evidence: { ...label(stream), key, notifications: count, possibleChanges: possible, gaps },
      });
    }
  }
  return out;
}

/** What Redis says a node's subscriber connection(s) hold. */
export interface SubscriptionView {
  /** Per node: channels its subscriber connections hold (`sub=` / `ssub=` of `CLIENT LIST`, summed). */
  readonly perNode: readonly number[];
  /** Per node: the same by server (port), for the evidence. */
  readonly perNodeByServer?: readonly Readonly<Record<string, number>>[];
  /** Per channel of the universe: subscribers Redis counts (`PUBSUB NUMSUB` / `SHARDNUMSUB`). */
  readonly perChannel: ReadonlyMap<string, number>;
}

/**
 * Invariant 3: each node's subscriptions on Redis equal the channels its open streams follow (plus the
 * fixed ones). Redis tells channels per connection only as a count, and subscribers per channel only
 * as a count: both are compared. A leak (a channel no stream of the node follows, still held) or a
 * hole (a followed key's channel not held) shows in one or both.
 *
 * @param expected per node, the channels it must hold
 * @param names a channel's key, for the evidence
 */
export function checkSubscriptions(
  expected: readonly ReadonlySet<string>[],
  view: SubscriptionView,
  names: ReadonlyMap<string, string>,
): Violation[] {
  const out: Violation[] = [];
  for (const [channel, observed] of view.perChannel) {
    const holders = expected.flatMap((channels, node) => (channels.has(channel) ? [`n${node}`] : []));
    if (observed === holders.length) continue;
    const key = names.get(channel) ?? channel;
    const kind = observed > holders.length ? 'leak' : 'hole';
    out.push({
      invariant: 3,
      id: `3:${channel}:${kind}`,
      message: `${kind}: ${observed} subscriber(s) of the channel of ${key} on Redis, but ${holders.length} node(s) with a stream following it (${holders.join(', ') || 'none'})`,
      evidence: { kind, key, channel, subscribers: observed, followedOn: holders },
    });
  }
  expected.forEach((channels, node) => {
    const observed = view.perNode[node] ?? 0;
    if (observed === channels.size) return;
    const kind = observed > channels.size ? 'leak' : 'hole';
    out.push({
      invariant: 3,
      id: `3:n${node}:${kind}`,
      message: `${kind}: n${node}'s subscriber holds ${observed} channel(s) on Redis, its open streams follow ${channels.size}`,
      evidence: {
        kind,
        node: `n${node}`,
        held: observed,
        ...(view.perNodeByServer === undefined ? {} : { heldByServer: view.perNodeByServer[node] }),
        followed: [...channels].map((channel) => names.get(channel) ?? channel).sort(),
      },
    });
  });
  return out;
}

/** What PostgreSQL showed of each node's LISTENs (backends.ts, `postgresBackend`). */
export interface ListeningView {
  /** Per channel probed: the nodes (by index) that heard a NOTIFY on it. */
  readonly heardBy: ReadonlyMap<string, readonly number[]>;
  /** Per node: the LISTENs its bus counts as confirmed by the server, where its stats report them. */
  readonly confirmed?: readonly (number | undefined)[];
}

/**
 * Invariant 3 on PostgreSQL: each node hears a NOTIFY on exactly the channels its open streams follow
 * (plus the fixed ones): for each channel probed, the nodes that heard it are the nodes expected to hold
 * it. A leak (heard, followed by none of the node's streams) or a hole (followed, not heard) is named by
 * channel, node and kind. Where a node's bus reports its confirmed LISTENs, their number must be the
 * number of channels expected of it.
 */
export function checkListening(
  expected: readonly ReadonlySet<string>[],
  view: ListeningView,
  names: ReadonlyMap<string, string>,
): Violation[] {
  const out: Violation[] = [];
  for (const [channel, heard] of view.heardBy) {
    const key = names.get(channel) ?? channel;
    expected.forEach((channels, node) => {
      const follows = channels.has(channel);
      if (follows === heard.includes(node)) return;
      const kind = follows ? 'hole' : 'leak';
      out.push({
        invariant: 3,
        id: `3:${channel}:n${node}:${kind}`,
        message: `${kind}: n${node} ${follows ? 'did not hear' : 'heard'} a NOTIFY on the channel of ${key}, ${follows ? 'which a stream of it follows' : 'which none of its streams follows'}`,
        evidence: {
          kind,
          key,
          channel,
          node: `n${node}`,
          heardBy: heard.map((n) => `n${n}`),
          followedOn: expected.flatMap((set, n) => (set.has(channel) ? [`n${n}`] : [])),
        },
      });
    });
  }
  view.confirmed?.forEach((count, node) => {
    const channels = expected[node];
    if (count === undefined || channels === undefined || count === channels.size) return;
    const kind = count > channels.size ? 'leak' : 'hole';
    out.push({
      invariant: 3,
      id: `3:n${node}:confirmed:${kind}`,
      message: `${kind}: n${node}'s bus counts ${count} confirmed LISTEN(s), its open streams follow ${channels.size} channel(s)`,
      evidence: {
        kind,
        node: `n${node}`,
        confirmed: count,
        followed: [...channels].map((channel) => names.get(channel) ?? channel).sort(),
      },
    });
  });
  return out;
}

/** The parts of `GET /api/subscriptions/stats` invariant 4 reads. */
export interface HubCounters {
  readonly openStreams: number;
  readonly pendingStreams: number;
  readonly principals: number;
  readonly maxOpenPerPrincipal: number;
  readonly opened: number;
  readonly closed: Readonly<Record<string, number>>;
}

/**
 * Invariant 4: each hub's counters add up: `opened = openStreams + sum(closed)`, its open streams are
 * the ones its clients hold, no listen is pending at quiescence, and with no stream open no principal
 * is counted.
 */
export function checkCounters(stats: readonly HubCounters[], openByNode: readonly number[]): Violation[] {
  const out: Violation[] = [];
  stats.forEach((hub, node) => {
    const closed = Object.values(hub.closed).reduce((sum, count) => sum + count, 0);
    const fail = (what: string, evidence: Record<string, unknown>): void => {
      out.push({
        invariant: 4,
        id: `4:n${node}:${what}:${JSON.stringify(evidence)}`,
        message: `n${node}: ${what}`,
        evidence: { node: `n${node}`, ...evidence },
      });
    };
    if (hub.opened !== hub.openStreams + closed) {
      fail('opened != openStreams + sum(closed by reason)', {
        opened: hub.opened,
        openStreams: hub.openStreams,
        closed: hub.closed,
      });
    }
    const clients = openByNode[node] ?? 0;
    if (hub.openStreams !== clients) {
      fail('the hub counts another number of open streams than its clients hold', {
        openStreams: hub.openStreams,
        heldByClients: clients,
      });
    }
    if (hub.pendingStreams !== 0) fail('listens still pending at quiescence', { pendingStreams: hub.pendingStreams });
    if (hub.openStreams === 0 && (hub.principals !== 0 || hub.maxOpenPerPrincipal !== 0)) {
      fail('principals counted with no stream open', {
        principals: hub.principals,
        maxOpenPerPrincipal: hub.maxOpenPerPrincipal,
      });
    }
  });
  return out;
}
