/**
 * The chaos harness's checks (tools/chaos/checks.ts) and schedule (tools/chaos/schedule.ts) on
 * histories written by hand: each invariant is seen failing on the history of the bug it guards
 * against, and holding where the library is right (a check that fails a correct library is worse
 * than none). The runs themselves are test/system/chaos.test.ts.
 */
import { describe, expect, test } from '@jest/globals';
import {
  checkCounters,
  checkDelivery,
  checkDuplicates,
  checkIsolation,
  checkListening,
  checkSubscriptions,
  type ChangeRecord,
  type FaultRecord,
  type HubCounters,
  type StreamRecord,
} from '../../tools/chaos/checks.ts';
import { describeStep, schedule, type Engine } from '../../tools/chaos/schedule.ts';

function stream(overrides: Partial<StreamRecord> = {}): StreamRecord {
  return {
    step: 1,
    id: 'chaos-1-1',
    node: 0,
    principal: 'alice',
    asked: { lists: ['tools'], uris: ['note://alice/a1', 'note://bob/b1'] },
    listenAt: 100,
    ackAt: 110,
    honoured: ['list:tools', 'note://alice/a1'],
    ackedUris: ['note://alice/a1'],
    received: [],
    strange: [],
    ...overrides,
  };
}

function change(overrides: Partial<ChangeRecord> = {}): ChangeRecord {
  return { step: 5, node: 1, keys: ['note://alice/a1'], invokedAt: 200, answeredAt: 205, definite: true, ...overrides };
}

describe('invariant 1: no change goes unnoticed', () => {
  test('a change after the ack with no notification since fails, naming stream, key and node', () => {
    const [violation, ...rest] = checkDelivery([stream()], [change()], 1000);
    expect(rest).toEqual([]);
    expect(violation).toMatchObject({
      invariant: 1,
      evidence: { stream: 'chaos-1-1', key: 'note://alice/a1', node: 'n0', changedOnNode: 'n1', changedAtStep: 5 },
    });
  });

  test('a notification after the last change holds, a resync included; one before it does not', () => {
    const changes = [change(), change({ step: 6, invokedAt: 300, answeredAt: 305 })];
    expect(checkDelivery([stream({ received: [{ key: 'note://alice/a1', at: 250 }] })], changes, 1000)).toHaveLength(1);
    expect(checkDelivery([stream({ received: [{ key: 'note://alice/a1', at: 301 }] })], changes, 1000)).toEqual([]);
  });

  test('changes sent before the ack arrived, refused ones, unanswered ones and closed streams are not required', () => {
    expect(checkDelivery([stream()], [change({ invokedAt: 105 })], 1000)).toEqual([]);
    expect(checkDelivery([stream()], [change({ keys: [] })], 1000)).toEqual([]);
    expect(checkDelivery([stream()], [change({ definite: false, answeredAt: undefined })], 1000)).toEqual([]);
    expect(checkDelivery([stream({ endAt: 500, endedBy: 'closed' })], [change()], 1000)).toEqual([]);
    expect(checkDelivery([stream({ ackAt: undefined, honoured: undefined })], [change()], 1000)).toEqual([]);
  });
});

describe('invariant 2: no foreign or unreadable key', () => {
  test('holds for notifications of honoured keys', () => {
    const received = [
      { key: 'list:tools', at: 200 },
      { key: 'note://alice/a1', at: 210 },
    ];
    expect(checkIsolation([stream({ received })])).toEqual([]);
  });

  test("alice's stream getting note://bob/..., or a key it does not follow, fails", () => {
    const received = [
      { key: 'note://bob/b1', at: 200 },
      { key: 'list:prompts', at: 210 },
    ];
    const violations = checkIsolation([stream({ received })]);
    expect(violations.map((violation) => violation.evidence['key'])).toEqual(['note://bob/b1', 'list:prompts']);
    expect(violations[0]?.message).toContain('may not read');
  });

  test('an acknowledgement honouring an unreadable URI fails, and so does a broken message', () => {
    const violations = checkIsolation([
      stream({ ackedUris: ['note://alice/a1', 'note://bob/b1'], strange: ['a second acknowledgement'] }),
    ]);
    expect(violations.map((violation) => violation.invariant)).toEqual([2, 2]);
  });
});

