/**
 * The set-ups a chaos run drives, behind one face: one Redis server, a Redis Cluster, or PostgreSQL.
 * Each says what the samples are given (`REDIS_URL`, `REDIS_CLUSTER` or `DATABASE_URL`), how a fault is
 * injected and healed, and checks invariant 3 against what the server itself shows of each node's
 * subscriptions. The single Redis server and PostgreSQL (a private cluster, never the shared 5432) run
 * on free loopback ports; the Redis Cluster on ports in 7500–7999 (the test suites' clusters use 7000–7499).
 */
import { performance } from 'node:perf_hooks';
import { RedisCluster, redisCommand, slotOf } from '../../test/helpers/redis-cluster.ts';
import { checkListening, checkSubscriptions, type Violation } from './checks.ts';
import { PostgresProcess } from './postgres.ts';
import { clientList, fixedChannels, keyChannel, must, RedisProcess, SAMPLE_PREFIX, type ClientInfo } from './redis.ts';
import type { Fault } from './schedule.ts';

/** The chaos harness's cluster ports, apart from the test suites'. */
export const CHAOS_CLUSTER_PORTS = { firstPort: 7500, lastPort: 7999 } as const;

/** What invariant 3 is checked against, at one quiescence. */
export interface SubscriptionCheck {
  /** Per node, the channels it must hold: those of the keys its open streams follow, and the fixed ones. */
  readonly expected: readonly ReadonlySet<string>[];
  /** Every channel a node could hold: the pool's keys, the probes' notes, the cancellations, the fixed ones. */
  readonly universe: readonly string[];
  /** A channel's key, for the evidence. */
  readonly names: ReadonlyMap<string, string>;
  /** Node i's name on the server (its subscriber connection on Redis, its role on PostgreSQL). */
  readonly nodeNames: readonly string[];
  /** The nodes' stats routes, read now. */
  readonly stats: () => Promise<readonly { readonly bus?: Record<string, unknown> }[]>;
}

export interface Backend {
  readonly name: 'redis' | 'cluster' | 'postgres';
  /** The variables that put node `node` on this Redis or database. */
  env(node: number): Record<string, string>;
  /**
   * Node i's name on the server, when the backend gives each node one of its own (PostgreSQL: a role
   * each); `undefined` when the harness must find it out (Redis: the subscriber connection whose
   * channels grow with a probe listen of that node).
   */
  readonly nodeNames?: readonly string[];
  /** The channels every node holds whatever its streams follow. */
  fixedChannels(): string[];
  /** Invariant 3's violations now (see checks.ts): what the server shows against what is expected. */
  checkSubscriptions(check: SubscriptionCheck): Promise<Violation[]>;
  /**
   * Redis only: subscriber connections by name (`<prefix>:<nodeId>:sub`) and the channels each holds on
   * each server (by port): how the harness tells which connection is which node's.
   */
  subscribers?(): Promise<Map<string, Held>>;
  /**
   * Starts `fault`; `nodeNames[i]` is node i's name on the server (on Redis its subscriber connection's,
   * its publisher's ending in `:pub`; on PostgreSQL its role).
   */
  inject(fault: Fault, nodeNames: readonly string[]): Promise<void>;
  /** Ends the fault injected last: restart, failover, slot move awaited, a role's limit lifted. */
  heal(): Promise<void>;
  /** Resolves once the server itself is whole again (a cluster: every slot served, every node agreeing). */
  settled(): Promise<void>;
  stop(): Promise<void>;
}

