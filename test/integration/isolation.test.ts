/**
 * Tenant isolation (issue #14), as a model-based property over real HTTP: random principals (named
 * ones that differ only by case, one literally called `anonymous`, and anonymous callers), a small
 * universe of URIs with an owner-based read rule plus random shares and denials, a subscribe hook
 * that refuses some URIs, checks that answer synchronously, asynchronously, by throwing, by rejecting
 * or with a truthy non-`true`, tasks whose ownership moves, request ids that collide across
 * principals, and random sequences of listens, publishes, rule changes, hang-ups and cancellations.
 * On one node (Express), and on two nodes (Express 5 and Express 4, each hub with a `RedisBus` of its
 * own on the local Redis, one ioredis and one node-redis) with streams and publishes on either.
 *
 * For every stream: its acknowledgement is exactly what its principal could read and own at that
 * moment, and equals, byte for byte, the acknowledgement of the same request with the refused items
 * left out; every notification it got is for a URI in its acknowledgement that its principal could
 * read then, for a task its principal owned when the event was published, or for a list it asked;
 * and it got exactly the events the model says (a prefix of them, if it was hung up or cancelled).
 */
import { afterAll, beforeAll, describe, expect } from '@jest/globals';
import { fc, test as propTest } from '@fast-check/jest';
import { randomUUID } from 'node:crypto';
import type { RequestHandler } from 'express';
import { SubscriptionHub, type TaskState } from 'mcp-subscriptions';
import { mcpSubscriptions } from 'mcp-subscriptions/express';
import { RedisBus } from 'mcp-subscriptions/redis';
import { followed } from '../helpers/bus-contract.ts';
import { EVERY_CAPABILITY } from '../helpers/capabilities.ts';
import { authFromUserHeader, expressFlavours, listenOn, type RunningServer } from '../helpers/express-apps.ts';
import { recordingLogger, waitFor } from '../helpers/fake-response.ts';
import { rawPost, type RawAnswer } from '../helpers/raw-http.ts';
import { REDIS_URL, sharedRedisMissing } from '../helpers/redis.ts';
import { describeUnless, failUnderCi } from '../helpers/skip.ts';
import { listenBody, listenHeaders, TASKS_META } from '../helpers/sse.ts';
import { UnhandledTracker } from '../helpers/unhandled.ts';

const SUBSCRIPTION_ID = 'io.modelcontextprotocol/subscriptionId';
/** The owner of a task nobody here owns: no principal name of the pool can contain a slash. */
const NOBODY = 'nobody/at-all';
/**
 * Shrinking replays a failing case over HTTP many times: past this limit fast-check stops and reports
 * the smallest counterexample so far, with its seed, before jest's timeout (60 s) would swallow it.
 */
const BOUNDED = { interruptAfterTimeLimit: 45_000, markInterruptAsFailure: true } as const;

const redisMissing = await sharedRedisMissing();
failUnderCi('Redis for the two-node isolation property', redisMissing);

// ---------------------------------------------------------------------------------------------------
// The world: who may read what, who owns which task, and how the host's checks answer
// ---------------------------------------------------------------------------------------------------

/**
 * How a host check gives its answer. Only an exact `true` admits (README, "Fail closed"): a `truthy`
 * check, which answers `1` for yes, admits nothing.
 */
type Style = 'sync' | 'async' | 'throw' | 'reject' | 'truthy';
const STYLES: readonly Style[] = ['sync', 'sync', 'async', 'async', 'throw', 'reject', 'truthy'];

interface WorldSpec {
  readonly principals: readonly string[];
  /** owner: a principal's index, -1 public (everybody reads it), -2 nobody's. */
  readonly uris: readonly { owner: number; style: Style; watched: boolean; suffix: string }[];
  /** owner: a principal's index, -1 nobody's. */
  readonly tasks: readonly { owner: number; style: Style; suffix: string }[];
  readonly shares: readonly (readonly [number, number])[];
  readonly denials: readonly (readonly [number, number])[];
}