describe('invariant 5: duplicates only from a resync', () => {
  const received = (count: number) =>
    Array.from({ length: count }, (_, i) => ({ key: 'note://alice/a1', at: 300 + i }));

  test('one notification per change after the ack holds; one more fails without a gap', () => {
    expect(checkDuplicates([stream({ received: received(1) })], [change()], [])).toEqual([]);
    expect(checkDuplicates([stream({ received: received(2) })], [change()], [])).toMatchObject([
      { invariant: 5, evidence: { notifications: 2, possibleChanges: 1, gaps: 0 } },
    ]);
  });

  test('a fault the stream lived through allows one resync per outage the nodes counted', () => {
    const fault: FaultRecord = { step: 3, kind: 'redis-kill', startAt: 150, recoveredAt: 400, gaps: 2 };
    expect(checkDuplicates([stream({ received: received(3) })], [change()], [fault])).toEqual([]);
    expect(checkDuplicates([stream({ received: received(4) })], [change()], [fault])).toHaveLength(1);
    // A fault over before the stream was asked for allows nothing.
    const earlier: FaultRecord = { ...fault, startAt: 10, recoveredAt: 50 };
    expect(checkDuplicates([stream({ received: received(2) })], [change()], [earlier])).toHaveLength(1);
  });

  test('a change answered before the listen counts when a fault delayed it past the listen', () => {
    const before = change({ invokedAt: 80, answeredAt: 90 });
    const pause: FaultRecord = { step: 3, kind: 'client-pause', startAt: 85, recoveredAt: 400, gaps: 0 };
    const three = [300, 310, 320].map((at) => ({ key: 'note://alice/a1', at }));
    // Without the fault the older change cannot reach it: one change, no gap, three is two too many.
    expect(checkDuplicates([stream({ received: three })], [change(), before], [])).toHaveLength(1);
    // Redis paused held its PUBLISH: both changes, and the fault's gap, make three.
    expect(checkDuplicates([stream({ received: three })], [change(), before], [pause])).toEqual([]);
    // A pause over before the listen delayed nothing past it, and is no gap of this stream: one.
    const over: FaultRecord = { ...pause, recoveredAt: 95 };
    expect(checkDuplicates([stream({ received: three })], [change(), before], [over])).toHaveLength(1);
  });

  test('a change whose answer never came counts as possible', () => {
    const unanswered = change({ definite: false, answeredAt: undefined, keys: ['note://alice/a1'] });
    expect(checkDuplicates([stream({ received: received(2) })], [change(), unanswered], [])).toEqual([]);
  });
});

describe('invariant 3: subscriptions on Redis equal the followed keys', () => {
  const names = new Map([
    ['ch:a1', 'note://alice/a1'],
    ['ch:tools', 'list:tools'],
  ]);

  test('equal counts per node and per channel hold', () => {
    const expected = [new Set(['ch:a1', 'ch:tools']), new Set(['ch:tools'])];
    const view = {
      perNode: [2, 1],
      perChannel: new Map([
        ['ch:a1', 1],
        ['ch:tools', 2],
      ]),
    };
    expect(checkSubscriptions(expected, view, names)).toEqual([]);
  });

  test('a node that subscribes nothing is a hole, per node and per channel', () => {
    const expected = [new Set(['ch:a1', 'ch:tools']), new Set(['ch:tools'])];
    const view = {
      perNode: [0, 1],
      perChannel: new Map([
        ['ch:a1', 0],
        ['ch:tools', 1],
      ]),
    };
    const violations = checkSubscriptions(expected, view, names);
    expect(violations.map((violation) => violation.evidence['kind'])).toEqual(['hole', 'hole', 'hole']);
    expect(violations.map((violation) => violation.evidence['key'] ?? violation.evidence['node'])).toEqual([
      'note://alice/a1',
      'list:tools',
      'n0',
    ]);
  });

  test('a channel still held after its last stream closed is a leak', () => {
    const violations = checkSubscriptions(
      [new Set<string>()],
      { perNode: [1], perChannel: new Map([['ch:a1', 1]]) },
      names,
    );
    expect(violations.map((violation) => violation.evidence['kind'])).toEqual(['leak', 'leak']);
  });
});

describe("invariant 4: the hub's counters add up", () => {
  const hub = (overrides: Partial<HubCounters> = {}): HubCounters => ({
    openStreams: 1,
    pendingStreams: 0,
    principals: 1,
    maxOpenPerPrincipal: 1,
    opened: 3,
    closed: { client: 1, cancelled: 1 },
    ...overrides,
  });

  test('holds when they add up', () => {
    expect(checkCounters([hub()], [1])).toEqual([]);
    expect(checkCounters([hub({ openStreams: 0, principals: 0, maxOpenPerPrincipal: 0, opened: 2 })], [0])).toEqual([]);
  });

  test('fails on a lost close, a pending listen, a principal left counted, or open streams nobody holds', () => {
    expect(checkCounters([hub({ opened: 4 })], [1])).toHaveLength(1);
    expect(checkCounters([hub({ pendingStreams: 1 })], [1])).toHaveLength(1);
    expect(checkCounters([hub({ openStreams: 0, opened: 2, principals: 1 })], [0])).toHaveLength(1);
    expect(checkCounters([hub()], [0])).toHaveLength(1);
  });
});

