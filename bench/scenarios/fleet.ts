/**
 * fleet: 8 nodes (hubs, each with its own `RedisBus` and HTTP server) in two processes, on one Redis
 * server of the bench's own, once per routing mode of the bus (`interest`, `buckets:N`, `broadcast`),
 * each mode with fresh processes and its own channel prefix. Node n holds streams for a disjoint
 * n-th eighth of the URIs (`urisPerStream` each) and one tools-list follower. In each round every
 * node publishes `perNode` events back to back, all nodes at once: a share `listShare` are tools list
 * changes, the rest updates of URIs drawn at random over the whole fleet (distinct within a round, so
 * that each frame tells which publish it answers). A round ends when every stream has its frames, or
 * nothing arrived for 500 ms.
 *
 * Then node 0's streams take bursts of `pair.events` updates back to back, published in turn on node 0
 * itself (one node: the hub delivers locally, the bus only publishes) and on the first node of the
 * other process (two nodes: through Redis), to compare publish → receive across nodes with one node.
 *
 * What is read: each node's bus counters (`GET /control/usage`), Redis's `INFO` before and after the
 * rounds (CPU and output bytes, so the bench's Redis serves nothing else), and the streams' frames,
 * stamped on arrival in the load generator.
 *
 * The `pg:` routings run the same fleet on a `PostgresBus` per node (LISTEN/NOTIFY) on the bench's own
 * PostgreSQL: its server CPU is its processes' (/proc).
 */
import { Redis } from 'ioredis';
import { now } from '../../tools/shared/clock.ts';
import { percentile, prng } from '../../tools/shared/stats.ts';
import { closeAll, cpuBetween, openMany, publish, sleep, type StreamReader, usage, waitFor } from '../lib/client.ts';
import type { Usage } from '../lib/control.ts';
import { postgresCpuMs } from '../lib/postgres.ts';
import { noteUri } from '../lib/wire.ts';
import type { BenchPostgres, Figures, RowSpec, Scenario, ScenarioResult } from '../scenario.ts';
import { num } from './rows.ts';

type Params = {
  nodes: number;
  uris: number;
  urisPerStream: number;
  warmup: number;
  rounds: number;
  perNode: number;
  listShare: number;
  routings: string[];
  pair: { events: number; rounds: number };
};

const NODES = 8;
const ROUTINGS = ['interest', 'buckets:1024', 'broadcast', 'pg:interest', 'pg:broadcast'];
/** CI size: PostgreSQL's interest routing only, beside Redis's three. */
const QUICK_ROUTINGS = ['interest', 'buckets:1024', 'broadcast', 'pg:interest'];

export const fleet: Scenario<Params> = {
  name: 'fleet',
  title:
    'fleet: 8 nodes in 2 processes on one Redis (or one PostgreSQL: the pg: modes), each following an eighth of 8,000 URIs and the tools list; 90% updates of random URIs, 10% list changes, published from every node; per routing mode',
  full: {
    nodes: NODES,
    uris: 8000,
    urisPerStream: 10,
    warmup: 2,
    rounds: 20,
    perNode: 100,
    listShare: 0.1,
    routings: ROUTINGS,
    pair: { events: 100, rounds: 10 },
  },
  quick: {
    nodes: NODES,
    uris: 8000,
    urisPerStream: 40,
    warmup: 1,
    rounds: 5,
    perNode: 50,
    listShare: 0.1,
    routings: QUICK_ROUTINGS,
    pair: { events: 100, rounds: 6 },
  },
  targets: ['ours'],
  fleet: {
    routings: (p) => p.routings,
    nodes: (p) => p.nodes,
    processes: 2,
    merge: (byRouting) => {
      const ours: Figures = {};
      for (const [routing, figures] of Object.entries(byRouting)) {
        for (const [key, value] of Object.entries(figures)) ours[`${routing} ${key}`] = value;
      }
      return { ours };
    },
  },
  timeoutMs: 300_000,
  rows: (p) => p.routings.flatMap((routing) => rows(routing, p)),
  async run(_ports, _targets, p, _nodes, fleetRun) {
    if (fleetRun === undefined) throw new Error('fleet: needs a fleet of nodes (the scenario runs per routing mode)');
    return { ours: await runFleet(p, fleetRun.ports, fleetRun.processes, fleetRun.redisPort, fleetRun.postgres) };
  },
};

