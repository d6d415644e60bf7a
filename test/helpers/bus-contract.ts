/**
 * The contract every `SubscriptionBus` keeps, as one suite: `describeBusContract(name, makeBus)`.
 * MemoryBus runs it; RedisBus (adapters/redis) runs the very same suite against a real Redis, and
 * PostgresBus (adapters/postgres) against a real PostgreSQL (test/integration/postgres-bus.test.ts).
 * Delivery may be asynchronous (a network bus), so every expectation waits for a condition, and every
 * "nothing arrives" waits for a later marker to arrive first (one tick proves nothing on a network).
 */
import { afterAll, describe, expect, test } from '@jest/globals';
import {
  SubscriptionHub,
  type BusInterest,
  type BusMember,
  type EventContext,
  type InterestLease,
  type RequestId,
  type SubscriptionBus,
  type SubscriptionEvent,
} from '../../lib/index.ts';
import { hubEngine } from '../../lib/internal.ts';
import { FakeResponse, openFollowing, recordingLogger, waitFor } from './fake-response.ts';

/** A bus under test, and how to dispose of it. */
export interface BusUnderTest {
  readonly bus: SubscriptionBus;
  close(): Promise<void> | void;
}

const EVENTS: readonly SubscriptionEvent[] = [
  { kind: 'tools_list_changed' },
  { kind: 'prompts_list_changed' },
  { kind: 'resources_list_changed' },
  { kind: 'resource_updated', uri: 'note://alice/todo?x=1#y' },
  {
    kind: 'task_status',
    owner: 'alice',
    task: {
      taskId: 't-1',
      status: 'completed',
      statusMessage: 'line one\nline "two"',
      createdAt: '2026-11-30T00:00:00.000Z',
      lastUpdatedAt: '2026-11-30T00:00:01.000Z',
      ttlMs: 60_000,
      result: { content: [{ type: 'text', text: 'ünïcødé ✓' }] },
    },
  },
];

/** A member that records what reaches it: events (with the context each came with) and cancellations. */
interface Recorder {
  readonly member: BusMember;
  readonly seen: SubscriptionEvent[];
  /** The context each event of `seen` came with, at the same index. */
  readonly contexts: (EventContext | undefined)[];
  readonly cancels: [string, RequestId][];
}

/**
 * Everything the contract's events and cancellations touch. A bus that routes by interest carries to a
 * member what it follows: each recorder follows all of it, as a hub does for its streams' keys.
 */
const FOLLOWS_ALL: readonly BusInterest[] = [
  {
    principal: 'alice',
    lists: ['tools_list_changed', 'prompts_list_changed', 'resources_list_changed'],
    uris: ['note://alice/todo?x=1#y', 'note://x', 'marker://done'],
    taskIds: ['t-1'],
  },
  { principal: 'bob', lists: [], uris: [], taskIds: [] },
];

async function recorder(bus: SubscriptionBus): Promise<Recorder> {
  const seen: SubscriptionEvent[] = [];
  const contexts: (EventContext | undefined)[] = [];
  const cancels: [string, RequestId][] = [];
  const member = bus.join({
    event: (event, context) => {
      seen.push(event);
      contexts.push(context);
    },
    cancel: (principal, id) => cancels.push([principal, id]),
  });
  for (const interest of FOLLOWS_ALL) await followed(member, interest);
  return { member, seen, contexts, cancels };
}

/**
 * Follows `interest` on `member` as a hub does, and waits until the bus says it is in place: a lease's
 * `ready`, or the promise of a bus of the older form. Resolves with the lease (or nothing).
 */
export async function followed(member: BusMember, interest: BusInterest): Promise<InterestLease | undefined> {
  const taken = member.follow?.(interest);
  if (taken instanceof Promise) {
    await taken;
    return undefined;
  }
  await taken?.ready;
  return taken ?? undefined;
}

/** The URI of the marker event: "nothing else arrives" is proven by the marker, sent last, arriving first. */
export const MARKER_URI = 'marker://done';
/** The event a test publishes after the ones it checks, and waits for. */
export const MARKER: SubscriptionEvent = { kind: 'resource_updated', uri: MARKER_URI };
/** Whether `event` is the {@link MARKER}. */
export const isMarker = (event: SubscriptionEvent): boolean =>
  event.kind === 'resource_updated' && event.uri === MARKER_URI;

