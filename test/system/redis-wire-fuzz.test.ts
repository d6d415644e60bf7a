/**
 * The Redis bus's wire, fuzzed (issue #14). Two nodes joined through `RedisBus` on a real Redis (node
 * A: an ioredis bus with two hubs, on Express 5 and Express 4; node B: a node-redis bus with one hub, on
 * Express 5), each hub with listen streams of several principals open over real HTTP on loopback and
 * read by the SSE parser of test/helpers/sse.ts. A raw Redis client publishes straight onto the bus's
 * channel: valid messages, the same mutated at every depth (wrong types, missing and extra fields,
 * huge strings and arrays, deep nests, `__proto__` / `constructor` / `prototype` keys, duplicate and
 * escaped keys, numbers a double cannot hold), damaged bytes (invalid UTF-8, truncation, random bytes,
 * a BOM, UTF-16, empty), messages claiming to come from the receiving node, other versions and kinds,
 * and messages around the 4 MiB bound, interleaved.
 *
 * The same again on this release's channels (wire v2, published on the tools list's channel, which both
 * nodes follow), where an event message may carry a context (`at`, `trace`): what the contract accepts
 * reaches every member of the node with exactly the context it carried (a bus member of each node
 * records it). And events a bus member publishes with contexts as any caller might hand them (valid, or a
 * custom caller's mistakes): the other node's members get what the contract says the writer carries of
 * each, and the event whatever the context.
 *
 * Every message is judged, for each node, by an oracle written from the wire's contract
 * (test/helpers/wire-oracle.ts), never by the bus's own decoder. What the oracle accepts reaches
 * exactly the streams it should, once, as the exact bytes the oracle writes, and every hub listener of
 * the node; a cancellation ends exactly the streams of its principal and id. What it refuses reaches no
 * stream and no listener and is counted in `stats().dropped` (the first one logged, the rest only
 * counted); a node's own message is neither. After every case: a valid message still gets through,
 * both buses are connected, nothing was logged as an error, nothing threw or rejected unhandled, and
 * `Object.prototype`, `Array.prototype` and `Function.prototype` are unchanged.
 *
 * Also: an event a host publishes gives the same frames on every node, whatever its task state holds
 * (a `"__proto__"` key included, once refused by the wire while delivered locally).
 *
 * The Redis suites need Redis on 127.0.0.1:6379 and report themselves skipped when it does not answer;
 * under CI (`CI` set) a missing Redis fails instead. fast-check picks the seed and prints it with the
 * counterexample on a failure; replay one with `test.prop(arbitraries, { seed, path })`. With
 * `WIREFUZZ_FIGURES=1` the file prints how many messages of each class each node took or dropped.
 */
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { fc, test as propTest } from '@fast-check/jest';
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { SubscriptionHub, type BusMember, type SubscriptionEvent, type TaskState } from 'mcp-subscriptions';
import { mcpSubscriptions } from 'mcp-subscriptions/express';
import { RedisBus } from 'mcp-subscriptions/redis';
import { EVERY_CAPABILITY } from '../helpers/capabilities.ts';
import { authFromUserHeader, expressFlavours, listenOn, type RunningServer } from '../helpers/express-apps.ts';
import { recordingLogger, waitFor } from '../helpers/fake-response.ts';
import {
  editAt,
  escapedText,
  jsonNode,
  jsonText,
  literal,
  mutate,
  type JsonEntry,
  type JsonNode,
  type Mutation,
} from '../helpers/json-text.ts';
import { expectUnpolluted } from '../helpers/prototypes.ts';
import { REDIS_URL, sharedRedisMissing } from '../helpers/redis.ts';
import { describeUnless, failUnderCi } from '../helpers/skip.ts';
import { postLineFed, type LineFedStream } from '../helpers/sse-lines.ts';
import { listenBody, listenHeaders, TASKS_META } from '../helpers/sse.ts';
import { UnhandledTracker } from '../helpers/unhandled.ts';
import { INVALID_UTF8 } from '../helpers/utf8.ts';
import { callerContextArb, contextEntriesArb } from '../helpers/wire-context.ts';
import {
  cancels,
  frameData,
  judge,
  listenerView,
  ownPrefix,
  type WireChannel,
  type WireContext,
  follows,
  reaches,
  WIRE_LIMIT_BYTES,
  writtenEvent,
  type StreamModel,
  type Verdict,
  type WireEvent,
} from '../helpers/wire-oracle.ts';

const redisMissing = await sharedRedisMissing();
failUnderCi('Redis for the wire fuzzer', redisMissing);

/**
 * Shrinking replays a failing case over Redis and HTTP many times: past this limit fast-check stops and
 * reports the smallest counterexample so far, with its seed, before jest's timeout would swallow it.
 */
const BOUNDED = { interruptAfterTimeLimit: 45_000, markInterruptAsFailure: true } as const;

// Node ids with characters JSON escapes: a node recognizes its own messages by their first bytes, which
// hold the id as JSON.
const A_ID = `wirefuzz "A" é\t${randomUUID().slice(0, 8)}`;
const B_ID = `wirefuzz-B-${randomUUID().slice(0, 8)}`;
/** Who sends the markers that close each exchange: a node that is neither. */
const MARKER_NODE = 'wirefuzz-marker';
const MARKER_URI = 'marker://wirefuzz/sync';
const MARKER: WireEvent = { kind: 'resource_updated', uri: MARKER_URI };

// ---------------------------------------------------------------------------------------------------
// The world: URIs, tasks and principals, and the streams every hub holds
// ---------------------------------------------------------------------------------------------------

const WATCHED_URIS = ['note://alice/todo', 'note://shared/é', 'urn:x:😀?q=1#f', "x:'it''s'%2F"] as const;
const OTHER_URIS = ['note://nobody/else', 'NOTE://alice/todo', 'note://alice/todo/'];
const BAD_URIS = ['relative/path', 'note://a b', '', 'note://x\n', 'note://"q"', ':x'];
const WATCHED_TASKS = ['t-1', 't-2', 't\nlf'] as const;
const OTHER_TASKS = ['T-1', 't-3', ' t-1'];
/** The task of the size bound's cases (owned by bob): watched by bob's stream on every hub, no other. */
const BIG_TASK = 't-big';
const PRINCIPALS = ['alice', 'bob', 'ALICE', 'carol', 'anonymous', '\u0000anonymous', 'alice\u0000', ''];

interface StreamSpec extends StreamModel {
  readonly name: string;
}

/** Every hub holds one stream of each: principals that differ by case, ids that differ by type, an anonymous caller. */
const STREAMS: readonly StreamSpec[] = [
  {
    name: 'alice',
    principal: 'alice',
    id: 'listen:1',
    filter: {
      toolsListChanged: true,
      promptsListChanged: true,
      resourcesListChanged: true,
      resourceSubscriptions: [WATCHED_URIS[0], WATCHED_URIS[1], WATCHED_URIS[2], MARKER_URI],
      taskIds: [...WATCHED_TASKS],
    },
  },
  {
    name: 'bob',
    principal: 'bob',
    id: 1,
    filter: {
      toolsListChanged: true,
      resourceSubscriptions: [WATCHED_URIS[0], WATCHED_URIS[3], MARKER_URI],
      taskIds: ['t-1', BIG_TASK],
    },
  },
  {
    name: 'alice "1"',
    principal: 'alice',
    id: '1',
    filter: { promptsListChanged: true, resourceSubscriptions: [WATCHED_URIS[1], MARKER_URI], taskIds: ['t-2'] },
  },
  {
    name: 'ALICE',
    principal: 'ALICE',
    id: 'listen:1',
    filter: {
      resourcesListChanged: true,
      resourceSubscriptions: [WATCHED_URIS[3], MARKER_URI],
      taskIds: ['t-1', 't\nlf'],
    },
  },
  {
    name: 'anonymous',
    principal: undefined,
    id: 0,
    filter: { toolsListChanged: true, resourceSubscriptions: [WATCHED_URIS[0], WATCHED_URIS[2], MARKER_URI] },
  },
];