/** A Redis backend: what invariant 3 reads there. */
interface RedisBackend extends Backend {
  subscribers(): Promise<Map<string, Held>>;
  /** Subscribers of each channel, as the server that carries it counts them. */
  numsub(channels: readonly string[]): Promise<Map<string, number>>;
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
  const backend: RedisBackend = {
    name: 'redis',
    env: () => ({ REDIS_URL: redis.url }),
    fixedChannels: () => fixedChannels(true),
    checkSubscriptions: (check) => redisSubscriptions(backend, check),
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
  return backend;
}

/**
 * Invariant 3 on Redis: each node's subscriber connection(s) hold as many channels as its open streams
 * follow (`CLIENT LIST`), and each channel of the universe has as many subscribers as nodes that follow
 * it (`PUBSUB NUMSUB` / `SHARDNUMSUB`).
 */
async function redisSubscriptions(backend: RedisBackend, check: SubscriptionCheck): Promise<Violation[]> {
  const subscribers = await backend.subscribers();
  const view = {
    perNode: check.nodeNames.map((name) => subscribers.get(name)?.total ?? 0),
    perNodeByServer: check.nodeNames.map((name) => subscribers.get(name)?.byServer ?? {}),
    perChannel: await backend.numsub(check.universe),
  };
  return checkSubscriptions(check.expected, view, check.names);
}

/** A cluster of 3 masters with a replica each, on 7500–7999. */
export async function clusterBackend(): Promise<Backend> {
  const cluster = await RedisCluster.start(CHAOS_CLUSTER_PORTS);
  const seeds = cluster.seeds().join(',');
  let healing: () => Promise<void> = () => Promise.resolve();
  const backend: RedisBackend = {
    name: 'cluster',
    // The seeds of the start: a killed node is started again on its port, so they stay valid.
    env: () => ({ REDIS_CLUSTER: seeds }),
    fixedChannels: () => fixedChannels(false),
    checkSubscriptions: (check) => redisSubscriptions(backend, check),
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
  return backend;
}

/** Node i's role on PostgreSQL: a role per node, so that the server tells each node's sessions apart. */
const nodeRole = (node: number): string => `chaos_n${node}`;

/** The payload of invariant 3's probes: no message of the bus's wire, so each node that hears it drops it and counts it. */
const PROBE_PAYLOAD = 'chaos-probe';

/**
 * The barrier after each probe: a cancellation of the wire (version 2, written out here as the harness
 * writes the channel names: it judges the bus from outside) of a listen that no principal has, from a
 * node id no node has. A node that hears it counts it in `bus.received` and cancels nothing.
 */
const BARRIER_PAYLOAD = JSON.stringify({
  v: 2,
  node: 'chaos-harness',
  type: 'cancel',
  principal: 'chaos-barrier',
  id: 'chaos-barrier',
});

/** How long a probe's barrier may take to reach every node. */
const PROBE_MS = 5000;

/** A node's sessions on the server, by role: the one LISTENing, and its pool's. */
interface Sessions {
  readonly listening: number[];
  readonly others: number[];
}

/**
 * PostgreSQL: a private cluster of the run's own (initdb on a free loopback port; the shared server on
 * 5432 is never touched), a role per node (`chaos_n0`, …: its `DATABASE_URL` names it), so that
 * `pg_stat_activity` tells each node's sessions apart. The listening session is the one whose last
 * statement was a LISTEN or an UNLISTEN (the bus's listening connection runs nothing else; its pool
 * runs the NOTIFYs).
 *
 * Invariant 3: PostgreSQL shows no session another session's LISTENs (`pg_listening_channels()` is the
 * caller's own), so the check asks the server in the one way it answers: it delivers a NOTIFY to every
 * session LISTENing on its channel, and to no other. For each channel of the universe, the harness
 * sends a NOTIFY whose payload is no message of the bus's wire (every node that hears it drops it and
 * counts it in `bus.dropped`), then a barrier on the resync channel, which every node LISTENs to: a
 * cancellation that cancels nothing, which every node counts in `bus.received`. PostgreSQL delivers
 * notifications in commit order, so once a node has counted the barrier it has counted the probe if it
 * heard it: the nodes whose `dropped` rose LISTEN on that channel, the others do not. (Counting both in
 * `dropped` would not do: a node that heard the probe but not yet the barrier looks like one that heard
 * the barrier only.) A leak (a channel heard by a node none of whose streams follow it) or a hole (a
 * followed key's channel not heard) is a violation, as is a node whose bus counts another number of
 * confirmed LISTENs than the channels expected of it.
 */
export async function postgresBackend(): Promise<Backend> {
  const server = await PostgresProcess.start({ maxConnections: 60 });
  const roles = Array.from({ length: 3 }, (_, node) => nodeRole(node));
  for (const role of roles) {
    await server.query(`CREATE ROLE ${role} LOGIN`);
    // A spill table, if the bus ever needs one, is created in public (no CREATE there for others since 15).
    await server.query(`GRANT CREATE ON SCHEMA public TO ${role}`);
  }
  let healing: () => Promise<void> = () => Promise.resolve();

  /** Each role's sessions on the test database. */
  const sessions = async (): Promise<Map<string, Sessions>> => {
    const { rows } = await server.query<{ usename: string; pid: number; query: string }>(
      `SELECT usename, pid, query FROM pg_stat_activity WHERE datname = 'test' AND usename LIKE 'chaos\\_n%'`,
    );
    const out = new Map<string, Sessions>();
    for (const row of rows) {
      const entry = out.get(row.usename) ?? { listening: [], others: [] };
      (/^\s*(UN)?LISTEN\b/i.test(row.query) ? entry.listening : entry.others).push(row.pid);
      out.set(row.usename, entry);
    }
    return out;
  };
  const terminate = async (pids: readonly number[]): Promise<void> => {
    if (pids.length > 0) await server.query('SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid', [pids]);
  };

  const backend: Backend = {
    name: 'postgres',
    env: (node) => ({ DATABASE_URL: server.url(nodeRole(node)) }),
    nodeNames: roles,
    fixedChannels: () => [`${SAMPLE_PREFIX}:2:resync`],
    async checkSubscriptions(check) {
      const resync = `${SAMPLE_PREFIX}:2:resync`;
      const counters = async (): Promise<{ dropped: number; received: number }[]> =>
        (await check.stats()).map((node) => ({
          dropped: Number(node.bus?.['dropped'] ?? Number.NaN),
          received: Number(node.bus?.['received'] ?? Number.NaN),
        }));
      const heardBy = new Map<string, number[]>();
      const deaf = new Set<number>();
      for (const channel of check.universe) {
        if (channel === resync) continue;
        const before = await counters();
        await server.query('SELECT pg_notify($1, $2)', [channel, PROBE_PAYLOAD]);
        await server.query('SELECT pg_notify($1, $2)', [resync, BARRIER_PAYLOAD]);
        const deadline = performance.now() + PROBE_MS;
        const arrived = (now: readonly { received: number }[]): boolean =>
          now.every((count, node) => count.received >= (before[node]?.received ?? 0) + 1);
        let after = await counters();
        while (!arrived(after) && performance.now() < deadline) {
          await sleep(5);
          after = await counters();
        }
        const heard: number[] = [];
        after.forEach((count, node) => {
          const was = before[node] ?? { dropped: 0, received: 0 };
          if (count.received < was.received + 1) deaf.add(node);
          else if (count.dropped > was.dropped) heard.push(node);
        });
        heardBy.set(channel, heard);
      }
      // The resync channel: heard by every node whose barrier arrived.
      heardBy.set(
        resync,
        check.nodeNames.map((_, node) => node).filter((node) => !deaf.has(node)),
      );
      const stats = await check.stats();
      const confirmed = stats.map((node) => {
        const value = node.bus?.['subscriptions'];
        return typeof value === 'number' ? value : undefined;
      });
      return checkListening(check.expected, { heardBy, confirmed }, check.names);
    },
    async inject(fault, nodeNames) {
      switch (fault.kind) {
        case 'pg-kill':
          await server.kill();
          healing = () => server.start();
          return;
        case 'pg-terminate': {
          const role = nodeNames[fault.node] as string;
          await terminate((await sessions()).get(role)?.listening ?? []);
          healing = () => Promise.resolve();
          return;
        }
        case 'pg-exhaust': {
          const role = nodeNames[fault.node] as string;
          const held = (await sessions()).get(role) ?? { listening: [], others: [] };
          // The listening session stays; no other may be opened, and the pool's are ended.
          await server.query(`ALTER ROLE ${role} CONNECTION LIMIT ${held.listening.length}`);
          await terminate(held.others);
          healing = async () => {
            await server.query(`ALTER ROLE ${role} CONNECTION LIMIT -1`);
          };
          return;
        }
        default:
          throw new Error(`a PostgreSQL run has no fault ${fault.kind}`);
      }
    },
    heal: () => healing(),
    settled: () => Promise.resolve(),
    stop: () => server.stop(),
  };
  return backend;
}