const key = (principal: string, item: string): string => `${principal}\u0000${item}`;

class World {
  readonly principals: readonly string[];
  readonly uris: readonly string[];
  readonly taskIds: readonly string[];
  private readonly owner = new Map<string, string | undefined>();
  private readonly isPublic = new Set<string>();
  private readonly unwatched = new Set<string>();
  private readonly style = new Map<string, Style>();
  readonly shares = new Set<string>();
  readonly denials = new Set<string>();
  private readonly taskOwner = new Map<string, string>();

  constructor(spec: WorldSpec) {
    this.principals = spec.principals;
    const name = (index: number): string => spec.principals[index % spec.principals.length]!;
    this.uris = spec.uris.map((uri, i) => {
      const value =
        uri.owner === -1
          ? `public://board/${i}${uri.suffix}`
          : `note://${uri.owner === -2 ? 'nobody' : name(uri.owner)}/${i}${uri.suffix}`;
      this.owner.set(value, uri.owner < 0 ? undefined : name(uri.owner));
      if (uri.owner === -1) this.isPublic.add(value);
      if (!uri.watched) this.unwatched.add(value);
      this.style.set(`uri:${value}`, uri.style);
      return value;
    });
    this.taskIds = spec.tasks.map((task, i) => {
      const id = `task-${i}${task.suffix}`;
      this.taskOwner.set(id, task.owner < 0 ? NOBODY : name(task.owner));
      this.style.set(`task:${id}`, task.style);
      return id;
    });
    for (const [p, u] of spec.shares) this.shares.add(key(name(p), this.uris[u % this.uris.length]!));
    for (const [p, u] of spec.denials) this.denials.add(key(name(p), this.uris[u % this.uris.length]!));
  }

  /** The read rule (the sample's: owners read their notes; plus shares, public URIs and denials). */
  readable(principal: string, uri: string): boolean {
    if (this.denials.has(key(principal, uri))) return false;
    return this.isPublic.has(uri) || this.owner.get(uri) === principal || this.shares.has(key(principal, uri));
  }

  watched(uri: string): boolean {
    return !this.unwatched.has(uri);
  }

  ownerOf(taskId: string): string {
    return this.taskOwner.get(taskId) ?? NOBODY;
  }

  transfer(taskId: string, to: string): void {
    this.taskOwner.set(taskId, to);
  }

  /** Whether `principal` (undefined: an anonymous caller) may read `uri`. */
  readableBy(principal: string | undefined, uri: string): boolean {
    return principal === undefined ? this.isPublic.has(uri) : this.readable(principal, uri);
  }

  /** Whether a listen by `principal` is honoured `uri`: readable, watched, and said so with an exact `true`. */
  honoursUri(principal: string | undefined, uri: string): boolean {
    return this.readableBy(principal, uri) && this.watched(uri) && this.styleOf(`uri:${uri}`) !== 'truthy';
  }

  honoursTask(principal: string | undefined, taskId: string): boolean {
    return principal !== undefined && this.ownerOf(taskId) === principal && this.styleOf(`task:${taskId}`) !== 'truthy';
  }

  styleOf(item: string): Style {
    return this.style.get(item) ?? 'sync';
  }
}

/** The host's answer in the item's style. */
function answer(style: Style, allowed: boolean): boolean | Promise<boolean> {
  switch (style) {
    case 'sync':
      return allowed;
    case 'async':
      return new Promise((resolve) => setImmediate(() => resolve(allowed)));
    case 'throw':
      if (!allowed) throw new Error('not yours');
      return true;
    case 'reject':
      return allowed ? Promise.resolve(true) : Promise.reject(new Error('not yours'));
    case 'truthy':
      return (allowed ? 1 : 0) as unknown as boolean;
  }
}

const unhandled = new UnhandledTracker();
beforeAll(() => unhandled.start());
afterAll(() => unhandled.stop());