// ---------------------------------------------------------------------------------------------------
// The nodes
// ---------------------------------------------------------------------------------------------------

interface Live {
  readonly spec: StreamSpec;
  readonly client: LineFedStream;
  /** Events of `client` already judged (the acknowledgement, then every earlier exchange's). */
  from: number;
}

interface HubNode {
  readonly name: string;
  readonly hub: SubscriptionHub;
  readonly server: RunningServer;
  readonly logger: ReturnType<typeof recordingLogger>;
  /** What the hub's listener (`subscribeAll`) received, as {@link listenerView}s. */
  readonly heard: string[];
  /** Listener events whose objects did not have the ordinary prototypes. */
  readonly oddPrototypes: unknown[];
  lives: Live[];
}

/** What a bus member heard: the event (as a {@link listenerView}) and the context it came with. */
interface Tapped {
  readonly event: string;
  readonly context: WireContext | undefined;
}

interface BusNode {
  readonly name: string;
  readonly id: string;
  readonly bus: RedisBus;
  readonly logger: ReturnType<typeof recordingLogger>;
  readonly hubs: HubNode[];
  /** A bus member besides the hubs: records every event with its context, and publishes with contexts. */
  readonly tap: { readonly member: BusMember; readonly heard: Tapped[] };
  /** Whether the oracle has refused a message at this node yet (then exactly one warning is logged). */
  dropped: boolean;
}

const nodes: BusNode[] = [];
const hubs = (): HubNode[] => nodes.flatMap((node) => node.hubs);
const cleanups: (() => unknown)[] = [];
let raw: Redis;
/** The first release's channel, where the raw messages of format 1 go. */
let channel = '';
/** A channel of this release both nodes follow (the tools list's: every hub has streams on it), for format 2. */
let currentChannel = '';

const unhandled = new UnhandledTracker();

async function startHub(name: string, flavour: (typeof expressFlavours)[number], bus: RedisBus): Promise<HubNode> {
  const logger = recordingLogger();
  const hub = new SubscriptionHub({ bus, logger });
  const heard: string[] = [];
  const oddPrototypes: unknown[] = [];
  hub.subscribeAll((event) => {
    const task = (event as { task?: unknown }).task;
    if (
      Object.getPrototypeOf(event) !== Object.prototype ||
      (task !== undefined && Object.getPrototypeOf(task) !== Object.prototype)
    ) {
      oddPrototypes.push(event);
    }
    heard.push(listenerView(event));
  });
  const app = flavour.express();
  app.post(
    '/mcp',
    authFromUserHeader,
    mcpSubscriptions({
      hub,
      capabilities: EVERY_CAPABILITY,
      canRead: () => true,
      canAccessTask: () => true,
      keepAliveMs: false,
    }),
  );
  return { name, hub, logger, heard, oddPrototypes, lives: [], server: await listenOn(app) };
}

/** Opens `spec`'s stream on `hub` over HTTP and checks its acknowledgement. */
async function open(hub: HubNode, spec: StreamSpec): Promise<Live> {
  const headers = listenHeaders(spec.principal === undefined ? {} : { 'x-user': spec.principal });
  const client = await postLineFed(hub.server.url, listenBody(spec.id, spec.filter, TASKS_META), headers);
  expect(client.status).toBe(200);
  const ack = await client.event(1);
  expect({ stream: spec.name, ack: ack.json }).toStrictEqual({
    stream: spec.name,
    ack: {
      jsonrpc: '2.0',
      method: 'notifications/subscriptions/acknowledged',
      params: { _meta: { 'io.modelcontextprotocol/subscriptionId': spec.id }, notifications: spec.filter },
    },
  });
  return { spec, client, from: 1 };
}

async function openAll(): Promise<void> {
  for (const hub of hubs()) {
    for (const live of hub.lives) live.client.close();
    hub.lives = [];
    for (const spec of STREAMS) hub.lives.push(await open(hub, spec));
  }
  await waitFor(
    () => hubs().every((hub) => hub.hub.stats().openStreams === STREAMS.length),
    'every hub holding exactly its streams',
  );
}

async function startNodes(): Promise<void> {
  channel = '';
  const channelPrefix = `mcp-subscriptions-wirefuzz:${process.pid}:${randomUUID().slice(0, 8)}`;
  const noop = (): void => {};

  // Node A on the caller's ioredis clients, node B on the caller's node-redis clients.
  const ioPublisher = new Redis(REDIS_URL);
  const ioSubscriber = ioPublisher.duplicate();
  const nrPublisher = createClient({ url: REDIS_URL });
  const nrSubscriber = nrPublisher.duplicate();
  for (const client of [ioPublisher, ioSubscriber]) {
    client.on('error', noop);
    cleanups.push(() => client.disconnect());
  }
  for (const client of [nrPublisher, nrSubscriber]) {
    client.on('error', noop);
    cleanups.push(() => client.isOpen && client.destroy());
  }
  await Promise.all([nrPublisher.connect(), nrSubscriber.connect()]);
  const loggerA = recordingLogger();
  const loggerB = recordingLogger();
  const busA = new RedisBus({
    publisher: ioPublisher,
    subscriber: ioSubscriber,
    channelPrefix,
    nodeId: A_ID,
    logger: loggerA,
  });
  const busB = new RedisBus({
    publisher: nrPublisher,
    subscriber: nrSubscriber,
    channelPrefix,
    nodeId: B_ID,
    logger: loggerB,
  });
  cleanups.push(
    () => busA.close(),
    () => busB.close(),
  );
  await waitFor(() => busA.stats().connected && busB.stats().connected, 'both buses connected', 10_000);
  channel = busA.channel;
  currentChannel = `${channelPrefix}:2:l:tools`;

  raw = new Redis(REDIS_URL);
  raw.on('error', noop);
  cleanups.push(() => raw.disconnect());

  const tapOn = (bus: RedisBus): BusNode['tap'] => {
    const heard: Tapped[] = [];
    const member = bus.join({
      event: (event, context) => heard.push({ event: listenerView(event), context }),
      cancel: noop,
    });
    cleanups.push(() => member.leave());
    return { member, heard };
  };
  const a: BusNode = { name: 'A', id: A_ID, bus: busA, logger: loggerA, hubs: [], tap: tapOn(busA), dropped: false };
  const b: BusNode = { name: 'B', id: B_ID, bus: busB, logger: loggerB, hubs: [], tap: tapOn(busB), dropped: false };
  a.hubs.push(await startHub('A1', expressFlavours[0]!, busA), await startHub('A2', expressFlavours[1]!, busA));
  b.hubs.push(await startHub('B1', expressFlavours[0]!, busB));
  for (const hub of [...a.hubs, ...b.hubs]) {
    cleanups.push(
      () => hub.server.close(),
      () => hub.hub.close(),
    );
  }
  nodes.push(a, b);
  await openAll();
}

