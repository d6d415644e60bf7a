/**
 * The interest reconciler (lib/interest.ts) against a server of the test's own: a transport whose
 * replies the test gives, one command at a time, so that every race the bus meets on a real Redis
 * (a listen during a re-subscription, a release during an outage, a reply after a loss) is played
 * exactly. What the server holds is modelled from the commands it answered, as Redis keeps a
 * connection's subscriptions; the reconciler must bring it in line with the leases held.
 */
import { afterEach, describe, expect, test } from '@jest/globals';
import { fc, test as propTest } from '@fast-check/jest';
import { InterestReconciler, type GapKeys, type InterestTransport } from '../../lib/internal.ts';
import type { BusInterest, InterestLease } from '../../lib/index.ts';

interface Command {
  readonly kind: 'subscribe' | 'unsubscribe';
  readonly channels: readonly string[];
  /** The connection it was sent on: a reply after a loss is the old connection's. */
  readonly connection: number;
  resolve(): void;
  reject(error: Error): void;
}

/** A server and its connection, under the test's control. */
class FakeServer implements InterestTransport {
  ready = true;
  connection = 1;
  /** What the server holds for the connection, by the commands it carried out. */
  readonly held = new Set<string>();
  readonly sent: Command[] = [];

  isReady(): boolean {
    return this.ready;
  }

  subscribe(channels: readonly string[]): Promise<unknown> {
    return this.command('subscribe', channels);
  }

  unsubscribe(channels: readonly string[]): Promise<unknown> {
    return this.command('unsubscribe', channels);
  }

  private command(kind: Command['kind'], channels: readonly string[]): Promise<unknown> {
    return new Promise<void>((resolve, reject) => {
      this.sent.push({ kind, channels, connection: this.connection, resolve, reject });
    });
  }

  /** Answers every command sent so far, in order, carrying out those of the current connection. */
  answerAll(): void {
    for (const command of this.sent.splice(0)) {
      if (command.connection === this.connection) {
        for (const channel of command.channels) {
          if (command.kind === 'subscribe') this.held.add(channel);
          else this.held.delete(channel);
        }
      }
      command.resolve();
    }
  }

  /** The connection drops: the server forgets its subscriptions unless `resubscribed` (a library's own). */
  drop(resubscribed: Iterable<string> = []): void {
    this.ready = false;
    this.connection++;
    this.held.clear();
    for (const channel of resubscribed) this.held.add(channel);
  }
}

const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** Lets the reconciler send, the server answer, and the replies be taken in, until nothing moves. */
async function settle(server: FakeServer): Promise<void> {
  for (let i = 0; i < 20; i++) {
    await turn();
    if (server.sent.length === 0) {
      await turn();
      if (server.sent.length === 0) return;
    }
    server.answerAll();
    await turn();
  }
  throw new Error('the reconciler never settled');
}

const interest = (uris: string[], lists: BusInterest['lists'] = []): BusInterest => ({ lists, uris, taskIds: [] });
const channelOf = (type: string, key: string): string => `${type}:${key}`;

let reconcilers: InterestReconciler[] = [];
afterEach(() => {
  for (const reconciler of reconcilers) reconciler.close();
  reconcilers = [];
});

function setUp(options: { lingerMs?: number; followTimeoutMs?: number } = {}) {
  const server = new FakeServer();
  const gaps: GapKeys[] = [];
  const failures: unknown[] = [];
  const reconciler = new InterestReconciler(
    server,
    { gap: (keys) => gaps.push(keys), failed: (error) => failures.push(error), settled: () => {} },
    { channelOf, lingerMs: options.lingerMs ?? 0, followTimeoutMs: options.followTimeoutMs ?? 5000, batchSize: 2 },
  );
  reconcilers.push(reconciler);
  return { server, reconciler, gaps, failures };
}