/** The world the apps' checks consult: the current run's. */
let world: World | undefined;
const current = (): World => {
  if (world === undefined) throw new Error('no world');
  return world;
};

// ---------------------------------------------------------------------------------------------------
// The nodes
// ---------------------------------------------------------------------------------------------------

interface Node {
  readonly hub: SubscriptionHub;
  readonly server: RunningServer;
  readonly logger: ReturnType<typeof recordingLogger>;
  /**
   * Barrier markers this node's bus received from the other node. With interest routing a node hears
   * only what its streams follow, so "the other node received something" is no barrier: a marker
   * published after the event or cancellation, on the same connection, arrives after it.
   */
  readonly markers: () => number;
  /** Publishes a barrier marker to the other node. */
  readonly mark: () => void;
}

/** The barrier's URI: followed by a member of each node's bus, never by a stream. */
const BARRIER_URI = 'barrier://isolation';

async function startNode(flavour: (typeof expressFlavours)[number], bus?: RedisBus): Promise<Node> {
  const logger = recordingLogger();
  const hub = new SubscriptionHub({ logger, ...(bus ? { bus } : {}) });
  const app = flavour.express();
  const passOn: RequestHandler = (_req, res) => void res.status(299).json({ passedOn: true });
  app.post(
    '/mcp',
    authFromUserHeader,
    mcpSubscriptions({
      hub,
      capabilities: EVERY_CAPABILITY,
      // The host's own read check: it knows nothing of anonymous identities, so an anonymous caller
      // reads what is public and nothing else.
      canRead: (uri, { principal }) => answer(current().styleOf(`uri:${uri}`), current().readable(principal, uri)),
      handleSubscribeResource: (uri) => current().watched(uri),
      canAccessTask: (taskId, { principal }) =>
        answer(current().styleOf(`task:${taskId}`), current().ownerOf(taskId) === principal),
      keepAliveMs: false,
    }),
    passOn,
  );
  let markers = 0;
  const barrier = bus?.join({
    event: (event) => {
      if (event.kind === 'resource_updated' && event.uri === BARRIER_URI) markers++;
    },
    cancel: () => {},
  });
  if (barrier !== undefined) await followed(barrier, { lists: [], uris: [BARRIER_URI], taskIds: [] });
  return {
    hub,
    logger,
    server: await listenOn(app),
    markers: () => markers,
    mark: () => barrier?.publish({ kind: 'resource_updated', uri: BARRIER_URI }),
  };
}

// ---------------------------------------------------------------------------------------------------
// Operations and the model
// ---------------------------------------------------------------------------------------------------

type Id = string | number;

type Op =
  | {
      readonly op: 'open';
      readonly node: number;
      /** A principal's index, or -1 for an anonymous caller. */
      readonly who: number;
      readonly id: Id;
      readonly flags: { readonly tools: boolean; readonly prompts: boolean; readonly resources: boolean };
      /** URI indices; -1 names a URI outside the universe. */
      readonly uris: readonly number[];
      /** Task indices; -1 names a task that does not exist. */
      readonly tasks: readonly number[];
      /** Where the same request without its refused items goes. */
      readonly reducedNode: number;
    }
  | { readonly op: 'resource'; readonly node: number; readonly uri: number }
  | { readonly op: 'task'; readonly node: number; readonly task: number }
  | { readonly op: 'list'; readonly node: number; readonly kind: 0 | 1 | 2 }
  | { readonly op: 'transfer'; readonly task: number; readonly to: number }
  | {
      readonly op: 'rule';
      readonly change: 'share' | 'unshare' | 'deny' | 'allow';
      readonly who: number;
      readonly uri: number;
    }
  | { readonly op: 'hangup'; readonly stream: number }
  | { readonly op: 'cancel'; readonly node: number; readonly who: number; readonly stream: number };

const LISTS = [
  ['toolsListChanged', 'tools_list_changed', 'notifications/tools/list_changed'],
  ['promptsListChanged', 'prompts_list_changed', 'notifications/prompts/list_changed'],
  ['resourcesListChanged', 'resources_list_changed', 'notifications/resources/list_changed'],
] as const;