async function stopNodes(): Promise<void> {
  for (const cleanup of cleanups.splice(0).reverse()) {
    try {
      await cleanup();
    } catch {
      // already closed
    }
  }
}

// ---------------------------------------------------------------------------------------------------
// One exchange: messages sent, the model's expectations, and the check of what arrived
// ---------------------------------------------------------------------------------------------------

/** The oracle's verdicts, once per message, node and channel (a 4 MiB message is worth not parsing four times). */
const verdicts = new WeakMap<Uint8Array, Map<string, Verdict>>();
function verdictOf(bytes: Uint8Array, node: BusNode, on: WireChannel = 'legacy'): Verdict {
  let byNode = verdicts.get(bytes);
  if (byNode === undefined) verdicts.set(bytes, (byNode = new Map()));
  const key = `${on} ${node.id}`;
  let verdict = byNode.get(key);
  if (verdict === undefined) byNode.set(key, (verdict = judge(bytes, node.id, on)));
  return verdict;
}

/** A context the model does not predict: what a hub hands its bus with what host code publishes is the hub's business. */
const UNCHECKED = 'the hub’s own';
type ExpectedContext = WireContext | undefined | typeof UNCHECKED;

/** What the model says one exchange does. */
class Expectation {
  readonly frames = new Map<Live, string[]>();
  /** Streams a cancellation ended in this exchange. */
  readonly cancelled = new Set<Live>();
  readonly heard = new Map<HubNode, string[]>();
  /** What each node's tap member must hear, with the context of each. */
  readonly tapped = new Map<BusNode, { event: string; context: ExpectedContext }[]>();
  readonly received = new Map<BusNode, number>();
  readonly dropped = new Map<BusNode, number>();
  readonly published = new Map<BusNode, number>();
  readonly verdicts: { node: string; verdict: Verdict }[] = [];

  constructor() {
    for (const node of nodes) {
      this.received.set(node, 0);
      this.dropped.set(node, 0);
      this.published.set(node, 0);
      this.tapped.set(node, []);
      for (const hub of node.hubs) {
        this.heard.set(hub, []);
        for (const live of hub.lives) this.frames.set(live, []);
      }
    }
  }

  /** `bytes` arrived at every node from Redis, on a channel of `on`. */
  arrived(bytes: Uint8Array, on: WireChannel = 'legacy'): void {
    for (const node of nodes) this.take(node, verdictOf(bytes, node, on));
  }

  /** A host on `hub` published `event` (valid): its node delivers it, its bus sends it to the others. */
  publishedOn(hub: HubNode, event: WireEvent): void {
    const home = nodes.find((node) => node.hubs.includes(hub))!;
    // Delivered here first: to its own streams, then to the other hubs of its node and its tap, directly.
    for (const member of home.hubs) this.hand(member, event);
    this.tapped.get(home)!.push({ event: listenerView(event), context: UNCHECKED });
    this.sent(home, event, Buffer.from(writtenEvent(home.id, event)), true);
  }

  /** The tap member of `home` published `event` with `context` (as given: valid or not). */
  publishedBy(home: BusNode, event: WireEvent, context: Record<string, unknown> | undefined): void {
    // The node's other members (its hubs) get it directly; the tap, which published it, does not.
    for (const member of home.hubs) this.hand(member, event);
    this.sent(home, event, Buffer.from(writtenEvent(home.id, event, context)), false);
  }

  /**
   * `home` wrote `bytes` (what its bus writes by the contract) on the event's own channel: judged by the
   * others as any message there (every node follows the keys the exchanges publish: each has streams on
   * them). The home node hears its own message back from Redis, and ignores it; another node hears it
   * only when one of its open streams follows the event's key (interest routing).
   */
  private sent(home: BusNode, event: WireEvent, bytes: Buffer, unchecked: boolean): void {
    this.published.set(home, this.published.get(home)! + 1);
    for (const node of nodes) {
      if (node !== home && !node.hubs.some((hub) => hub.lives.some((live) => follows(event, live.spec)))) continue;
      this.take(node, verdictOf(bytes, node, 'current'), unchecked);
    }
  }

  private take(node: BusNode, verdict: Verdict, unchecked = false): void {
    this.verdicts.push({ node: node.name, verdict });
    switch (verdict.kind) {
      case 'own':
        return;
      case 'drop':
        this.dropped.set(node, this.dropped.get(node)! + 1);
        node.dropped = true;
        return;
      case 'event':
        this.received.set(node, this.received.get(node)! + 1);
        for (const hub of node.hubs) this.hand(hub, verdict.event);
        this.tapped.get(node)!.push({
          event: listenerView(verdict.event),
          context: unchecked ? UNCHECKED : verdict.context,
        });
        return;
      case 'cancel':
        this.received.set(node, this.received.get(node)! + 1);
        for (const hub of node.hubs) {
          for (const live of hub.lives) {
            if (!this.cancelled.has(live) && cancels(verdict.principal, verdict.id, live.spec)) {
              this.cancelled.add(live);
            }
          }
        }
        return;
    }
  }

  private hand(hub: HubNode, event: WireEvent): void {
    this.heard.get(hub)!.push(listenerView(event));
    for (const live of hub.lives) {
      if (!this.cancelled.has(live) && reaches(event, live.spec)) {
        this.frames.get(live)!.push(frameData(event, live.spec.id));
      }
    }
  }
}

/** The coalescing key an event has on a stream (a list kind, a URI, a task id). */
function keyOf(event: WireEvent): string {
  return event.kind === 'resource_updated'
    ? `r:${event.uri}`
    : event.kind === 'task_status'
      ? `t:${String(event.task.taskId)}`
      : event.kind;
}

/**
 * Splits messages into exchanges in which no two accepted events share a key. A stream whose socket
 * pushes back (a huge frame) queues what follows and merges a newer event of a key into the queued one:
 * documented, and not what this file checks, so that every accepted event must arrive, exactly once.
 */
function exchanges(messages: readonly Uint8Array[], on: WireChannel): Uint8Array[][] {
  const out: Uint8Array[][] = [[]];
  let keys = new Set<string>();
  for (const bytes of messages) {
    const accepted = nodes
      .map((node) => verdictOf(bytes, node, on))
      .flatMap((verdict) => (verdict.kind === 'event' ? [keyOf(verdict.event)] : []));
    if (accepted.some((key) => keys.has(key))) {
      out.push([]);
      keys = new Set();
    }
    for (const key of accepted) keys.add(key);
    out.at(-1)!.push(bytes);
  }
  return out;
}

/** The marker every exchange ends with, as a node that is neither A nor B writes it. */
const markerBytes = Buffer.from(
  `${ownPrefix(MARKER_NODE)}"type":"event","event":${JSON.stringify({ kind: 'resource_updated', uri: MARKER_URI })}}`,
);
/** The marker of the exchanges on this release's channels, in format 2. */
const markerBytesV2 = Buffer.from(writtenEvent(MARKER_NODE, MARKER));

/** Tallies over the whole file, for the figures: per class of message, what each node did with it. */
const figures = new Map<string, number>();
function tally(kind: string, n = 1): void {
  figures.set(kind, (figures.get(kind) ?? 0) + n);
}

/** An event a tap member publishes, with the context its caller hands it (none when undefined). */
type MemberEvent = readonly [WireEvent, Record<string, unknown> | undefined];