/** The rows of one routing mode. */
function rows(routing: string, p: Params): RowSpec[] {
  return routing.startsWith('pg:') ? postgresRows(routing, p) : redisRows(routing, p);
}

/** The rows of a `pg:` routing: the same fleet on PostgreSQL. */
function postgresRows(routing: string, p: Params): RowSpec[] {
  const f = (key: string) => (figures: Figures) => figures[`${routing} ${key}`];
  const total = p.rounds * p.nodes * p.perNode;
  return [
    {
      label: `fleet ${routing}: messages received per node ÷ events published by the other nodes (mean)`,
      unit: '',
      value: f('receivedRatio'),
      digits: 3,
      ...(routing === 'pg:broadcast' ? { note: 'broadcast: every node hears every event (1.0 by design)' } : {}),
    },
    { label: `fleet ${routing}: the same, the busiest node`, unit: '', value: f('receivedRatioMax'), digits: 3 },
    {
      label: `fleet ${routing}: PostgreSQL CPU per 1,000 events (its processes, /proc: backends, walwriter, …)`,
      unit: 'ms',
      value: f('serverCpuMsPer1k'),
    },
    {
      label: `fleet ${routing}: node CPU per 1,000 events, the 8 nodes together (publish, receive, fan-out)`,
      unit: 'ms',
      value: f('nodeCpuMsPer1k'),
      digits: 1,
    },
    {
      label: `fleet ${routing}: deliveries/s (stream × event, ${total} events)`,
      unit: '/s',
      value: f('deliveriesPerSec'),
      digits: 0,
    },
    { label: `fleet ${routing}: publish→receive p50, updates`, unit: 'ms', value: f('p50Ms') },
    { label: `fleet ${routing}: publish→receive p99, updates`, unit: 'ms', value: f('p99Ms') },
    {
      label: `fleet ${routing}: ${p.pair.events} updates back to back, p50 on node 0 itself / through PostgreSQL from the other process`,
      unit: '',
      value: (figures) =>
        `${num(figures[`${routing} oneNodeP50Ms`]).toFixed(2)} / ${num(figures[`${routing} twoNodeP50Ms`]).toFixed(2)} ms`,
    },
    {
      label: `fleet ${routing}: back to back p99, one node / two nodes`,
      unit: '',
      value: (figures) =>
        `${num(figures[`${routing} oneNodeP99Ms`]).toFixed(2)} / ${num(figures[`${routing} twoNodeP99Ms`]).toFixed(2)} ms`,
    },
    {
      label: `fleet ${routing}: every frame arrived / bus messages dropped`,
      unit: '',
      value: (figures) =>
        `${figures[`${routing} complete`] === true ? 'yes' : 'no'} / ${String(figures[`${routing} dropped`])}`,
    },
  ];
}