interface Stream {
  readonly node: number;
  /** The principal's name; undefined for an anonymous caller. */
  readonly principal: string | undefined;
  readonly id: Id;
  readonly client: RawAnswer;
  readonly ack: {
    toolsListChanged?: true;
    promptsListChanged?: true;
    resourcesListChanged?: true;
    resourceSubscriptions?: string[];
    taskIds?: string[];
  };
  /** URIs of the universe its principal could read when it was acknowledged. */
  readonly readableAtAck: ReadonlySet<string>;
  /** What the model says it receives, as `uri:…`, `task:<seq>`, `list:<method>`. */
  readonly expected: string[];
  end: 'open' | 'complete' | 'hangup' | 'cancelled';
}

const sameId = (a: Id, b: Id): boolean => typeof a === typeof b && a === b;

/** One run: a world, the nodes, and the streams so far. */
class Run {
  readonly streams: Stream[] = [];
  /** Task publishes by sequence number: which task, owned by whom at publish time. */
  readonly published = new Map<number, { taskId: string; owner: string }>();
  private seq = 0;

  constructor(
    readonly world: World,
    readonly nodes: readonly Node[],
  ) {}

  private nodeOf(index: number): Node {
    return this.nodes[index % this.nodes.length]!;
  }

  private who(index: number): string | undefined {
    return index < 0 ? undefined : this.world.principals[index % this.world.principals.length];
  }

  private uri(index: number): string {
    return index < 0 ? 'note://ghost/unknown' : this.world.uris[index % this.world.uris.length]!;
  }

  private taskId(index: number): string {
    return index < 0 ? 'task-unknown' : this.world.taskIds[index % this.world.taskIds.length]!;
  }

  async apply(op: Op): Promise<void> {
    switch (op.op) {
      case 'open':
        return this.open(op);
      case 'resource': {
        const uri = this.uri(op.uri);
        await this.publish(
          op.node,
          () => this.nodeOf(op.node).hub.resourceUpdated(uri),
          (s) => (s.ack.resourceSubscriptions?.includes(uri) ? `uri:${uri}` : undefined),
        );
        return;
      }
      case 'task': {
        const taskId = this.taskId(op.task);
        const owner = this.world.ownerOf(taskId);
        const seq = ++this.seq;
        this.published.set(seq, { taskId, owner });
        const task: TaskState = {
          taskId,
          status: 'working',
          statusMessage: `seq ${seq}`,
          createdAt: '2026-07-28T00:00:00.000Z',
          lastUpdatedAt: '2026-07-28T00:00:00.000Z',
          ttlMs: null,
        };
        await this.publish(
          op.node,
          () => this.nodeOf(op.node).hub.taskStatus(task, owner),
          (s) => (s.ack.taskIds?.includes(taskId) && s.principal === owner ? `task:${seq}` : undefined),
        );
        return;
      }
      case 'list': {
        const [flag, kind, method] = LISTS[op.kind];
        await this.publish(
          op.node,
          () => this.nodeOf(op.node).hub.publish({ kind }),
          (s) => (s.ack[flag] ? `list:${method}` : undefined),
        );
        return;
      }
      case 'transfer':
        this.world.transfer(this.taskId(op.task), this.who(op.to) ?? NOBODY);
        return;
      case 'rule': {
        const principal = this.who(op.who)!;
        const item = key(principal, this.uri(op.uri));
        if (op.change === 'share') this.world.shares.add(item);
        if (op.change === 'unshare') this.world.shares.delete(item);
        if (op.change === 'deny') this.world.denials.add(item);
        if (op.change === 'allow') this.world.denials.delete(item);
        return;
      }
      case 'hangup': {
        const stream = this.streams[op.stream % Math.max(1, this.streams.length)];
        if (stream?.end !== 'open') return;
        stream.client.close();
        stream.end = 'hangup';
        await this.settled();
        return;
      }
      case 'cancel':
        return this.cancel(op);
    }
  }