/**
 * Sends one exchange (raw bytes from the raw publisher on the legacy channel or, `on: 'current'`, on one
 * of this release's; events a host publishes on one hub; or events a node's tap member publishes with
 * contexts) followed by a marker on the same connection, waits until the marker has reached every
 * stream, listener and bus, and checks that exactly what the model says arrived, in order.
 */
async function exchange(
  send:
    | { readonly raw: readonly Uint8Array[]; readonly on?: WireChannel }
    | { readonly hub: HubNode; readonly events: readonly WireEvent[] }
    | { readonly member: BusNode; readonly events: readonly MemberEvent[] },
  classes?: readonly string[],
): Promise<void> {
  const expectation = new Expectation();
  const before = new Map(nodes.map((node) => [node, node.bus.stats()]));
  const heardBefore = new Map(hubs().map((hub) => [hub, hub.heard.length]));
  const tappedBefore = new Map(nodes.map((node) => [node, node.tap.heard.length]));
  if ('raw' in send) {
    const on = send.on ?? 'legacy';
    const marker = on === 'legacy' ? markerBytes : markerBytesV2;
    for (const bytes of send.raw) expectation.arrived(bytes, on);
    expectation.arrived(marker, on);
    // Pipelined on one connection: Redis hands them to every subscriber in this order.
    const to = on === 'legacy' ? channel : currentChannel;
    await Promise.all([...send.raw, marker].map((bytes) => raw.publish(to, Buffer.from(bytes))));
  } else if ('hub' in send) {
    for (const event of [...send.events, MARKER]) {
      expectation.publishedOn(send.hub, event);
      // Published through the hub, as host code does; the marker on the same bus, after them.
      send.hub.hub.publish(event as SubscriptionEvent);
    }
  } else {
    for (const [event, context] of [...send.events, [MARKER, undefined] as const]) {
      expectation.publishedBy(send.member, event, context);
      const { member } = send.member.tap;
      if (context === undefined) member.publish(event as SubscriptionEvent);
      else member.publish(event as SubscriptionEvent, context);
    }
  }
  if (classes !== undefined) {
    expectation.verdicts.forEach(({ node, verdict }, i) => {
      const cls = classes[Math.floor(i / nodes.length)] ?? 'marker';
      tally(`${cls} ${node} ${verdict.kind === 'drop' ? `drop:${verdict.why}` : verdict.kind}`);
    });
  }

  const markerData = (live: Live): string => frameData(MARKER, live.spec.id);
  const markerView = listenerView(MARKER);
  await waitFor(
    () =>
      hubs().every(
        (hub) =>
          hub.heard.slice(heardBefore.get(hub)).includes(markerView) &&
          // A stream the model holds open that ended all the same is judged now, not waited for.
          hub.lives.every(
            (live) =>
              live.client.ended ||
              (!expectation.cancelled.has(live) &&
                live.client.events.slice(live.from).some((event) => event.data === markerData(live))),
          ),
      ) &&
      nodes.every(
        (node) => node.bus.stats().published - before.get(node)!.published >= expectation.published.get(node)!,
      ),
    'the exchange to arrive at every stream, listener and bus',
    10_000,
  );

  for (const node of nodes) {
    const expected = expectation.tapped.get(node)!;
    // Compared in full, but for the contexts the model leaves to the hub.
    const heard = node.tap.heard
      .slice(tappedBefore.get(node))
      .map((got, i) => (expected[i]?.context === UNCHECKED ? { ...got, context: UNCHECKED } : got));
    expect({ node: node.name, tapped: heard }).toStrictEqual({ node: node.name, tapped: expected });
    tally('contexts compared', expected.filter((entry) => entry.context !== UNCHECKED).length);
  }
  for (const hub of hubs()) {
    expect({ hub: hub.name, heard: hub.heard.slice(heardBefore.get(hub)) }).toStrictEqual({
      hub: hub.name,
      heard: expectation.heard.get(hub),
    });
    for (const live of hub.lives) {
      const got = live.client.events.slice(live.from);
      const data = got.map((event) => event.data);
      const expected = expectation.frames.get(live)!;
      const who = { hub: hub.name, stream: live.spec.name };
      tally('frames read and compared', data.length);
      expect({ ...who, events: got.map((event) => event.event) }).toStrictEqual({
        ...who,
        events: got.map(() => 'message'),
      });
      if (expectation.cancelled.has(live)) {
        // Ended by a cancellation: what was batched in the same tick as it is never written, so a prefix.
        expect({ ...who, data }).toStrictEqual({ ...who, data: expected.slice(0, data.length) });
      } else {
        expect({ ...who, data, ended: live.client.ended }).toStrictEqual({ ...who, data: expected, ended: false });
        live.from = live.client.events.length;
      }
    }
  }
  // Redis's replies to a node's publishes come back on its publisher's own connection, maybe after the
  // marker reached the subscribers: give them a moment (the comparison below says what is missing).
  await waitFor(
    () =>
      nodes.every(
        (node) => node.bus.stats().published - before.get(node)!.published >= expectation.published.get(node)!,
      ),
    "Redis's replies to the nodes' publishes",
    2000,
  ).catch(() => undefined);
  for (const node of nodes) {
    const stats = node.bus.stats();
    const was = before.get(node)!;
    expect({
      node: node.name,
      received: stats.received - was.received,
      dropped: stats.dropped - was.dropped,
      published: stats.published - was.published,
      connected: stats.connected,
      reconnects: stats.reconnects,
    }).toStrictEqual({
      node: node.name,
      received: expectation.received.get(node),
      dropped: expectation.dropped.get(node),
      published: expectation.published.get(node),
      connected: true,
      reconnects: 0,
    });
  }
  tally('exchanges');
  if ('hub' in send) tally('host publishes', send.events.length);
  if ('member' in send) tally('member publishes', send.events.length);
  for (const hub of hubs()) tally('listener events compared', expectation.heard.get(hub)!.length);
  for (const verdict of expectation.verdicts) if (verdict.verdict.kind === 'cancel') tally('cancellations accepted');
  tally('streams ended by a cancellation', expectation.cancelled.size);

  // Streams a cancellation ended: closed on their hub, then opened again for the next exchange.
  for (const hub of hubs()) {
    const ended = hub.lives.filter((live) => expectation.cancelled.has(live));
    if (ended.length === 0) continue;
    await waitFor(
      () => hub.hub.stats().openStreams === STREAMS.length - ended.length,
      'the cancelled streams closed on their hub',
    );
    hub.lives = await Promise.all(
      hub.lives.map((live) => (expectation.cancelled.has(live) ? open(hub, live.spec) : Promise.resolve(live))),
    );
  }
}

/** What must hold after every case, whatever it sent. */
function expectHealthy(): void {
  for (const node of nodes) {
    expect({ node: node.name, errors: node.logger.errors }).toStrictEqual({ node: node.name, errors: [] });
    // The first refused message is logged (warn), naming its reason; the rest are only counted.
    expect({ node: node.name, warnings: node.logger.warns.length }).toStrictEqual({
      node: node.name,
      warnings: node.dropped ? 1 : 0,
    });
    if (node.dropped) expect(String(node.logger.warns[0]![0])).toMatch(/was dropped \([a-z-]+\)/);
  }
  for (const hub of hubs()) {
    expect({ hub: hub.name, errors: hub.logger.errors, warnings: hub.logger.warns }).toStrictEqual({
      hub: hub.name,
      errors: [],
      warnings: [],
    });
    expect({ hub: hub.name, oddPrototypes: hub.oddPrototypes }).toStrictEqual({ hub: hub.name, oddPrototypes: [] });
  }
  expect({ unhandled: unhandled.rejections, uncaught: unhandled.exceptions }).toStrictEqual({
    unhandled: [],
    uncaught: [],
  });
  expectUnpolluted();
}

