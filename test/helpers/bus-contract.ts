/**
 * The contract every `SubscriptionBus` keeps, as one suite: `describeBusContract(name, makeBus)`.
 * MemoryBus runs it today; RedisBus (adapters/redis) runs the very same suite against a real Redis.
 * Delivery may be asynchronous (a network bus), so every expectation waits for a condition.
 */
import { afterAll, describe, expect, test } from '@jest/globals';
import { SubscriptionHub, type BusMember, type SubscriptionBus, type SubscriptionEvent } from '../../lib/index.ts';
import { FakeResponse, openStream, recordingLogger, settle, waitFor } from './fake-response.ts';

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

/** A member that records what reaches it. */
function recorder(bus: SubscriptionBus): { member: BusMember; seen: SubscriptionEvent[] } {
  const seen: SubscriptionEvent[] = [];
  const member = bus.join((event) => seen.push(event));
  return { member, seen };
}

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
      const a = recorder(bus);
      const b = recorder(bus);
      const c = recorder(bus);
      for (const event of EVENTS) a.member.publish(event);
      await waitFor(() => b.seen.length === EVENTS.length && c.seen.length === EVENTS.length, 'delivery to b and c');
      expect(b.seen).toStrictEqual(EVENTS);
      expect(c.seen).toStrictEqual(EVENTS);
      // A sentinel from another member proves nothing more is coming back to the publisher.
      b.member.publish({ kind: 'tools_list_changed' });
      await waitFor(() => a.seen.length === 1, 'the sentinel at a');
      expect(a.seen).toStrictEqual([{ kind: 'tools_list_changed' }]);
      for (const m of [a, b, c]) await m.member.leave();
    });

    test('a member that left hears nothing more; leave() is idempotent', async () => {
      const bus = await fresh();
      const a = recorder(bus);
      const b = recorder(bus);
      const c = recorder(bus);
      await b.member.leave();
      await b.member.leave();
      a.member.publish({ kind: 'resource_updated', uri: 'note://x' });
      await waitFor(() => c.seen.length === 1, 'delivery to c');
      await settle();
      expect(b.seen).toStrictEqual([]);
      for (const m of [a, c]) await m.member.leave();
    });

    test('one hub joining twice is two members', async () => {
      const bus = await fresh();
      const seen: SubscriptionEvent[] = [];
      const first = bus.join((event) => seen.push(event));
      const second = bus.join((event) => seen.push(event));
      first.publish({ kind: 'prompts_list_changed' });
      await waitFor(() => seen.length === 1, 'delivery to the second membership');
      await settle();
      expect(seen.length).toBe(1);
      await first.leave();
      await second.leave();
    });

    test('hubs on the bus: an event published on one reaches the streams of the others, once each', async () => {
      const bus = await fresh();
      const hubs = [1, 2, 3].map(() => new SubscriptionHub({ bus, logger: recordingLogger() }));
      const responses = hubs.map((hub, i) => {
        const res = new FakeResponse();
        openStream(hub, res, { id: `s${i}`, filter: { resourceSubscriptions: ['note://shared/plan'] } });
        return res;
      });
      hubs[0]!.resourceUpdated('note://shared/plan');
      const updates = (res: FakeResponse) =>
        res.messages().filter((m: { method?: string }) => m.method === 'notifications/resources/updated');
      await waitFor(() => responses.every((res) => updates(res).length === 1), 'one update on every node');
      await settle();
      expect(responses.map((res) => updates(res).length)).toStrictEqual([1, 1, 1]);
      for (const hub of hubs) await hub.close();
    });
  });
}