/** The rows of a Redis routing. */
function redisRows(routing: string, p: Params): RowSpec[] {
  const f = (key: string) => (figures: Figures) => figures[`${routing} ${key}`];
  const total = p.rounds * p.nodes * p.perNode;
  return [
    {
      label: `fleet ${routing}: messages received per node ÷ events published by the other nodes (mean)`,
      unit: '',
      value: f('receivedRatio'),
      digits: 3,
      ...(routing === 'broadcast'
        ? { note: 'broadcast: every node hears every event (1.0 by design)' }
        : {
            target: '≤ 0.2',
            met: (values: Partial<Record<string, unknown>>) =>
              Number.isFinite(num(values['ours'])) ? num(values['ours']) <= 0.2 : undefined,
          }),
    },
    {
      label: `fleet ${routing}: the same, the busiest node`,
      unit: '',
      value: f('receivedRatioMax'),
      digits: 3,
    },
    {
      label: `fleet ${routing}: Redis CPU per 1,000 events (used_cpu_sys + used_cpu_user)`,
      unit: 'ms',
      value: f('redisCpuMsPer1k'),
    },
    {
      label: `fleet ${routing}: Redis output per 1,000 events (total_net_output_bytes)`,
      unit: 'KB',
      value: f('redisOutKbPer1k'),
      digits: 1,
    },
    {
      label: `fleet ${routing}: Redis commands per 1,000 events (and their time)`,
      unit: '',
      value: f('redisCommands'),
    },
    {
      label: `fleet ${routing}: node CPU per 1,000 events, the 8 nodes together (publish, receive, fan-out)`,
      unit: 'ms',
      value: f('nodeCpuMsPer1k'),
      digits: 1,
    },
    {
      label: `fleet ${routing}: deliveries/s (stream × event, ${total} events)`,
      unit: '/s',
      value: f('deliveriesPerSec'),
      digits: 0,
    },
    { label: `fleet ${routing}: publish→receive p50, updates`, unit: 'ms', value: f('p50Ms') },
    { label: `fleet ${routing}: publish→receive p99, updates`, unit: 'ms', value: f('p99Ms') },
    {
      label: `fleet ${routing}: channels subscribed per node, mean (Redis: channels with a subscriber)`,
      unit: '',
      value: (figures) =>
        `${num(figures[`${routing} subscriptionsPerNode`]).toFixed(0)} (${num(figures[`${routing} redisChannels`]).toFixed(0)})`,
    },
    {
      label: `fleet ${routing}: ${p.pair.events} updates back to back, publish→receive p50, on node 0 itself`,
      unit: 'ms',
      value: f('oneNodeP50Ms'),
    },
    {
      label: `fleet ${routing}: the same published on another node (another process, through Redis)`,
      unit: 'ms',
      value: f('twoNodeP50Ms'),
      target: '≤ one node + 1 ms',
      met: (_v, all: ScenarioResult) => {
        const two = num(all.ours?.[`${routing} twoNodeP50Ms`]);
        return Number.isFinite(two) ? two <= num(all.ours?.[`${routing} oneNodeP50Ms`]) + 1 : undefined;
      },
    },
    {
      label: `fleet ${routing}: back to back p99, one node / two nodes`,
      unit: '',
      value: (figures) =>
        `${num(figures[`${routing} oneNodeP99Ms`]).toFixed(2)} / ${num(figures[`${routing} twoNodeP99Ms`]).toFixed(2)} ms`,
    },
    {
      label: `fleet ${routing}: every frame arrived / bus messages dropped`,
      unit: '',
      value: (figures) =>
        `${figures[`${routing} complete`] === true ? 'yes' : 'no'} / ${String(figures[`${routing} dropped`])}`,
    },
  ];
}

/** Redis's own counters from `INFO`: CPU in ms, output bytes, channels with a subscriber, calls per command. */
async function redisInfo(
  redis: Redis,
): Promise<{ cpuMs: number; outBytes: number; channels: number; calls: Map<string, { calls: number; usec: number }> }> {
  const text = await redis.info('everything');
  const calls = new Map<string, { calls: number; usec: number }>();
  for (const match of text.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm)) {
    calls.set(match[1] as string, { calls: Number(match[2]), usec: Number(match[3]) });
  }
  const field = (name: string): number => {
    const match = new RegExp(`^${name}:([0-9.]+)`, 'm').exec(text);
    return match === null ? Number.NaN : Number(match[1]);
  };
  const shard = field('pubsubshard_channels');
  return {
    cpuMs: (field('used_cpu_sys') + field('used_cpu_user')) * 1000,
    outBytes: field('total_net_output_bytes'),
    channels: field('pubsub_channels') + (Number.isFinite(shard) ? shard : 0),
    calls,
  };
}

const UPDATED = '"method":"notifications/resources/updated"';
const URI_KEY = '"uri":"';

