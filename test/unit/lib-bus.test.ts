/**
 * The bus contract, run against the in-memory default; and what the hub does when a bus misbehaves:
 * nothing of it reaches host code or holds up shutdown.
 */
import { describe, expect, test } from '@jest/globals';
import { MemoryBus, SubscriptionHub, type BusListener, type BusMember, type SubscriptionBus } from 'mcp-subscriptions';
import { hubEngine } from '../../lib/internal.ts';
import { describeBusContract } from '../helpers/bus-contract.ts';
import { FakeResponse, openStream, recordingLogger } from '../helpers/fake-response.ts';

describeBusContract('MemoryBus', () => ({ bus: new MemoryBus(), close: () => {} }));

/** A bus whose member does what `member` says, and remembers the listener it was given. */
function scriptedBus(member: Partial<BusMember>): SubscriptionBus & { listener?: BusListener } {
  const bus: SubscriptionBus & { listener?: BusListener } = {
    join(listener) {
      bus.listener = listener;
      return { publish: () => {}, cancel: () => {}, leave: () => {}, ...member };
    },
  };
  return bus;
}

describe('a bus that misbehaves', () => {
  test('one that throws on publish: the event is still delivered here, the host call returns, the outage is logged once', async () => {
    let failing = true;
    const logger = recordingLogger();
    const hub = new SubscriptionHub({
      logger,
      bus: scriptedBus({
        publish: () => {
          if (failing) throw new Error('connection refused');
        },
      }),
    });
    const res = new FakeResponse();
    openStream(hub, res, { filter: { toolsListChanged: true } });
    expect(hub.toolsListChanged().written).toBe(1);
    expect(hub.toolsListChanged().written).toBe(1);
    expect(logger.errors.map(([message]) => message)).toStrictEqual([
      'the bus failed; events reach this node only until it recovers',
    ]);
    // Recovered, then down again: a second outage is reported again.
    failing = false;
    hub.toolsListChanged();
    failing = true;
    hub.toolsListChanged();
    expect(logger.errors.length).toBe(2);
    await hub.close();
  });

  test('one that throws on cancel: the host call returns', async () => {
    const logger = recordingLogger();
    const hub = new SubscriptionHub({
      logger,
      bus: scriptedBus({
        cancel: () => {
          throw new Error('connection refused');
        },
      }),
    });
    expect(hubEngine(hub).cancel('alice', 'listen:1')).toBe(0);
    expect(logger.errors.length).toBe(1);
    await hub.close();
  });

  test('one whose leave() never settles: close() still ends, after completeTimeoutMs, and says so', async () => {
    const logger = recordingLogger();
    const hub = new SubscriptionHub({
      logger,
      completeTimeoutMs: 50,
      bus: scriptedBus({ leave: () => new Promise<void>(() => {}) }),
    });
    const res = new FakeResponse();
    openStream(hub, res);
    await hub.close();
    expect(res.writableEnded).toBe(true);
    expect(logger.errors.map(([message]) => message)).toStrictEqual([
      'the bus did not let go within 50 ms; closed anyway',
    ]);
  });

  test('one whose leave() rejects or throws: close() resolves and logs it', async () => {
    for (const leave of [
      () => Promise.reject(new Error('gone')),
      (): void => {
        throw new Error('gone');
      },
    ]) {
      const logger = recordingLogger();
      const hub = new SubscriptionHub({ logger, bus: scriptedBus({ leave }) });
      await hub.close();
      expect(logger.errors.map(([message]) => message)).toStrictEqual(['leaving the bus failed; closed anyway']);
    }
  });

  test('what the bus delivers that fails here is logged, never thrown back into the bus', async () => {
    const logger = recordingLogger();
    const bus = scriptedBus({});
    const hub = new SubscriptionHub({ logger, bus });
    hub.subscribeAll(() => {});
    expect(() => bus.listener!.event({ kind: 'task_status' } as never)).not.toThrow();
    expect(logger.errors.map(([message]) => message)).toStrictEqual(['delivering a message from the bus failed']);
    await hub.close();
  });
});
