/**
 * The two Redis set-ups a chaos run drives, behind one face: what the samples are given
 * (`REDIS_URL` or `REDIS_CLUSTER`), how a fault is injected and healed, and what Redis itself says of
 * each node's subscriptions. The single server runs on a free loopback port; the cluster on ports in
 * 7500–7999 (the test suites' clusters use 7000–7499).
 */
import { performance } from 'node:perf_hooks';
import { RedisCluster, redisCommand, slotOf } from '../../test/helpers/redis-cluster.ts';
import { clientList, keyChannel, must, RedisProcess, SAMPLE_PREFIX, type ClientInfo } from './redis.ts';
import type { Fault } from './schedule.ts';

/** The chaos harness's cluster ports, apart from the test suites'. */
export const CHAOS_CLUSTER_PORTS = { firstPort: 7500, lastPort: 7999 } as const;

export interface Backend {
  readonly name: 'redis' | 'cluster';
  /** The variables that put a sample on this Redis. */
  env(): Record<string, string>;
  /**
   * Subscriber connections by name (`<prefix>:<nodeId>:sub`) and the channels each holds on each server
   * (by port): how the harness tells which connection is which node's, and invariant 3's per-node view.
   */
  subscribers(): Promise<Map<string, Held>>;
  /** Subscribers of each channel, as the server that carries it counts them. */
  numsub(channels: readonly string[]): Promise<Map<string, number>>;
  /** Starts `fault`; `nodeNames[i]` is node i's subscriber connection name (its publisher's ends in `:pub`). */
  inject(fault: Fault, nodeNames: readonly string[]): Promise<void>;
  /** Ends the fault injected last: restart, failover, slot move awaited. */
  heal(): Promise<void>;
  /** Resolves once Redis itself is whole again (a cluster: every slot served, every node agreeing). */
  settled(): Promise<void>;
  stop(): Promise<void>;
}

/** What one node's subscriber connections hold: channels in all, and on each server by port. */
export interface Held {
  total: number;
  readonly byServer: Record<string, number>;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function subscribersOf(port: number, clients: readonly ClientInfo[], into: Map<string, Held>): void {
  for (const client of clients) {
    if (!client.name.startsWith(`${SAMPLE_PREFIX}:`) || !client.name.endsWith(':sub')) continue;
    const held = into.get(client.name) ?? { total: 0, byServer: {} };
    const count = client.sub + client.psub + client.ssub;
    held.total += count;
    held.byServer[port] = (held.byServer[port] ?? 0) + count;
    into.set(client.name, held);
  }
}

/** Connections of `nodeName`'s node (its `:sub` and `:pub`) that `fault` names. */
function targets(fault: Extract<Fault, { kind: 'client-kill' }>, nodeName: string): string[] {
  const base = nodeName.slice(0, -':sub'.length);
  if (fault.connections === 'both') return [`${base}:pub`, `${base}:sub`];
  return [`${base}:${fault.connections}`];
}

/** One redis-server of the run's own. */
export async function singleBackend(): Promise<Backend> {
  const redis = await RedisProcess.start();
  let healing: () => Promise<void> = () => Promise.resolve();
  return {
    name: 'redis',
    env: () => ({ REDIS_URL: redis.url }),
    async subscribers() {
      const out = new Map<string, Held>();
      subscribersOf(redis.port, await clientList(redis.port), out);
      return out;
    },
    async numsub(channels) {
      const reply = (await must(redis.port, ['PUBSUB', 'NUMSUB', ...channels])) as unknown[];
      const out = new Map<string, number>();
      for (let i = 0; i < reply.length; i += 2) out.set(String(reply[i]), Number(reply[i + 1]));
      return out;
    },
    async inject(fault, nodeNames) {
      switch (fault.kind) {
        case 'redis-kill':
          await redis.kill();
          healing = () => redis.start();
          return;
        case 'client-kill': {
          const names = targets(fault, nodeNames[fault.node] as string);
          const clients = (await clientList(redis.port)).filter((client) => names.includes(client.name));
          for (const client of clients) await redisCommand(redis.port, ['CLIENT', 'KILL', 'ID', client.id]);
          healing = () => Promise.resolve();
          return;
        }
        case 'client-pause': {
          const until = performance.now() + fault.ms;
          await must(redis.port, ['CLIENT', 'PAUSE', String(fault.ms), 'ALL']);
          healing = () => sleep(Math.max(0, until - performance.now()) + 20);
          return;
        }
        default:
          throw new Error(`a single Redis has no fault ${fault.kind}`);
      }
    },
    heal: () => healing(),
    settled: () => Promise.resolve(),
    stop: () => redis.stop(),
  };
}

/** A cluster of 3 masters with a replica each, on 7500–7999. */
export async function clusterBackend(): Promise<Backend> {
  const cluster = await RedisCluster.start(CHAOS_CLUSTER_PORTS);
  const seeds = cluster.seeds().join(',');
  let healing: () => Promise<void> = () => Promise.resolve();
  return {
    name: 'cluster',
    // The seeds of the start: a killed node is started again on its port, so they stay valid.
    env: () => ({ REDIS_CLUSTER: seeds }),
    async subscribers() {
      const out = new Map<string, Held>();
      for (const port of cluster.livePorts()) subscribersOf(port, await clientList(port), out);
      return out;
    },
    async numsub(channels) {
      const out = new Map<string, number>();
      const bySlotOwner = new Map<number, string[]>();
      for (const channel of channels) {
        const port = await cluster.masterOf(slotOf(channel));
        bySlotOwner.set(port, [...(bySlotOwner.get(port) ?? []), channel]);
      }
      for (const [port, names] of bySlotOwner) {
        // SHARDNUMSUB of one slot's channels per command: a master answers for its own slots only.
        for (const name of names) {
          const reply = (await must(port, ['PUBSUB', 'SHARDNUMSUB', name])) as unknown[];
          out.set(name, Number(reply[1]));
        }
      }
      return out;
    },
    async inject(fault) {
      switch (fault.kind) {
        case 'master-kill': {
          const slot = slotOf(keyChannel(fault.key));
          const killed = await cluster.masterOf(slot);
          await cluster.kill(killed);
          healing = async () => {
            await cluster.failedOver(killed, slot);
            // The dead master comes back as a replica of the one promoted in its place.
            await cluster.restart(killed);
          };
          return;
        }
        case 'slot-move': {
          const slot = slotOf(keyChannel(fault.key));
          const from = await cluster.masterOf(slot);
          const others = (await cluster.masters()).filter((port) => port !== from).sort((a, b) => a - b);
          const to = others[fault.to % others.length] as number;
          const moving = cluster.moveSlot(slot, to);
          moving.catch(() => {}); // awaited by the heal
          healing = () => moving;
          return;
        }
        default:
          throw new Error(`a cluster run has no fault ${fault.kind}`);
      }
    },
    heal: () => healing(),
    settled: () => cluster.settled(),
    stop: () => cluster.stop(),
  };
}