/**
 * Runs one case; when it fails, every stream is opened afresh and one marker drains what was still
 * on its way, so that the next case (fast-check's shrinking) starts clean.
 */
async function runCase(body: () => Promise<void>): Promise<void> {
  try {
    await body();
    expectHealthy();
  } catch (error) {
    // Start the next case (fast-check's shrinking) from what the nodes really did, not what the model
    // expected of them: the bus logs only its first drop, and a failure seen once is not carried over.
    for (const node of nodes) node.dropped = node.logger.warns.length > 0;
    for (const hub of hubs()) {
      hub.logger.errors.length = 0;
      hub.logger.warns.length = 0;
      hub.oddPrototypes.length = 0;
    }
    for (const node of nodes) node.logger.errors.length = 0;
    unhandled.clear();
    await openAll();
    await raw.publish(channel, markerBytes);
    await waitFor(
      () =>
        hubs().every((hub) =>
          hub.lives.every((live) =>
            live.client.events.slice(live.from).some((event) => event.data === frameData(MARKER, live.spec.id)),
          ),
        ),
      'the drain after a failed case',
      5_000,
    ).catch(() => {});
    for (const hub of hubs()) for (const live of hub.lives) live.from = live.client.events.length;
    throw error;
  }
}

// ---------------------------------------------------------------------------------------------------
// Arbitraries: messages as JSON trees (so that keys can repeat or be escaped), then as bytes
// ---------------------------------------------------------------------------------------------------

const str = (value: string): JsonNode => literal(JSON.stringify(value));
const entry = (key: string, value: JsonNode, escaped = false): JsonEntry => ({ key, escaped, value });
const object = (...entries: JsonEntry[]): JsonNode => ({ kind: 'object', entries });
/** A string spelled entirely with `\uXXXX` escapes: the same string to JSON.parse, other bytes on the wire. */
const escapedStr = (value: string): JsonNode => literal(escapedText(value));

/** Characters that trouble framing, escaping and comparison: line ends, NUL, quotes, lone surrogates, a BOM. */
const NASTY = [
  '\n',
  '\r',
  '\r\n',
  '\u2028',
  '\u0000',
  '"',
  '\\',
  '😀',
  '\ud800',
  '\udfff',
  '\ufeff',
  '\ufffd',
  'é',
  ' ',
  'data: ',
  '\n\ndata: {}\n\n',
  '__proto__',
];
const nastyString = (maxLength: number) =>
  fc
    .array(fc.oneof(fc.constantFrom(...NASTY), fc.string({ unit: 'binary', minLength: 1, maxLength: 1 })), {
      maxLength,
    })
    .map((parts) => parts.join(''));
/** JSON values that survive JSON unchanged (no `-0`). */
const stableJson = fc.jsonValue({ maxDepth: 3 }).map((value) => JSON.parse(JSON.stringify(value)) as unknown);

const LIST_KINDS = ['tools_list_changed', 'prompts_list_changed', 'resources_list_changed'] as const;
const OWNERS = ['alice', 'alice', 'bob', 'ALICE', 'carol', '', '\u0000anonymous'];
/** Keys that reach for prototypes, or mean something to JavaScript objects. */
const PROTO_KEYS = ['__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', 'valueOf', 'toJSON', 'then'];
const WIRE_KEYS = [
  'v',
  'node',
  'type',
  'event',
  'kind',
  'uri',
  'task',
  'owner',
  'taskId',
  'status',
  'principal',
  'id',
  'at',
  'trace',
  'traceparent',
  'tracestate',
];

/** A task's state: required fields, optional ones, the host's own extra keys (prototype keys among them). */
const taskTree: fc.Arbitrary<JsonNode> = fc
  .record({
    taskId: fc.oneof(
      { weight: 4, arbitrary: fc.constantFrom(...WATCHED_TASKS) },
      { weight: 1, arbitrary: fc.constantFrom(...OTHER_TASKS) },
      { weight: 1, arbitrary: nastyString(6).filter((id) => id !== '') },
    ),
    status: fc.constantFrom('working', 'input_required', 'completed', 'failed', 'cancelled', 'paused?'),
    statusMessage: fc.option(nastyString(24), { nil: undefined }),
    result: fc.option(stableJson, { nil: undefined }),
    meta: fc.boolean(),
    extra: fc.array(fc.tuple(fc.oneof(nastyString(4), fc.constantFrom(...PROTO_KEYS, '0', '1e3')), stableJson), {
      maxLength: 2,
    }),
    escaped: fc.boolean(),
  })
  .map(({ taskId, status, statusMessage, result, meta, extra, escaped }) =>
    object(
      entry('taskId', str(taskId)),
      entry('status', str(status)),
      ...(statusMessage === undefined ? [] : [entry('statusMessage', str(statusMessage))]),
      entry('createdAt', str('2026-07-28T00:00:00.000Z')),
      entry('lastUpdatedAt', str('2026-07-28T00:00:01.000Z')),
      entry('ttlMs', literal('null')),
      ...(result === undefined ? [] : [entry('result', jsonNode(result))]),
      ...(meta ? [entry('_meta', jsonNode({ 'io.modelcontextprotocol/related-task': { taskId } }))] : []),
      ...extra.map(([key, value]) => entry(key, jsonNode(value), escaped)),
    ),
  );

const eventTree: fc.Arbitrary<JsonNode> = fc.oneof(
  fc.constantFrom(...LIST_KINDS).map((kind) => object(entry('kind', str(kind)))),
  fc
    .oneof({ weight: 3, arbitrary: fc.constantFrom(...WATCHED_URIS) }, fc.constantFrom(...OTHER_URIS))
    .map((uri) => object(entry('kind', str('resource_updated')), entry('uri', str(uri)))),
  {
    weight: 2,
    arbitrary: fc
      .tuple(taskTree, fc.constantFrom(...OWNERS))
      .map(([task, owner]) =>
        object(entry('kind', str('task_status')), entry('task', task), entry('owner', str(owner))),
      ),
  },
);

/** Ids as JSON text: the streams' own (`"listen:1"`, `1`, `"1"`, `0`), and numbers spelled otherwise. */
const ID_TEXTS = [
  '"listen:1"',
  '1',
  '"1"',
  '0',
  '-0',
  '1.0',
  '1e0',
  '"listen:2"',
  '2',
  '""',
  '1e21',
  '1e999',
  '-1e999',
];
/** An id as JSON, and the same value as the other type when it has one (`1`, `"1"`, `1.0`). */
function idSpellings(id: string | number): string[] {
  if (typeof id === 'number') return [JSON.stringify(id), JSON.stringify(String(id)), `${id}.0`];
  return id !== '' && Number.isFinite(Number(id)) ? [JSON.stringify(id), id] : [JSON.stringify(id)];
}

/**
 * A cancellation: half the time of a stream's own principal (or the same name in another case) and
 * its id (or the same value of the other type), else of anyone.
 */
const cancelEntries = fc
  .oneof(
    fc
      .constantFrom(...STREAMS.filter((spec) => spec.principal !== undefined))
      .chain((spec) =>
        fc.tuple(
          fc.constantFrom(spec.principal!, spec.principal!.toUpperCase(), spec.principal!.toLowerCase()),
          fc.constantFrom(...idSpellings(spec.id)),
        ),
      ),
    fc.tuple(fc.constantFrom(...PRINCIPALS.filter((principal) => principal !== '')), fc.constantFrom(...ID_TEXTS)),
  )
  .map(([principal, id]) => [entry('principal', str(principal)), entry('id', literal(id))]);