  /** Publishes on a node, adds what each open stream should get, and waits until the other node has it too. */
  private async publish(
    node: number,
    send: () => unknown,
    wants: (stream: Stream) => string | undefined,
  ): Promise<void> {
    const others = this.nodes.filter((_, i) => i !== node % this.nodes.length);
    const before = others.map((other) => other.markers());
    send();
    this.nodes[node % this.nodes.length]!.mark();
    for (const stream of this.streams) {
      if (stream.end !== 'open') continue;
      const wanted = wants(stream);
      if (wanted !== undefined) stream.expected.push(wanted);
    }
    await waitFor(
      () => others.every((other, i) => other.markers() > before[i]!),
      'the event on the other node',
      10_000,
    );
  }

  private async open(op: Extract<Op, { op: 'open' }>): Promise<void> {
    const node = this.nodeOf(op.node);
    const principal = this.who(op.who);
    const uris = op.uris.map((i) => this.uri(i));
    const taskIds = op.tasks.map((i) => this.taskId(i));
    const flags = {
      ...(op.flags.tools ? { toolsListChanged: true as const } : {}),
      ...(op.flags.prompts ? { promptsListChanged: true as const } : {}),
      ...(op.flags.resources ? { resourcesListChanged: true as const } : {}),
    };
    const request = (uriList: string[], taskList: string[]) => ({
      ...flags,
      ...(uriList.length > 0 ? { resourceSubscriptions: uriList } : {}),
      ...(taskList.length > 0 ? { taskIds: taskList } : {}),
    });

    // What the ack must hold, decided before the request (the checks run against this very world).
    const expected: Stream['ack'] = { ...flags };
    const honouredUris = [...new Set(uris.filter((uri) => this.world.honoursUri(principal, uri)))];
    const honouredTasks = [...new Set(taskIds.filter((taskId) => this.world.honoursTask(principal, taskId)))];
    if (honouredUris.length > 0) expected.resourceSubscriptions = honouredUris;
    if (honouredTasks.length > 0) expected.taskIds = honouredTasks;
    const readableAtAck = new Set(this.world.uris.filter((uri) => this.world.readableBy(principal, uri)));

    const first = await this.listen(node, principal, op.id, request(uris, taskIds));
    expect({ principal, requested: request(uris, taskIds), ack: first.ack }).toStrictEqual({
      principal,
      requested: request(uris, taskIds),
      ack: expected,
    });
    this.add(op.node, principal, op.id, first, readableAtAck);

    // The same request without the items the ack left out (by the ack itself, not the model): the
    // acknowledgement must be the same bytes, on either node.
    const keptUris = uris.filter((uri) => first.ack.resourceSubscriptions?.includes(uri));
    const keptTasks = taskIds.filter((taskId) => first.ack.taskIds?.includes(taskId));
    if (keptUris.length < uris.length || keptTasks.length < taskIds.length) {
      const reduced = await this.listen(this.nodeOf(op.reducedNode), principal, op.id, request(keptUris, keptTasks));
      expect({ refusedLeftOut: reduced.data }).toStrictEqual({ refusedLeftOut: first.data });
      this.add(op.reducedNode, principal, op.id, reduced, readableAtAck);
    }
    await this.settled();
  }

  private async listen(node: Node, principal: string | undefined, id: Id, notifications: Record<string, unknown>) {
    const client = await rawPost(node.server.url, {
      headers: Object.entries(listenHeaders(principal === undefined ? {} : { 'x-user': principal })),
      body: Buffer.from(JSON.stringify(listenBody(id, notifications, TASKS_META))),
      framing: 'content-length',
    });
    expect(client.status).toBe(200);
    const event = await client.event(1);
    expect(event.json.method).toBe('notifications/subscriptions/acknowledged');
    expect(event.json.params._meta).toStrictEqual({ [SUBSCRIPTION_ID]: id });
    return { client, data: event.data, ack: event.json.params.notifications as Stream['ack'] };
  }