/** One fleet, one routing mode: the rounds, then the one-node / two-node bursts. */
async function runFleet(
  p: Params,
  ports: readonly number[],
  processes: readonly (readonly number[])[],
  redisPort: number,
  postgres: BenchPostgres | undefined,
): Promise<Figures> {
  const n = ports.length;
  const perNode = p.uris / n;
  const streamsPerNode = Math.ceil(perNode / p.urisPerStream);
  if (p.perNode * n > p.uris) throw new Error('fleet: a round needs more distinct URIs than there are');
  // Every update frame's URI and arrival, in arrival order; list frames are counted.
  let arrivals: { uri: string; at: number }[] = [];
  let listFrames = 0;
  let lastArrival = 0;
  const onData = (data: string, at: number): void => {
    lastArrival = at;
    if (data.includes(UPDATED)) {
      const from = data.indexOf(URI_KEY) + URI_KEY.length;
      arrivals.push({ uri: data.slice(from, data.indexOf('"', from)), at });
    } else if (data.includes('list_changed')) {
      listFrames++;
    }
  };
  const readers: StreamReader[] = [];
  for (let node = 0; node < n; node++) {
    const first = node * perNode;
    const filter = (i: number) => {
      const uris: string[] = [];
      for (let u = first + i * p.urisPerStream; u < Math.min(first + (i + 1) * p.urisPerStream, first + perNode); u++) {
        uris.push(noteUri(u));
      }
      return { resourceSubscriptions: uris };
    };
    readers.push(...(await openMany(ports[node] as number, streamsPerNode, filter, { onData })));
    readers.push(...(await openMany(ports[node] as number, 1, () => ({ toolsListChanged: true }), { onData })));
  }
  const redis = new Redis({ host: '127.0.0.1', port: redisPort, lazyConnect: true, maxRetriesPerRequest: 1 });
  await redis.connect();
  try {
    // Lets every node's subscriptions settle (interest routing subscribes before each ack: nothing to wait for).
    await sleep(500);
    // Seeded: every run draws the same URIs and list changes.
    const draw = prng(19);
    const order = Array.from({ length: p.uris }, (_, i) => i);

    /** One round: every node publishes its share at once; returns what arrived. */
    const round = async (): Promise<{
      latencies: number[];
      frames: number;
      seconds: number;
      complete: boolean;
      eventsBy: number[];
    }> => {
      // A fresh partial shuffle: the round's URIs are distinct.
      const updates = Math.ceil(n * p.perNode);
      for (let i = 0; i < updates; i++) {
        const j = i + Math.floor(draw() * (p.uris - i));
        [order[i], order[j]] = [order[j] as number, order[i] as number];
      }
      let next = 0;
      let lists = 0;
      const orders = ports.map(() =>
        Array.from({ length: p.perNode }, () => {
          if (draw() < p.listShare) {
            lists++;
            return '';
          }
          return noteUri(order[next++] as number);
        }),
      );
      arrivals = [];
      const lists0 = listFrames;
      const expected = next;
      const start = now();
      const times = await Promise.all(
        ports.map((port, i) => publish(port, { kind: 'mixed', count: p.perNode, uris: orders[i] })),
      );
      const done = (): boolean => arrivals.length >= expected && listFrames - lists0 >= lists * n;
      let lastSeen = 0;
      let lastCount = -1;
      await waitFor(
        () => {
          const count = arrivals.length + listFrames;
          if (count !== lastCount) {
            lastCount = count;
            lastSeen = now();
          }
          return done() || now() - lastSeen > 500;
        },
        60_000,
        2,
      );
      const published = new Map<string, number>();
      orders.forEach((uris, i) => uris.forEach((uri, k) => uri !== '' && published.set(uri, times[i]![k] as number)));
      // A frame of an earlier round, late past its round's end, answers no publish of this one: left out.
      const latencies = arrivals.map(({ uri, at }) => at - (published.get(uri) ?? Number.NaN)).filter(Number.isFinite);
      const first = Math.min(...times.map((t) => t[0] as number));
      return {
        latencies,
        frames: arrivals.length + (listFrames - lists0),
        seconds: (lastArrival - Math.min(first, start)) / 1000,
        complete: done(),
        eventsBy: orders.map((uris) => uris.length),
      };
    };

    for (let r = 0; r < p.warmup; r++) await round();
    await sleep(200);
    const firstOfProcess = processes.map((indexes) => ports[indexes[0] as number] as number);
    const u0 = await Promise.all(ports.map((port) => usage(port)));
    const cpu0 = await Promise.all(firstOfProcess.map((port) => usage(port)));
    const info0 = await redisInfo(redis);
    const pg0 = postgres === undefined ? Number.NaN : postgresCpuMs(postgres.pid);
    const latencies: number[] = [];
    const eventsBy = ports.map(() => 0);
    let frames = 0;
    let seconds = 0;
    let complete = true;
    for (let r = 0; r < p.rounds; r++) {
      const result = await round();
      latencies.push(...result.latencies);
      frames += result.frames;
      seconds += result.seconds;
      complete &&= result.complete;
      result.eventsBy.forEach((count, i) => (eventsBy[i] = (eventsBy[i] as number) + count));
    }
    const info1 = await redisInfo(redis);
    const pg1 = postgres === undefined ? Number.NaN : postgresCpuMs(postgres.pid);
    const cpu1 = await Promise.all(firstOfProcess.map((port) => usage(port)));
    const u1 = await Promise.all(ports.map((port) => usage(port)));
    const events = eventsBy.reduce((a, b) => a + b, 0);
    const ratios = ports.map((_, i) => {
      const received = (u1[i]!.bus?.received ?? Number.NaN) - (u0[i]!.bus?.received ?? Number.NaN);
      return received / (events - (eventsBy[i] as number));
    });
    // Commands Redis ran during the rounds, per 1,000 events, and the time it spent in them.
    const commands = [...info1.calls]
      .map(([name, { calls, usec }]) => ({
        name,
        calls: calls - (info0.calls.get(name)?.calls ?? 0),
        usec: usec - (info0.calls.get(name)?.usec ?? 0),
      }))
      .filter((c) => c.calls > 0 && c.name !== 'info')
      .sort((a, b) => b.usec - a.usec);
    const nodeCpuUs = cpu0.reduce((sum, u, i) => sum + cpuBetween(u, cpu1[i] as Usage), 0);

    // One node against two: bursts to node 0's streams, published on node 0, then on the other process's first node.
    const local = ports[processes[0]![0] as number] as number;
    const remote = ports[processes[1]?.[0] ?? 1] as number;
    const pairUris = Array.from({ length: p.pair.events }, (_, i) =>
      noteUri(Math.floor((i * perNode) / p.pair.events)),
    );
    const pair: Record<'one' | 'two', number[]> = { one: [], two: [] };
    for (let r = 0; r < p.pair.rounds + 1; r++) {
      for (const which of r % 2 === 0 ? (['one', 'two'] as const) : (['two', 'one'] as const)) {
        arrivals = [];
        const t = await publish(which === 'one' ? local : remote, {
          kind: 'resource',
          count: p.pair.events,
          uris: pairUris,
        });
        complete &&= await waitFor(() => arrivals.length >= p.pair.events, 10_000, 1);
        // The first round warms both paths up.
        if (r === 0) continue;
        const published = new Map(pairUris.map((uri, k) => [uri, t[k] as number]));
        pair[which].push(
          ...arrivals.map(({ uri, at }) => at - (published.get(uri) ?? Number.NaN)).filter(Number.isFinite),
        );
        await sleep(50);
      }
    }
    const u2 = await Promise.all(ports.map((port) => usage(port)));
    const subscriptions = u2.map((u) => u.bus?.subscriptions ?? Number.NaN);
    return {
      events,
      receivedRatio: ratios.reduce((a, b) => a + b, 0) / n,
      receivedRatioMax: Math.max(...ratios),
      redisCpuMsPer1k: ((info1.cpuMs - info0.cpuMs) / events) * 1000,
      serverCpuMsPer1k: ((pg1 - pg0) / events) * 1000,
      redisOutKbPer1k: ((info1.outBytes - info0.outBytes) / events) * (1000 / 1024),
      redisChannels: info1.channels,
      redisCommands: commands
        .map((c) => `${c.name} ${Math.round((c.calls / events) * 1000)} (${(c.usec / events).toFixed(2)} ms)`)
        .join(', '),
      nodeCpuMsPer1k: (nodeCpuUs / 1000 / events) * 1000,
      deliveriesPerSec: frames / seconds,
      p50Ms: percentile(latencies, 50),
      p99Ms: percentile(latencies, 99),
      subscriptionsPerNode: subscriptions.reduce((a, b) => a + b, 0) / n,
      oneNodeP50Ms: percentile(pair.one, 50),
      oneNodeP99Ms: percentile(pair.one, 99),
      twoNodeP50Ms: percentile(pair.two, 50),
      twoNodeP99Ms: percentile(pair.two, 99),
      complete,
      dropped: u2.reduce((sum, u) => sum + (u.bus?.dropped ?? Number.NaN), 0),
    };
  } finally {
    closeAll(readers);
    redis.disconnect();
  }
}