describe('InterestReconciler', () => {
  test("a lease's ready settles once the server confirmed every channel new to it", async () => {
    const { server, reconciler } = setUp();
    const lease = reconciler.follow(interest(['a', 'b', 'c']));
    let ready = false;
    void lease.ready?.then(() => (ready = true));
    await turn();
    // Sent in batches of two, none answered yet.
    expect(server.sent.map((command) => command.channels)).toStrictEqual([['u:a', 'u:b'], ['u:c']]);
    expect(ready).toBe(false);
    await settle(server);
    expect(ready).toBe(true);
    expect([...server.held].sort()).toStrictEqual(['u:a', 'u:b', 'u:c']);
    expect(reconciler.subscribed).toBe(3);
    // Already subscribed: nothing to wait for.
    expect(reconciler.follow(interest(['a'])).ready).toBeUndefined();
  });

  test('a listen while a re-subscription is in flight is subscribed too (the hole of issue 29)', async () => {
    const { server, reconciler } = setUp();
    reconciler.follow(interest(['a']));
    await settle(server);
    server.drop();
    reconciler.lost();
    server.ready = true;
    reconciler.ready();
    await turn();
    expect(server.sent).toHaveLength(1); // the re-subscription of a, unanswered
    const late = reconciler.follow(interest(['b']));
    await settle(server);
    await late.ready;
    expect([...server.held].sort()).toStrictEqual(['u:a', 'u:b']);
  });

  test('a channel let go while the server is unreachable is not held once it is back, even if the library resubscribed it', async () => {
    const { server, reconciler } = setUp();
    const lease = reconciler.follow(interest(['a', 'gone']));
    await settle(server);
    const keep = reconciler.follow(interest(['a']));
    server.drop(['u:a', 'u:gone']); // the client library's own re-subscription, on reconnect
    reconciler.lost();
    lease.release();
    server.ready = true;
    reconciler.ready();
    await settle(server);
    expect([...server.held]).toStrictEqual(['u:a']);
    keep.release();
    await settle(server);
    expect([...server.held]).toStrictEqual([]);
    expect(reconciler.subscribed).toBe(0);
  });

  test('a reply of the connection that was lost changes nothing', async () => {
    const { server, reconciler } = setUp();
    reconciler.follow(interest(['a']));
    await turn();
    expect(server.sent).toHaveLength(1);
    server.drop();
    reconciler.lost();
    server.answerAll(); // the old SUBSCRIBE's reply arrives after the loss
    await turn();
    expect(reconciler.subscribed).toBe(0);
    expect(reconciler.restored).toBe(false);
    server.ready = true;
    reconciler.ready();
    await settle(server);
    expect([...server.held]).toStrictEqual(['u:a']);
    expect(reconciler.restored).toBe(true);
  });

  test('a gap: the keys of a channel subscribed again after a loss are handed over once', async () => {
    const { server, reconciler, gaps } = setUp();
    reconciler.follow(interest(['a', 'b'], ['tools_list_changed']));
    reconciler.follow(interest(['a']));
    await settle(server);
    expect(gaps).toStrictEqual([]);
    server.drop();
    reconciler.lost();
    server.ready = true;
    reconciler.ready();
    await settle(server);
    const keys = gaps.flatMap((gap) => [...gap.lists, ...gap.uris]).sort();
    expect(keys).toStrictEqual(['a', 'b', 'tools_list_changed']);
    // Once per gap: nothing more without another loss.
    reconciler.ready();
    await settle(server);
    expect(gaps.flatMap((gap) => gap.uris).sort()).toStrictEqual(['a', 'b']);
  });

  test('a stream acknowledged while the connection is down has a gap; one whose SUBSCRIBE is not answered in time too', async () => {
    const { server, reconciler, gaps } = setUp({ followTimeoutMs: 20 });
    server.ready = false;
    expect(reconciler.follow(interest(['down'])).ready).toBeUndefined();
    server.ready = true;
    reconciler.ready();
    await settle(server);
    expect(gaps.flatMap((gap) => gap.uris)).toStrictEqual(['down']);
    const slow = reconciler.follow(interest(['slow']));
    await slow.ready; // the timeout: the server has not answered
    expect(server.held.has('u:slow')).toBe(false);
    await settle(server);
    expect(gaps.flatMap((gap) => gap.uris)).toStrictEqual(['down', 'slow']);
  });

  test('a channel let go during its gap carries no resync to the next stream that follows it', async () => {
    const { server, reconciler, gaps } = setUp();
    const first = reconciler.follow(interest(['a']));
    await settle(server);
    server.drop();
    reconciler.lost();
    first.release();
    server.ready = true;
    reconciler.ready();
    await settle(server);
    expect([...server.held]).toStrictEqual([]);
    const again = reconciler.follow(interest(['a']));
    await settle(server);
    await again.ready;
    expect(gaps).toStrictEqual([]);
  });

  test('a refused SUBSCRIBE is tried again, reported, and the channel has a gap', async () => {
    const { server, reconciler, failures, gaps } = setUp({ followTimeoutMs: 10 });
    const lease = reconciler.follow(interest(['a']));
    await turn();
    server.sent.shift()!.reject(new Error('NOPERM'));
    await lease.ready;
    expect(failures).toHaveLength(1);
    await new Promise((resolve) => setTimeout(resolve, 80)); // the backoff
    await settle(server);
    expect([...server.held]).toStrictEqual(['u:a']);
    expect(gaps.flatMap((gap) => gap.uris)).toStrictEqual(['a']);
  });

  test('a lease is released once: a second release, or another lease of the same keys, cannot take interest away', async () => {
    const { server, reconciler } = setUp();
    const first = reconciler.follow(interest(['a']));
    const second = reconciler.follow(interest(['a']));
    await settle(server);
    first.release();
    first.release();
    await settle(server);
    expect([...server.held]).toStrictEqual(['u:a']);
    second.release();
    await settle(server);
    expect([...server.held]).toStrictEqual([]);
  });

  test('a channel no key wants lingers, and is kept when wanted again within the linger', async () => {
    const { server, reconciler } = setUp({ lingerMs: 60 });
    const first = reconciler.follow(interest(['a']));
    await settle(server);
    first.release();
    await settle(server);
    expect([...server.held]).toStrictEqual(['u:a']);
    const again = reconciler.follow(interest(['a']));
    expect(again.ready).toBeUndefined();
    await new Promise((resolve) => setTimeout(resolve, 100));
    await settle(server);
    expect([...server.held]).toStrictEqual(['u:a']);
    again.release();
    await new Promise((resolve) => setTimeout(resolve, 100));
    await settle(server);
    expect([...server.held]).toStrictEqual([]);
  });

  test('lost(channels) touches only those channels (a shard that failed alone)', async () => {
    const { server, reconciler, gaps } = setUp();
    reconciler.follow(interest(['a', 'b']));
    await settle(server);
    server.held.delete('u:b');
    reconciler.lost(['u:b']);
    expect(reconciler.restored).toBe(false);
    await settle(server);
    expect(gaps.flatMap((gap) => gap.uris)).toStrictEqual(['b']);
    expect([...server.held].sort()).toStrictEqual(['u:a', 'u:b']);
  });

  propTest.prop(
    [
      fc.array(
        fc.oneof(
          fc.record({ op: fc.constant('follow' as const), keys: fc.subarray(['a', 'b', 'c', 'd'], { minLength: 1 }) }),
          fc.record({ op: fc.constant('release' as const), index: fc.nat(20) }),
          fc.record({ op: fc.constant('answer' as const) }),
          fc.record({ op: fc.constant('drop' as const), resubscribe: fc.boolean() }),
          fc.record({ op: fc.constant('ready' as const) }),
          fc.record({ op: fc.constant('turn' as const) }),
        ),
        { maxLength: 60 },
      ),
    ],
    { numRuns: 150 },
  )(
    'whatever the order of follows, releases, replies and losses, the server ends holding exactly what leases hold',
    async (steps) => {
      const { server, reconciler } = setUp();
      const leases: { keys: string[]; lease: InterestLease }[] = [];
      for (const step of steps) {
        switch (step.op) {
          case 'follow':
            leases.push({ keys: step.keys, lease: reconciler.follow(interest(step.keys)) });
            break;
          case 'release': {
            const [taken] = leases.splice(step.index % Math.max(1, leases.length), 1);
            taken?.lease.release();
            break;
          }
          case 'answer':
            server.answerAll();
            break;
          case 'drop':
            server.drop(step.resubscribe ? [...server.held] : []);
            reconciler.lost();
            break;
          case 'ready':
            if (!server.ready) {
              server.ready = true;
              reconciler.ready();
            }
            break;
          case 'turn':
            await turn();
            break;
        }
      }
      if (!server.ready) {
        server.ready = true;
        reconciler.ready();
      }
      await settle(server);
      const wanted = new Set(leases.flatMap(({ keys }) => keys.map((key) => `u:${key}`)));
      expect([...server.held].sort()).toStrictEqual([...wanted].sort());
      expect(reconciler.subscribed).toBe(wanted.size);
      expect(reconciler.missing).toBe(0);
      expect(reconciler.restored).toBe(true);
    },
  );
});