/** A sender: another node, or one of the two nodes here (each hears the other's id as any other). */
const nodeValue: fc.Arbitrary<JsonNode> = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom('peer-1', 'peer:😀', 'n'.repeat(200), '😀'.repeat(100)).map(str) },
  // The receiver's own id, as its own messages spell it: ignored there as its own.
  { weight: 2, arbitrary: fc.constantFrom(A_ID, B_ID).map(str) },
  // The same id spelled with escapes: a forgery that does not begin as the receiver's messages do.
  { weight: 1, arbitrary: fc.constantFrom(A_ID, B_ID).map(escapedStr) },
);

/**
 * A message as a node writes one (its keys in the writer's order, or rotated), in the format of the
 * channel it goes to: on this release's, an event may carry a context (valid or almost: wire-context.ts).
 */
function messageTreeFor(on: WireChannel): fc.Arbitrary<JsonNode> {
  const eventBody = (context: fc.Arbitrary<JsonEntry[]>) =>
    fc.tuple(eventTree, context).map(([event, members]) => ({
      type: 'event',
      entries: [entry('event', event), ...members],
    }));
  return fc
    .record({
      node: nodeValue,
      body: fc.oneof(
        { weight: 8, arbitrary: eventBody(on === 'legacy' ? fc.constant([]) : contextEntriesArb) },
        { weight: 2, arbitrary: cancelEntries.map((entries) => ({ type: 'cancel', entries })) },
      ),
      rotate: fc.oneof({ weight: 4, arbitrary: fc.constant(0) }, { weight: 1, arbitrary: fc.nat({ max: 6 }) }),
    })
    .map(({ node, body, rotate }) => {
      const version = on === 'legacy' ? '1' : '2';
      const entries = [
        entry('v', literal(version)),
        entry('node', node),
        entry('type', str(body.type)),
        ...body.entries,
      ];
      const at = rotate % entries.length;
      return object(...entries.slice(at), ...entries.slice(0, at));
    });
}

/** Number literals a double cannot hold, or that only look like 1. */
const NUMBER_TEXT = [
  '-0',
  '0',
  '1',
  '1.0',
  '1e0',
  '10e-1',
  '1.0000000000000001',
  '2',
  '-1',
  '1e999',
  '-1e999',
  '1E-400',
  '12345678901234567890123',
  '1e21',
];
const scalarText = fc.oneof(
  fc.constantFrom('null', 'true', 'false', '{}', '[]', '""', ...NUMBER_TEXT),
  fc
    .constantFrom(
      'event',
      'cancel',
      'ping',
      'EVENT',
      ...LIST_KINDS,
      'resource_updated',
      'task_status',
      'everything_changed',
      ...WATCHED_URIS,
      ...BAD_URIS,
      ...WATCHED_TASKS,
      ...PRINCIPALS,
      A_ID,
      B_ID,
      'n'.repeat(201),
      '😀'.repeat(101),
    )
    .map((value) => JSON.stringify(value)),
  stableJson.map((value) => JSON.stringify(value)),
  nastyString(12).map((value) => JSON.stringify(value)),
);
/**
 * Huge strings and arrays, and nests: shallow enough for every node to write (up to 1,000 levels), or
 * deeper than anyone can (20,000 and 30,000). Strings past 16 KiB make a stream's socket push back.
 */
const hugeText = fc.oneof(
  fc.integer({ min: 16_000, max: 64_000 }).map((n) => JSON.stringify('x'.repeat(n))),
  fc.integer({ min: 1_000, max: 10_000 }).map((n) => `[${Array.from({ length: n }, () => '0').join(',')}]`),
  fc.constantFrom(2, 50, 1_000, 20_000, 30_000).map((n) => '['.repeat(n) + ']'.repeat(n)),
  fc.constantFrom(2, 50, 1_000, 20_000, 30_000).map((n) => '{"a":'.repeat(n) + 'null' + '}'.repeat(n)),
);
const POLLUTION = [
  '{"polluted":true}',
  '{"__proto__":{"polluted":true}}',
  '{"constructor":{"prototype":{"polluted":true}}}',
  '{"prototype":{"polluted":true}}',
];
const valueNode: fc.Arbitrary<JsonNode> = fc.oneof(
  { weight: 10, arbitrary: scalarText.map(literal) },
  { weight: 2, arbitrary: fc.constantFrom(...POLLUTION).map(literal) },
  { weight: 2, arbitrary: hugeText.map(literal) },
);
const keyArb = fc.oneof(
  fc.constantFrom(...PROTO_KEYS),
  fc.constantFrom(...WIRE_KEYS, '_meta', 'extra'),
  nastyString(4),
);

const mutationArb: fc.Arbitrary<Mutation> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ op: fc.constant('replace' as const), at: fc.nat(), value: valueNode }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('remove' as const), at: fc.nat() }) },
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant('add' as const),
      at: fc.nat(),
      key: keyArb,
      escaped: fc.boolean(),
      value: valueNode,
    }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('wrap' as const), at: fc.nat(), inArray: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('escape' as const), at: fc.nat() }) },
  {
    weight: 1,
    arbitrary: fc.record({
      op: fc.constant('duplicate' as const),
      at: fc.nat(),
      value: fc.option(valueNode, { nil: undefined }),
    }),
  },
);

type Damage =
  | { readonly kind: 'insert'; readonly at: readonly (readonly [number, readonly number[]])[] }
  | { readonly kind: 'truncate'; readonly at: number }
  | { readonly kind: 'random'; readonly bytes: Uint8Array }
  | { readonly kind: 'bom' | 'utf16' | 'empty' | 'nul' };
const damageArb: fc.Arbitrary<Damage> = fc.oneof(
  fc.record({
    kind: fc.constant('insert' as const),
    at: fc.array(fc.tuple(fc.nat(), fc.constantFrom(...INVALID_UTF8)), { minLength: 1, maxLength: 3 }),
  }),
  fc.record({ kind: fc.constant('truncate' as const), at: fc.nat() }),
  fc.record({ kind: fc.constant('random' as const), bytes: fc.uint8Array({ maxLength: 200 }) }),
  fc.record({ kind: fc.constantFrom('bom' as const, 'utf16' as const, 'empty' as const, 'nul' as const) }),
);

function damaged(valid: Buffer, damage: Damage): Buffer {
  switch (damage.kind) {
    case 'insert': {
      let bytes = valid;
      for (const [at, insert] of damage.at) {
        const cut = at % (bytes.length + 1);
        bytes = Buffer.concat([bytes.subarray(0, cut), Buffer.from(insert), bytes.subarray(cut)]);
      }
      return bytes;
    }
    case 'truncate':
      return valid.subarray(0, damage.at % valid.length);
    case 'random':
      return Buffer.from(damage.bytes);
    case 'bom':
      return Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), valid]);
    case 'utf16':
      return Buffer.from(valid.toString('utf8'), 'utf16le');
    case 'empty':
      return Buffer.alloc(0);
    case 'nul':
      return Buffer.concat([valid, Buffer.from([0])]);
  }
}