/** Runs the bus contract against buses made by `makeBus` (a fresh bus per test). */
export function describeBusContract(name: string, makeBus: () => Promise<BusUnderTest> | BusUnderTest): void {
  describe(`bus contract: ${name}`, () => {
    const open: BusUnderTest[] = [];
    const fresh = async (): Promise<SubscriptionBus> => {
      const made = await makeBus();
      open.push(made);
      return made.bus;
    };
    afterAll(async () => {
      for (const made of open) await made.close();
    });

    test('a member publishes to every other member, never to itself, every event kind intact and in order', async () => {
      const bus = await fresh();
      const a = await recorder(bus);
      const b = await recorder(bus);
      const c = await recorder(bus);
      for (const event of EVENTS) a.member.publish(event);
      await waitFor(() => b.seen.length === EVENTS.length && c.seen.length === EVENTS.length, 'delivery to b and c');
      expect(b.seen).toStrictEqual(EVENTS);
      expect(c.seen).toStrictEqual(EVENTS);
      // A marker from another member, published after: once it reached a, nothing of a's is still coming.
      b.member.publish(MARKER);
      await waitFor(() => a.seen.some(isMarker), 'the marker at a');
      expect(a.seen).toStrictEqual([MARKER]);
      for (const m of [a, b, c]) await m.member.leave();
    });

    test("an event's context (publish time, W3C trace context) reaches every other member intact; an event without one arrives with none", async () => {
      const bus = await fresh();
      const a = await recorder(bus);
      const b = await recorder(bus);
      const c = await recorder(bus);
      const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
      const sent: [SubscriptionEvent, EventContext | undefined][] = [
        [
          EVENTS[3]!,
          { publishedAt: 1764650000123.5, traceparent, tracestate: 'rojo=00f067aa0ba902b7,congo=t61rcWkgMzE' },
        ],
        [EVENTS[0]!, undefined],
        [EVENTS[4]!, { publishedAt: 1764650000124 }],
        [EVENTS[1]!, { traceparent }],
        [EVENTS[2]!, { publishedAt: 0, traceparent, tracestate: `a="q",b=${'x'.repeat(500)}` }],
        [MARKER, undefined],
      ];
      for (const [event, context] of sent) {
        if (context === undefined) a.member.publish(event);
        else a.member.publish(event, context);
      }
      await waitFor(() => b.seen.some(isMarker) && c.seen.some(isMarker), 'the marker at b and c');
      for (const m of [b, c]) {
        expect(m.seen).toStrictEqual(sent.map(([event]) => event));
        expect(m.contexts).toStrictEqual(sent.map(([, context]) => context));
      }
      for (const m of [a, b, c]) await m.member.leave();
    });

    test('a cancellation reaches every other member, never the one that sent it', async () => {
      const bus = await fresh();
      const a = await recorder(bus);
      const b = await recorder(bus);
      a.member.cancel('alice', 'listen:1');
      a.member.cancel('bob', 7);
      await waitFor(() => b.cancels.length === 2, 'both cancellations at b');
      expect(b.cancels).toStrictEqual([
        ['alice', 'listen:1'],
        ['bob', 7],
      ]);
      b.member.publish(MARKER);
      await waitFor(() => a.seen.some(isMarker), 'the marker at a');
      expect(a.cancels).toStrictEqual([]);
      for (const m of [a, b]) await m.member.leave();
    });

    test('a member that left hears nothing more; leave() is idempotent', async () => {
      const bus = await fresh();
      const a = await recorder(bus);
      const b = await recorder(bus);
      const c = await recorder(bus);
      await b.member.leave();
      await b.member.leave();
      a.member.publish({ kind: 'resource_updated', uri: 'note://x' });
      a.member.cancel('alice', 1);
      a.member.publish(MARKER);
      await waitFor(() => c.seen.some(isMarker), 'the marker at c');
      expect(c.seen).toStrictEqual([{ kind: 'resource_updated', uri: 'note://x' }, MARKER]);
      expect(c.cancels).toStrictEqual([['alice', 1]]);
      expect(b.seen).toStrictEqual([]);
      expect(b.cancels).toStrictEqual([]);
      for (const m of [a, c]) await m.member.leave();
    });

    test('one hub joining twice is two members', async () => {
      const bus = await fresh();
      const first = await recorder(bus);
      const second = await recorder(bus);
      first.member.publish({ kind: 'prompts_list_changed' });
      await waitFor(() => second.seen.length === 1, 'delivery to the second membership');
      second.member.publish(MARKER);
      await waitFor(() => first.seen.some(isMarker), 'the marker at the first membership');
      expect(first.seen).toStrictEqual([MARKER]);
      expect(second.seen).toStrictEqual([{ kind: 'prompts_list_changed' }]);
      await first.member.leave();
      await second.member.leave();
    });

    test('hubs on the bus: an event published on one reaches the streams of the others, once each', async () => {
      const bus = await fresh();
      const hubs = [1, 2, 3].map(() => new SubscriptionHub({ bus, logger: recordingLogger() }));
      const responses = await Promise.all(
        hubs.map(async (hub, i) => {
          const res = new FakeResponse();
          await openFollowing(hub, res, {
            id: `s${i}`,
            filter: { resourceSubscriptions: ['note://shared/plan', MARKER_URI] },
          });
          return res;
        }),
      );
      const updates = (res: FakeResponse, uri: string) =>
        res.messages().filter((m: any) => m.method === 'notifications/resources/updated' && m.params?.uri === uri)
          .length;
      hubs[0]!.resourceUpdated('note://shared/plan');
      hubs[0]!.resourceUpdated(MARKER_URI);
      await waitFor(() => responses.every((res) => updates(res, MARKER_URI) === 1), 'the marker on every node');
      expect(responses.map((res) => updates(res, 'note://shared/plan'))).toStrictEqual([1, 1, 1]);
      for (const hub of hubs) await hub.close();
    });

    test('hubs on the bus: a cancellation received by one node ends the stream another node holds, for that principal only', async () => {
      const bus = await fresh();
      const [a, b] = [1, 2].map(() => new SubscriptionHub({ bus, logger: recordingLogger() })) as [
        SubscriptionHub,
        SubscriptionHub,
      ];
      const alices = new FakeResponse();
      const bobs = new FakeResponse();
      await openFollowing(b, alices, { principal: 'alice', id: 'listen:1' });
      await openFollowing(b, bobs, { principal: 'bob', id: 'listen:1' });
      // Mallory's cancel of the same id changes nothing; alice's, received by the other node, ends hers.
      expect(hubEngine(a).cancel('mallory', 'listen:1')).toBe(0);
      expect(hubEngine(a).cancel('alice', 'listen:1')).toBe(0);
      await waitFor(() => b.stats().closed.cancelled === 1, "alice's stream cancelled on the node that holds it");
      expect(alices.destroyed).toBe(true);
      expect(bobs.destroyed).toBe(false);
      expect(b.openByPrincipal()).toStrictEqual({ bob: 1 });
      for (const hub of [a, b]) await hub.close();
    });
  });
}