  private add(
    node: number,
    principal: string | undefined,
    id: Id,
    opened: Awaited<ReturnType<Run['listen']>>,
    readableAtAck: ReadonlySet<string>,
  ): void {
    const empty = Object.keys(opened.ack).length === 0;
    this.streams.push({
      node: node % this.nodes.length,
      principal,
      id,
      client: opened.client,
      ack: opened.ack,
      readableAtAck,
      expected: [],
      // Nothing honoured: acknowledged and completed at once (spec §4).
      end: empty ? 'complete' : 'open',
    });
  }

  private async cancel(op: Extract<Op, { op: 'cancel' }>): Promise<void> {
    const target = this.streams[op.stream % Math.max(1, this.streams.length)];
    if (target === undefined) return;
    const at = op.node % this.nodes.length;
    const principal = this.who(op.who);
    const matches = (stream: Stream): boolean =>
      stream.end === 'open' &&
      principal !== undefined &&
      stream.principal === principal &&
      sameId(stream.id, target.id);
    // The node that receives it closes its own matching streams; only when it holds none does the
    // cancellation travel to the other node (README, "Several nodes"). An anonymous caller cancels nothing.
    const local = this.streams.filter((stream) => stream.node === at && matches(stream));
    const closing = local.length > 0 ? local : this.streams.filter(matches);
    const forwarded = principal !== undefined && local.length === 0 && this.nodes.length > 1;
    const others = this.nodes.filter((_, i) => i !== at);
    const before = others.map((other) => other.markers());
    const response = await rawPost(this.nodes[at]!.server.url, {
      headers: [
        ['Content-Type', 'application/json'],
        ...(principal === undefined ? [] : [['X-User', principal] as [string, string]]),
      ],
      body: Buffer.from(
        JSON.stringify({
          jsonrpc: '2.0',
          method: 'notifications/cancelled',
          params: { requestId: target.id, reason: 'fuzz' },
        }),
      ),
      framing: 'content-length',
    });
    await response.end();
    expect({ cancelledBy: principal, of: target.principal, status: response.status }).toStrictEqual({
      cancelledBy: principal,
      of: target.principal,
      status: local.length > 0 ? 202 : 299,
    });
    for (const stream of closing) stream.end = 'cancelled';
    if (forwarded) {
      this.nodes[at]!.mark();
      await waitFor(
        () => others.every((other, i) => other.markers() > before[i]!),
        'the cancellation on the other node',
        10_000,
      );
    }
    await this.settled();
  }

  /** Each node's hub holds exactly the streams the model says are open. */
  async settled(): Promise<void> {
    const open = (i: number) => this.streams.filter((s) => s.node === i && s.end === 'open').length;
    await waitFor(
      () => this.nodes.every((node, i) => node.hub.stats().openStreams === open(i)),
      'the open streams of every hub to match the model',
    );
  }

  /** Ends every stream gracefully, then checks each against the model. */
  async finish(): Promise<void> {
    await Promise.all(this.nodes.map((node) => node.hub.complete()));
    for (const stream of this.streams) if (stream.end === 'open') stream.end = 'complete';
    for (const stream of this.streams) {
      if (stream.end === 'complete') await stream.client.end();
      else stream.client.close();
    }
    for (const node of this.nodes) expect(node.hub.stats()).toMatchObject({ openStreams: 0, pendingStreams: 0 });
    for (const stream of this.streams) this.check(stream);
    for (const node of this.nodes) expect(node.logger.errors).toStrictEqual([]);
    expect(unhandled.rejections).toStrictEqual([]);
  }