describe('invariant 3 on PostgreSQL: the channels each node hears a probe NOTIFY on', () => {
  const names = new Map([
    ['p:u:a1', 'note://alice/a1'],
    ['p:resync', 'p:resync'],
  ]);
  const expected = [new Set(['p:resync', 'p:u:a1']), new Set(['p:resync'])];

  test('holds when exactly the nodes that follow a channel hear it, and each bus confirms as many LISTENs', () => {
    const heardBy = new Map([
      ['p:u:a1', [0]],
      ['p:resync', [0, 1]],
    ]);
    expect(checkListening(expected, { heardBy, confirmed: [2, 1] }, names)).toEqual([]);
    expect(checkListening(expected, { heardBy, confirmed: [undefined, undefined] }, names)).toEqual([]);
  });

  test('a channel heard by a node none of whose streams follows it is a leak; one followed and not heard, a hole', () => {
    const leak = checkListening(expected, { heardBy: new Map([['p:u:a1', [0, 1]]]) }, names);
    expect(leak).toMatchObject([
      { invariant: 3, id: '3:p:u:a1:n1:leak', evidence: { kind: 'leak', node: 'n1', key: 'note://alice/a1' } },
    ]);
    const hole = checkListening(expected, { heardBy: new Map([['p:u:a1', []]]) }, names);
    expect(hole).toMatchObject([{ invariant: 3, evidence: { kind: 'hole', node: 'n0', followedOn: ['n0'] } }]);
  });

  test("a bus confirming more or fewer LISTENs than its node's streams follow fails, naming the node", () => {
    const heardBy = new Map([['p:u:a1', [0]]]);
    expect(checkListening(expected, { heardBy, confirmed: [3, 1] }, names)).toMatchObject([
      { invariant: 3, id: '3:n0:confirmed:leak', evidence: { node: 'n0', confirmed: 3 } },
    ]);
    expect(checkListening(expected, { heardBy, confirmed: [2, 0] }, names)).toMatchObject([
      { invariant: 3, id: '3:n1:confirmed:hole' },
    ]);
  });
});

describe('the schedule', () => {
  test('a seed draws the same schedule every time, another seed another one', () => {
    const draw = (seed: number, engine: Engine = 'redis') => schedule({ seed, steps: 200, engine }).map(describeStep);
    expect(draw(7)).toEqual(draw(7));
    expect(draw(7, 'cluster')).toEqual(draw(7, 'cluster'));
    expect(draw(7, 'postgres')).toEqual(draw(7, 'postgres'));
    expect(draw(8)).not.toEqual(draw(7));
  });

  test('every round injects one fault, heals it, then checks; closes and cancels name earlier listens', () => {
    const steps = schedule({ seed: 3, steps: 300, engine: 'redis' });
    const types = steps.map((step) => step.op.type);
    expect(types.filter((type) => type === 'fault')).toHaveLength(types.filter((type) => type === 'quiesce').length);
    expect(types.filter((type) => type === 'heal')).toHaveLength(types.filter((type) => type === 'quiesce').length);
    expect(types.at(-1)).toBe('quiesce');
    for (const step of steps) {
      if (step.op.type === 'close' || step.op.type === 'cancel') {
        expect(steps[step.op.listen]?.op.type).toBe('listen');
        expect(step.op.listen).toBeLessThan(step.index);
      }
    }
    const faults = new Set(steps.flatMap((step) => (step.op.type === 'fault' ? [step.op.fault.kind] : [])));
    expect([...faults].sort()).toEqual(['client-kill', 'client-pause', 'redis-kill']);
    const clusterFaults = schedule({ seed: 3, steps: 300, engine: 'cluster' }).flatMap((step) =>
      step.op.type === 'fault' ? [step.op.fault.kind] : [],
    );
    expect([...new Set(clusterFaults)].sort()).toEqual(['master-kill', 'slot-move']);
    const postgresFaults = schedule({ seed: 3, steps: 300, engine: 'postgres' }).flatMap((step) =>
      step.op.type === 'fault' ? [step.op.fault.kind] : [],
    );
    expect([...new Set(postgresFaults)].sort()).toEqual(['pg-exhaust', 'pg-kill', 'pg-terminate']);
  });

  test("PostgreSQL's faults leave the operations of a seed as Redis draws them until the first fault", () => {
    // The engines share the client operations' draws: only the fault (and the heal's delay) differ.
    const first = (engine: Engine) => {
      const steps = schedule({ seed: 5, steps: 100, engine });
      return steps
        .slice(
          0,
          steps.findIndex((step) => step.op.type === 'fault'),
        )
        .map(describeStep);
    };
    expect(first('postgres')).toEqual(first('redis'));
  });
});