/** A prototype key added to the envelope, the event, or a task's state, spelled plainly or with escapes. */
interface ProtoKey {
  readonly where: 'envelope' | 'event' | 'task';
  readonly key: string;
  readonly escaped: boolean;
  readonly value: string;
}
const protoKeyArb: fc.Arbitrary<ProtoKey> = fc.record({
  where: fc.constantFrom('envelope' as const, 'event' as const, 'task' as const),
  key: fc.constantFrom('__proto__', '__proto__', 'constructor', 'prototype'),
  escaped: fc.boolean(),
  value: fc.constantFrom(...POLLUTION, 'null', '[]', '"x"'),
});

function withProtoKey(tree: JsonNode, add: ProtoKey): JsonNode {
  return withKey(tree, add.where, entry(add.key, literal(add.value), add.escaped));
}

/** Adds `added` to the envelope, to the event object, or to the task's state (or the event, if none). */
function withKey(tree: JsonNode, where: 'envelope' | 'event' | 'task', added: JsonEntry): JsonNode {
  const into = (node: JsonNode): JsonNode =>
    node.kind === 'object' ? { kind: 'object', entries: [...node.entries, added] } : node;
  if (where === 'envelope' || tree.kind !== 'object') return into(tree);
  const at = tree.entries.findIndex((e) => e.key === 'event');
  if (at === -1) return into(tree);
  if (where === 'event') return editAt(tree, [at], into);
  const event = tree.entries[at]!.value;
  const task = event.kind === 'object' ? event.entries.findIndex((e) => e.key === 'task') : -1;
  return task === -1 ? editAt(tree, [at], into) : editAt(tree, [at, task], into);
}

/** A nest, shallow enough for every node to write or deeper than any can, put where a valid event keeps it. */
interface Nest {
  readonly where: 'event' | 'task';
  readonly depth: number;
  readonly inArrays: boolean;
}
const nestArb: fc.Arbitrary<Nest> = fc.record({
  where: fc.constantFrom('event' as const, 'task' as const),
  depth: fc.constantFrom(1_000, 20_000, 30_000),
  inArrays: fc.boolean(),
});

function withNest(tree: JsonNode, nest: Nest): JsonNode {
  const text = nest.inArrays
    ? '['.repeat(nest.depth) + ']'.repeat(nest.depth)
    : '{"a":'.repeat(nest.depth) + 'null' + '}'.repeat(nest.depth);
  return withKey(tree, nest.where, entry('deep', literal(text)));
}

/** The event's kind replaced: a list change with a URI or a task, an update without its URI, an unknown kind. */
function withKind(tree: JsonNode, kind: string): JsonNode {
  if (tree.kind !== 'object') return tree;
  const at = tree.entries.findIndex((e) => e.key === 'event');
  const event = tree.entries[at]?.value;
  const kindAt = event?.kind === 'object' ? event.entries.findIndex((e) => e.key === 'kind') : -1;
  return kindAt === -1 ? tree : editAt(tree, [at, kindAt], () => str(kind));
}

/** Values for the envelope's fields that are almost right: loosely equal to 1, an id one too long, a near type. */
const ENVELOPE_VALUES = {
  v: ['1', '1.0', '1e0', '10e-1', '1.0000000000000001', '2', '0', '-1', '"1"', 'true', '[1]', '1e999', 'null'],
  node: ['""', JSON.stringify('n'.repeat(201)), JSON.stringify('😀'.repeat(101)), '7', 'null', '["peer-1"]'],
  type: ['"EVENT"', '"Event"', '"ping"', '""', '"event "', '"cancel"', '"event"', 'null', '["event"]'],
};
const envelopeSwapArb = fc
  .constantFrom(...(['v', 'node', 'type'] as const))
  .chain((key) => fc.tuple(fc.constant(key), fc.constantFrom(...ENVELOPE_VALUES[key])));

/** The envelope's field `key` (all of them, if the key repeats) given the JSON text `value`. */
function withField(tree: JsonNode, key: string, value: string): JsonNode {
  if (tree.kind !== 'object') return tree;
  return {
    kind: 'object',
    entries: tree.entries.map((e) => (e.key === key ? { ...e, value: literal(value) } : e)),
  };
}

/** Whole messages that are no message of ours. */
const GARBAGE = ['null', '[]', '{}', '"event"', '1', 'garbage', '{"v":1}', '[{"v":1}]', 'NaN', '{"v":1,"node":', ' '];

interface Sent {
  /** What kind of message it is, for the figures. */
  readonly cls: string;
  readonly bytes: Buffer;
}

/** A message, shown in a counterexample as its text (at most 600 characters of it) rather than as bytes. */
function sent(cls: string, bytes: Buffer): Sent {
  return {
    cls,
    bytes,
    [fc.toStringMethod]: () => {
      const text = bytes.toString('utf8');
      const shown = text.length > 600 ? `${text.slice(0, 600)}… (${bytes.length} bytes)` : text;
      return `${cls}: ${JSON.stringify(shown)}`;
    },
  } as Sent;
}
const spaceArb = fc.constantFrom('', '', '', ' ', '\n', '\t\r\n');
/** Messages for a channel of `on`: as written, mutated, damaged, garbage, with prototype keys, fields swapped… */
function sentArbFor(on: WireChannel): fc.Arbitrary<Sent> {
  const messageTree = messageTreeFor(on);
  return fc.oneof(
    {
      weight: 3,
      arbitrary: fc
        .tuple(messageTree, spaceArb)
        .map(([tree, space]) => sent('as written', Buffer.from(jsonText(tree, space)))),
    },
    {
      weight: 6,
      arbitrary: fc
        .tuple(messageTree, fc.array(mutationArb, { minLength: 1, maxLength: 3 }), spaceArb)
        .map(([tree, mutations, space]) =>
          sent(
            'mutated',
            Buffer.from(
              jsonText(
                mutations.reduce((doc, mutation) => mutate(doc, mutation, 'even'), tree),
                space,
              ),
            ),
          ),
        ),
    },
    {
      weight: 2,
      arbitrary: fc
        .tuple(messageTree, damageArb)
        .map(([tree, damage]) => sent('damaged bytes', damaged(Buffer.from(jsonText(tree)), damage))),
    },
    {
      weight: 1,
      arbitrary: fc.constantFrom(...GARBAGE).map((text) => sent('garbage', Buffer.from(text))),
    },
    {
      weight: 2,
      arbitrary: fc
        .tuple(messageTree, protoKeyArb, spaceArb)
        .map(([tree, add, space]) => sent('prototype key', Buffer.from(jsonText(withProtoKey(tree, add), space)))),
    },
    {
      weight: 1,
      arbitrary: fc
        .tuple(messageTree, envelopeSwapArb)
        .map(([tree, [key, value]]) =>
          sent('envelope field swapped', Buffer.from(jsonText(withField(tree, key, value)))),
        ),
    },
    {
      weight: 1,
      arbitrary: fc
        .tuple(
          messageTree,
          fc.constantFrom(...LIST_KINDS, 'resource_updated', 'task_status', 'everything_changed', 'TOOLS_LIST_CHANGED'),
        )
        .map(([tree, kind]) => sent('kind swapped', Buffer.from(jsonText(withKind(tree, kind))))),
    },
    {
      weight: 1,
      arbitrary: fc
        .tuple(messageTree, nestArb)
        .map(([tree, nest]) => sent('deep nest', Buffer.from(jsonText(withNest(tree, nest))))),
    },
  );
}

/** Messages for the first release's channel, format 1. */
const sentArb = sentArbFor('legacy');