  private check(stream: Stream): void {
    const id = stream.id;
    const events = stream.client.events.map((event) => event.json);
    let notifications = events.slice(1);
    const result = { jsonrpc: '2.0', id, result: { resultType: 'complete', _meta: { [SUBSCRIPTION_ID]: id } } };
    if (stream.end === 'complete') {
      expect(notifications.at(-1)).toStrictEqual(result);
      notifications = notifications.slice(0, -1);
    }
    const got = notifications.map((message: any): string => {
      // Isolation first, with the reason in the failure: what reached this stream may reach it.
      const who = { principal: stream.principal ?? '(anonymous)', message };
      expect(who).toMatchObject({ message: { jsonrpc: '2.0', params: { _meta: { [SUBSCRIPTION_ID]: id } } } });
      switch (message.method) {
        case 'notifications/resources/updated': {
          const uri = message.params.uri as string;
          expect({
            ...who,
            inAck: stream.ack.resourceSubscriptions?.includes(uri) ?? false,
            readableAtAck: stream.readableAtAck.has(uri),
          }).toStrictEqual({
            ...who,
            inAck: true,
            readableAtAck: true,
          });
          return `uri:${uri}`;
        }
        case 'notifications/tasks': {
          const seq = Number(/^seq (\d+)$/.exec(message.params.statusMessage as string)?.[1]);
          const publish = this.published.get(seq);
          expect({
            ...who,
            inAck: stream.ack.taskIds?.includes(message.params.taskId) ?? false,
            ownerAtPublish: publish?.owner,
          }).toStrictEqual({
            ...who,
            inAck: true,
            ownerAtPublish: stream.principal,
          });
          return `task:${seq}`;
        }
        default: {
          const list = LISTS.find(([, , method]) => method === message.method);
          expect({ ...who, asked: list !== undefined && stream.ack[list[0]] === true }).toStrictEqual({
            ...who,
            asked: true,
          });
          return `list:${String(message.method)}`;
        }
      }
    });
    // Then exactness: all of it, in order (a prefix of it for a stream that was hung up or cancelled).
    if (stream.end === 'complete') expect(got).toStrictEqual(stream.expected);
    else expect(got).toStrictEqual(stream.expected.slice(0, got.length));
  }
}

// ---------------------------------------------------------------------------------------------------
// Arbitraries
// ---------------------------------------------------------------------------------------------------

const principalName = fc.oneof(
  fc.constantFrom('alice', 'Alice', 'ALICE', 'bob', 'anonymous', 'root', '0', 'alice.smith'),
  fc.stringMatching(/^[A-Za-z0-9._-]{1,8}$/),
);
const styleArb = fc.constantFrom(...STYLES);
const worldArb: fc.Arbitrary<WorldSpec> = fc.record({
  principals: fc.uniqueArray(principalName, { minLength: 2, maxLength: 4 }),
  uris: fc.array(
    fc.record({
      owner: fc.integer({ min: -2, max: 3 }),
      style: styleArb,
      watched: fc.constantFrom(true, true, true, false),
      suffix: fc.constantFrom('', '?v=1', '#top', '%2F..', '/é', '/😀'),
    }),
    { minLength: 2, maxLength: 7 },
  ),
  tasks: fc.array(
    fc.record({
      owner: fc.integer({ min: -1, max: 3 }),
      style: styleArb,
      suffix: fc.constantFrom('', ':x', ' ', '\n'),
    }),
    {
      minLength: 1,
      maxLength: 4,
    },
  ),
  shares: fc.array(fc.tuple(fc.nat(), fc.nat()), { maxLength: 4 }),
  denials: fc.array(fc.tuple(fc.nat(), fc.nat()), { maxLength: 3 }),
});

/** Ids that collide across principals and streams: the id alone must never route an event or a cancel. */
const idArb: fc.Arbitrary<Id> = fc.oneof(
  fc.constantFrom<Id>('listen:1', 'listen:2', 0, 1, ''),
  fc.string({ maxLength: 3 }),
  fc.integer({ min: -2, max: 2 }),
);
const nodeArb = fc.nat({ max: 1 });
const whoArb = fc.integer({ min: -1, max: 5 });

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      op: fc.constant('open' as const),
      node: nodeArb,
      who: whoArb,
      id: idArb,
      flags: fc.record({ tools: fc.boolean(), prompts: fc.boolean(), resources: fc.boolean() }),
      uris: fc.array(fc.integer({ min: -1, max: 12 }), { maxLength: 6 }),
      tasks: fc.array(fc.integer({ min: -1, max: 6 }), { maxLength: 4 }),
      reducedNode: nodeArb,
    }),
  },
  { weight: 5, arbitrary: fc.record({ op: fc.constant('resource' as const), node: nodeArb, uri: fc.nat() }) },
  { weight: 4, arbitrary: fc.record({ op: fc.constant('task' as const), node: nodeArb, task: fc.nat() }) },
  {
    weight: 1,
    arbitrary: fc.record({
      op: fc.constant('list' as const),
      node: nodeArb,
      kind: fc.constantFrom(0 as const, 1 as const, 2 as const),
    }),
  },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('transfer' as const), task: fc.nat(), to: whoArb }) },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant('rule' as const),
      change: fc.constantFrom('share' as const, 'unshare' as const, 'deny' as const, 'allow' as const),
      who: fc.nat(),
      uri: fc.nat(),
    }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('hangup' as const), stream: fc.nat() }) },
  {
    weight: 2,
    arbitrary: fc.record({ op: fc.constant('cancel' as const), node: nodeArb, who: whoArb, stream: fc.nat() }),
  },
);

async function run(nodes: readonly Node[], spec: WorldSpec, ops: readonly Op[]): Promise<void> {
  world = new World(spec);
  const state = new Run(world, nodes);
  try {
    for (const op of ops) await state.apply(op);
  } catch (error) {
    // Every stream of a failed run ends before the next run (fast-check's shrinking) starts.
    await Promise.all(nodes.map((node) => node.hub.complete()));
    for (const stream of state.streams) stream.client.close();
    throw error;
  }
  await state.finish();
}

// ---------------------------------------------------------------------------------------------------
// The properties
// ---------------------------------------------------------------------------------------------------

describe('tenant isolation, one node (Express 5)', () => {
  let node: Node;
  beforeAll(async () => {
    node = await startNode(expressFlavours[0]!);
  });
  afterAll(async () => {
    await node.hub.close();
    await node.server.close();
  });

  propTest.prop([worldArb, fc.array(opArb, { minLength: 4, maxLength: 40, size: 'large' })], {
    ...BOUNDED,
    numRuns: 150,
  })(
    'no stream gets what its principal may not read or does not own, and a refused item looks like one never asked for',
    async (spec, ops) => run([node], spec, ops),
    60_000,
  );
});

describeUnless(redisMissing)(
  'tenant isolation, two nodes through Redis (Express 5 + ioredis, Express 4 + node-redis)',
  () => {
    const nodes: Node[] = [];
    const buses: RedisBus[] = [];
    beforeAll(async () => {
      const channelPrefix = `mcp-subscriptions-isolation:${process.pid}:${randomUUID().slice(0, 8)}`;
      const logger = recordingLogger();
      buses.push(
        new RedisBus({ url: REDIS_URL, client: 'ioredis', channelPrefix, logger }),
        new RedisBus({ url: REDIS_URL, client: 'redis', channelPrefix, logger }),
      );
      await waitFor(() => buses.every((bus) => bus.stats().connected), 'both buses connected', 10_000);
      nodes.push(await startNode(expressFlavours[0]!, buses[0]), await startNode(expressFlavours[1]!, buses[1]));
    });
    afterAll(async () => {
      for (const node of nodes) {
        await node.hub.close();
        await node.server.close();
      }
      for (const bus of buses) await bus.close();
    });

    propTest.prop([worldArb, fc.array(opArb, { minLength: 4, maxLength: 40, size: 'large' })], {
      ...BOUNDED,
      numRuns: 75,
    })(
      'the same on two nodes: streams and publishes on either, cancellations received by either',
      async (spec, ops) => run(nodes, spec, ops),
      60_000,
    );
  },
);