/** Splits messages into exchanges in which no two accepted events share a key (see {@link exchanges}). */
function inExchanges(messages: readonly Sent[], on: WireChannel = 'legacy'): Sent[][] {
  const byBytes = new Map<Uint8Array, Sent>();
  for (const message of messages) byBytes.set(message.bytes, message);
  return exchanges(
    messages.map((message) => message.bytes),
    on,
  ).map((part) => part.map((bytes) => byBytes.get(bytes)!));
}

/** Events as host code publishes them: list changes, updates, task states parsed from JSON text (any key its own). */
const hostEventArb: fc.Arbitrary<WireEvent> = fc.oneof(
  fc.constantFrom(...LIST_KINDS).map((kind) => ({ kind })),
  fc.constantFrom(...WATCHED_URIS, ...OTHER_URIS).map((uri) => ({ kind: 'resource_updated' as const, uri })),
  {
    weight: 3,
    arbitrary: fc.tuple(taskTree, fc.constantFrom(...OWNERS)).map(([task, owner]) => ({
      kind: 'task_status' as const,
      task: JSON.parse(jsonText(task)) as Record<string, unknown>,
      owner,
    })),
  },
);

/** A `task_status` message of exactly `size` UTF-8 bytes, its state padded with `pad` (then ASCII). */
function sizedMessage(node: string, size: number, pad: string): Buffer {
  const head = `${ownPrefix(node)}"type":"event","event":{"kind":"task_status","owner":"bob","task":{"taskId":"${BIG_TASK}","status":"completed","statusMessage":"`;
  const tail = '"}}}';
  const room = size - Buffer.byteLength(head + tail);
  const width = Buffer.byteLength(pad);
  const text = head + pad.repeat(Math.floor(room / width)) + 'x'.repeat(room % width) + tail;
  expect(Buffer.byteLength(text)).toBe(size);
  return Buffer.from(text);
}

// ---------------------------------------------------------------------------------------------------
// The properties
// ---------------------------------------------------------------------------------------------------

describeUnless(redisMissing)(
  'the Redis wire, two nodes (A: ioredis, hubs on Express 5 and 4; B: node-redis, Express 5)',
  () => {
    beforeAll(async () => {
      unhandled.start();
      await startNodes();
    }, 30_000);
    afterAll(async () => {
      await stopNodes();
      unhandled.stop();
      if (process.env.WIREFUZZ_FIGURES) {
        console.log(
          [...figures.entries()]
            .sort(([a], [b]) => a.localeCompare(b))
            .map(([key, count]) => `${key}: ${count}`)
            .join('\n'),
        );
      }
    });

    test('a task state with a "__proto__" key gives the same frames on every node, whichever node publishes it', async () => {
      await runCase(async () => {
        const alice = (hub: HubNode): Live => hub.lives.find((live) => live.spec.name === 'alice')!;
        for (const from of [hubs()[0]!, hubs()[2]!]) {
          // Host data parsed from JSON text (a stored task, a tool's output): `__proto__` is an own key.
          const task = JSON.parse(
            '{"taskId":"t-1","status":"completed","__proto__":{"polluted":true},"result":{"content":[],"__proto__":{"polluted":true}}}',
          ) as TaskState;
          expect(Object.hasOwn(task, '__proto__')).toBe(true);
          const before = hubs().map((hub) => alice(hub).client.events.length);
          await exchange({ hub: from, events: [{ kind: 'task_status', task, owner: 'alice' }] });
          const frames = hubs().map((hub, i) =>
            alice(hub)
              .client.events.slice(before[i])
              .map((event) => event.data),
          );
          expect(frames[0]).toHaveLength(2);
          expect(frames.slice(1)).toStrictEqual([frames[0], frames[0]]);
          expect(frames[0]![0]).toContain('"__proto__":{"polluted":true}');
        }
      });
    }, 60_000);

    propTest.prop([fc.array(sentArb, { minLength: 1, maxLength: 10 })], { ...BOUNDED, numRuns: 150 })(
      'whatever arrives on the channel: what the contract accepts reaches exactly its streams and listeners, byte for byte; anything else reaches nothing and is counted',
      async (messages) =>
        runCase(async () => {
          for (const part of inExchanges(messages)) {
            await exchange(
              { raw: part.map((message) => message.bytes) },
              part.map((message) => message.cls),
            );
          }
        }),
      60_000,
    );

    propTest.prop([fc.array(sentArbFor('current'), { minLength: 1, maxLength: 10 })], { ...BOUNDED, numRuns: 150 })(
      'whatever arrives on this release’s channels (wire v2, an event’s context among its members): what the contract accepts reaches exactly its streams and every member, with its context; anything else reaches nothing and is counted',
      async (messages) =>
        runCase(async () => {
          for (const part of inExchanges(messages, 'current')) {
            await exchange(
              { raw: part.map((message) => message.bytes), on: 'current' },
              part.map((message) => `v2 ${message.cls}`),
            );
          }
        }),
      60_000,
    );

    propTest.prop(
      [
        fc.array(fc.tuple(hostEventArb, fc.option(callerContextArb, { freq: 4, nil: undefined })), {
          minLength: 1,
          maxLength: 6,
        }),
        fc.nat({ max: 1 }),
      ],
      { ...BOUNDED, numRuns: 40 },
    )(
      'an event a bus member publishes with a context, as any caller may hand one: the other node’s members get what the contract carries of it, and the event always',
      async (events, at) =>
        runCase(async () => {
          const member = nodes[at]!;
          let part: MemberEvent[] = [];
          let keys = new Set<string>();
          for (const published of events) {
            if (keys.has(keyOf(published[0]))) {
              await exchange({ member, events: part });
              part = [];
              keys = new Set();
            }
            keys.add(keyOf(published[0]));
            part.push(published);
          }
          await exchange({ member, events: part });
        }),
      60_000,
    );

    propTest.prop(
      {
        size: fc.integer({ min: WIRE_LIMIT_BYTES - 2, max: WIRE_LIMIT_BYTES + 2 }),
        pad: fc.constantFrom('x', 'é', '😀'),
        from: fc.constantFrom(MARKER_NODE, A_ID),
      },
      {
        ...BOUNDED,
        numRuns: 3,
        examples: [
          { size: WIRE_LIMIT_BYTES, pad: 'é', from: MARKER_NODE },
          { size: WIRE_LIMIT_BYTES + 1, pad: '😀', from: MARKER_NODE },
        ],
      },
    )(
      'messages around the 4 MiB bound: up to it delivered whole, past it dropped (a node never parses its own)',
      async ({ size, pad, from }) =>
        runCase(async () => {
          await exchange({ raw: [sizedMessage(from, size, pad)] }, ['size bound']);
        }),
      60_000,
    );

    propTest.prop([fc.array(hostEventArb, { minLength: 1, maxLength: 6 }), fc.nat({ max: 2 })], {
      ...BOUNDED,
      numRuns: 40,
    })(
      'an event host code publishes on any hub: the same frames on every node, whatever its task state holds',
      async (events, at) =>
        runCase(async () => {
          const hub = hubs()[at]!;
          let part: WireEvent[] = [];
          let keys = new Set<string>();
          for (const event of events) {
            if (keys.has(keyOf(event))) {
              await exchange({ hub, events: part });
              part = [];
              keys = new Set();
            }
            keys.add(keyOf(event));
            part.push(event);
          }
          await exchange({ hub, events: part });
        }),
      60_000,
    );
  },
);
