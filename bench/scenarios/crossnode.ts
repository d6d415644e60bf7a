/**
 * cross-node: N streams on node A hold one note's URI; writes of that note go through node B's
 * write route, and B's `RedisBus` carries each event to A. Single node: the same load on `ours` with
 * no bus (streams and writes on one process). Same node with the bus: streams and writes on A (B
 * hears each event and has no stream for it), which tells the bus's cost on the publishing node from
 * the hop's. After a warm-up burst per mode, bursts of E writes back to back alternate mode by mode
 * (order reversed every other round), then writes one at a time alternate write by write.
 *
 * On PostgreSQL (`postgresNodes`): node C holds as many streams, and the same bursts go through node D
 * (cross-node, LISTEN/NOTIFY between) and node C itself (same node), alternating with the Redis modes; the
 * PostgreSQL server's CPU (its processes', from /proc) is read around each of those bursts.
 *
 * Back to back, the modes do not offer the same load: a write on the single node is answered after
 * its fan-out, a write on B as soon as it is published, so B takes writes about twice as fast and A's
 * streams (and the load generator reading them) queue. So cross-node bursts are also run with the
 * writes capped at the single node's back-to-back rate in the same run: the hop's cost at one load.
 */
import { now } from '../../tools/shared/clock.ts';
import { median, percentile } from '../../tools/shared/stats.ts';
import { closeAll, noteWriter, openMany, prefill, sleep, type StreamReader, usage, waitFor } from '../lib/client.ts';
import { postgresCpuMs } from '../lib/postgres.ts';
import { type Burst, writeBurst } from '../lib/rounds.ts';
import { type Filter, PRINCIPAL } from '../lib/wire.ts';
import { type Figures, type RowSpec, type Scenario, type ScenarioResult } from '../scenario.ts';
import { num } from './rows.ts';

type Params = { streams: number; events: number; paced: number; warmup: number; rounds: number };

export const crossnode: Scenario<Params> = {
  name: 'crossnode',
  title:
    "cross-node: streams on node A, writes through node B's write route, a RedisBus between; the same load on one node",
  full: { streams: 1000, events: 100, paced: 90, warmup: 20, rounds: 3 },
  quick: { streams: 200, events: 50, paced: 20, warmup: 10, rounds: 1 },
  targets: ['ours'],
  redisNodes: true,
  postgresNodes: true,
  timeoutMs: 240_000,
  rows: (p) => {
    const trio = (key: string, digits: number) => (f: Figures) =>
      ['single', 'cross', 'local'].map((mode) => num(f[`${mode}${key}`]).toFixed(digits)).join(' / ');
    const plusOneMs = (single: string, cross: string) => (_v: unknown, all: ScenarioResult) => {
      const c = num(all.ours?.[cross]);
      return Number.isFinite(c) ? c <= num(all.ours?.[single]) + 1 : undefined;
    };
    return [
      {
        label: `crossnode ${p.streams}×${p.events}: single node, deliveries/s (stream × event, until each has the last)`,
        unit: '/s',
        key: 'singleDeliveriesPerSec',
        digits: 0,
        note: NO_BUS,
      },
      {
        label: 'crossnode: cross-node (streams on A, writes on B), deliveries/s',
        unit: '/s',
        key: 'crossDeliveriesPerSec',
        digits: 0,
        target: '≥ 0.90× single node',
        met: (_v, all) => {
          const cross = num(all.ours?.['crossDeliveriesPerSec']);
          return Number.isFinite(cross) ? cross >= 0.9 * num(all.ours?.['singleDeliveriesPerSec']) : undefined;
        },
      },
      { label: 'crossnode: single node, publish→receive p50, writes back to back', unit: 'ms', key: 'singleP50Ms' },
      {
        label: 'crossnode: cross-node, publish→receive p50, writes back to back',
        unit: 'ms',
        key: 'crossP50Ms',
        note: "B answers a write before any fan-out, so it takes writes about twice as fast as the single node: a higher load, which queues on A's streams (see the rows at the single node's rate)",
      },
      {
        label: "crossnode: cross-node, publish→receive p50, writes at the single node's back-to-back rate",
        unit: 'ms',
        key: 'crossAtSingleRateP50Ms',
        target: '≤ single node + 1 ms',
        met: plusOneMs('singleP50Ms', 'crossAtSingleRateP50Ms'),
      },
      { label: 'crossnode: single node, publish→receive p99, writes back to back', unit: 'ms', key: 'singleP99Ms' },
      { label: 'crossnode: cross-node, publish→receive p99, writes back to back', unit: 'ms', key: 'crossP99Ms' },
      {
        label: "crossnode: cross-node, publish→receive p99, writes at the single node's rate",
        unit: 'ms',
        key: 'crossAtSingleRateP99Ms',
      },
      {
        label: 'crossnode: single node, publish→receive p50, one write at a time',
        unit: 'ms',
        key: 'singlePacedP50Ms',
      },
      {
        label: 'crossnode: cross-node, publish→receive p50, one write at a time',
        unit: 'ms',
        key: 'crossPacedP50Ms',
        target: '≤ single node + 1 ms',
        met: plusOneMs('singlePacedP50Ms', 'crossPacedP50Ms'),
      },
      {
        label: 'crossnode: single node, publish→receive p99, one write at a time',
        unit: 'ms',
        key: 'singlePacedP99Ms',
      },
      {
        label: 'crossnode: cross-node, publish→receive p99, one write at a time',
        unit: 'ms',
        key: 'crossPacedP99Ms',
      },
      {
        label: 'crossnode: one write at a time, to the first stream p50, single / cross-node',
        unit: '',
        value: (f) => `${num(f['singlePacedFirstP50Ms']).toFixed(2)} / ${num(f['crossPacedFirstP50Ms']).toFixed(2)} ms`,
      },
      {
        label: 'crossnode: same node with RedisBus (streams and writes on A), deliveries/s',
        unit: '/s',
        key: 'localDeliveriesPerSec',
        digits: 0,
      },
      {
        label: 'crossnode: same node with RedisBus, p50 back to back / one at a time',
        unit: '',
        value: (f) => `${num(f['localP50Ms']).toFixed(2)} / ${num(f['localPacedP50Ms']).toFixed(2)} ms`,
      },
      {
        label: `crossnode: frames per stream (of ${p.events}), single / cross / same node`,
        unit: '',
        value: trio('FramesPerStream', 1),
      },
      {
        label: 'crossnode: writes answered/s, back to back, single / cross / same node',
        unit: '',
        value: trio('WritesPerSec', 0),
      },
      {
        label: 'crossnode: frames per client read (server batching), single / cross / same node',
        unit: '',
        value: trio('FramesPerChunk', 2),
      },
      {
        label: 'crossnode: server CPU per write, single node (write route + fan-out)',
        unit: 'µs',
        key: 'singleCpuUsPerEvent',
        digits: 0,
      },
      {
        label: 'crossnode: server CPU per write, cross-node: node A (bus receive + fan-out)',
        unit: 'µs',
        key: 'crossCpuUsPerEvent',
        digits: 0,
      },
      {
        label: 'crossnode: server CPU per write, cross-node: node B (write route + PUBLISH)',
        unit: 'µs',
        key: 'crossCpuUsPerEventB',
        digits: 0,
      },
      {
        label: 'crossnode: server CPU per write, same node with RedisBus: A',
        unit: 'µs',
        key: 'localCpuUsPerEvent',
        digits: 0,
      },
      {
        label: 'crossnode: bus messages published by B / received by A / dropped (A + B)',
        unit: '',
        value: (f) => ['busPublishedB', 'busReceivedA', 'busDropped'].map((k) => String(f[k])).join(' / '),
      },
      ...postgresRows(p),
      { label: 'crossnode: every stream got the last write, every mode', unit: '', key: 'complete' },
    ];
  },
  async run(ports, _targets, p, nodes, _fleet, postgres) {
    if (nodes === undefined) throw new Error('crossnode: needs node A and node B (redisNodes)');
    const note = 'crossnode';
    const uri = `note://${PRINCIPAL}/${note}`;
    const pg = nodes.c !== undefined && nodes.d !== undefined && postgres !== undefined;
    const all = [ports.ours, nodes.a, nodes.b, ...(pg ? [nodes.c, nodes.d] : [])];
    await Promise.all(all.map((port) => prefill(port, [uri])));
    // Every write that reaches A's streams (cross-node twice over, same node, warm-ups included) fits their capacity.
    const capacity = 3 * (p.warmup + p.rounds * p.events + p.paced);
    const filter = (): Filter => ({ resourceSubscriptions: [uri] });
    const single = await openMany(ports.ours, p.streams, filter, { capacity });
    const onA = await openMany(nodes.a, p.streams, filter, { capacity });
    const onC = pg ? await openMany(nodes.c, p.streams, filter, { capacity }) : [];
    await sleep(300);
    const setups: Record<Mode, { readers: StreamReader[]; write: number; cpu: number[] }> = {
      single: { readers: single, write: ports.ours, cpu: [ports.ours] },
      cross: { readers: onA, write: nodes.b, cpu: [nodes.a, nodes.b] },
      local: { readers: onA, write: nodes.a, cpu: [nodes.a, nodes.b] },
      pgcross: { readers: onC, write: nodes.d ?? 0, cpu: [nodes.c ?? 0, nodes.d ?? 0] },
      pglocal: { readers: onC, write: nodes.c ?? 0, cpu: [nodes.c ?? 0, nodes.d ?? 0] },
    };
    const modes: Mode[] = pg ? [...MODES] : ['single', 'cross', 'local'];
    const bursts: Record<Mode, Burst[]> = { single: [], cross: [], local: [], pgcross: [], pglocal: [] };
    /**
     * PostgreSQL's CPU in the bursts of each `pg` mode, and their writes: summed over the bursts, since
     * /proc counts in 10 ms ticks, coarse for one burst.
     */
    const serverCpu = Object.fromEntries(MODES.map((mode) => [mode, { ms: 0, writes: 0 }])) as Record<
      Mode,
      { ms: number; writes: number }
    >;
    const burst = async (mode: Mode, events: number, intervalMs = 0): Promise<Burst> => {
      const { readers, write, cpu } = setups[mode];
      const before = mode.startsWith('pg') ? postgresCpuMs(postgres!.pid) : Number.NaN;
      const result = await writeBurst(readers, write, cpu, note, events, intervalMs);
      if (mode.startsWith('pg')) {
        serverCpu[mode].ms += postgresCpuMs(postgres!.pid) - before;
        serverCpu[mode].writes += events;
      }
      return result;
    };
    for (const mode of modes) {
      await burst(mode, p.warmup);
      await sleep(200);
    }
    for (const mode of modes) serverCpu[mode] = { ms: 0, writes: 0 };
    for (let r = 0; r < p.rounds; r++) {
      for (const mode of r % 2 === 0 ? modes : [...modes].reverse()) {
        bursts[mode].push(await burst(mode, p.events));
        await sleep(200);
      }
    }
    // The cross-node hop at the load the single node took: writes capped at its back-to-back rate.
    const singleRate = median(bursts.single.map((x) => x.writesPerSec));
    const atSingleRate: Burst[] = [];
    const pgAtSingleRate: Burst[] = [];
    for (let r = 0; r < p.rounds; r++) {
      atSingleRate.push(await burst('cross', p.events, 1000 / singleRate));
      await sleep(200);
      if (pg) {
        pgAtSingleRate.push(await burst('pgcross', p.events, 1000 / singleRate));
        await sleep(200);
      }
    }
    const paced = await oneAtATime(
      modes.map((mode) => setups[mode]),
      note,
      p.paced,
    );
    const [a, b] = await Promise.all([usage(nodes.a), usage(nodes.b)]);
    const [c, d] = pg ? await Promise.all([usage(nodes.c), usage(nodes.d)]) : [undefined, undefined];
    closeAll([...single, ...onA, ...onC]);
    const figures: Figures = {
      complete:
        modes.every((mode, m) => paced[m]!.complete && bursts[mode].every((x) => x.complete)) &&
        atSingleRate.every((x) => x.complete) &&
        pgAtSingleRate.every((x) => x.complete),
      crossAtSingleRateP50Ms: percentile(
        atSingleRate.flatMap((x) => x.latencies),
        50,
      ),
      crossAtSingleRateP99Ms: percentile(
        atSingleRate.flatMap((x) => x.latencies),
        99,
      ),
      crossAtSingleRateWritesPerSec: median(atSingleRate.map((x) => x.writesPerSec)),
      busPublishedB: b.bus?.published ?? Number.NaN,
      busReceivedA: a.bus?.received ?? Number.NaN,
      busDropped: (a.bus?.dropped ?? Number.NaN) + (b.bus?.dropped ?? Number.NaN),
      busReconnects: (a.bus?.reconnects ?? Number.NaN) + (b.bus?.reconnects ?? Number.NaN),
      pgcrossAtSingleRateP50Ms: percentile(
        pgAtSingleRate.flatMap((x) => x.latencies),
        50,
      ),
      pgcrossAtSingleRateP99Ms: percentile(
        pgAtSingleRate.flatMap((x) => x.latencies),
        99,
      ),
      pgBusPublishedD: d?.bus?.published ?? Number.NaN,
      pgBusReceivedC: c?.bus?.received ?? Number.NaN,
      pgBusDropped: (c?.bus?.dropped ?? Number.NaN) + (d?.bus?.dropped ?? Number.NaN),
    };
    modes.forEach((mode, m) => {
      const list = bursts[mode];
      const lat = list.flatMap((x) => x.latencies);
      figures[`${mode}DeliveriesPerSec`] = median(list.map((x) => x.deliveriesPerSec));
      figures[`${mode}FramesPerStream`] = median(list.map((x) => x.framesPerStream));
      figures[`${mode}FramesPerChunk`] = median(list.map((x) => x.framesPerChunk));
      figures[`${mode}WritesPerSec`] = median(list.map((x) => x.writesPerSec));
      figures[`${mode}P50Ms`] = percentile(lat, 50);
      figures[`${mode}P99Ms`] = percentile(lat, 99);
      figures[`${mode}PacedP50Ms`] = percentile(paced[m]!.latencies, 50);
      figures[`${mode}PacedP99Ms`] = percentile(paced[m]!.latencies, 99);
      figures[`${mode}PacedFirstP50Ms`] = median(paced[m]!.firstLatencies);
      setups[mode].cpu.forEach((_, i) => {
        figures[`${mode}CpuUsPerEvent${i === 0 ? '' : 'B'}`] = median(list.map((x) => x.cpuUsPerEvent[i] as number));
      });
      figures[`${mode}ServerCpuMsPer1k`] = (serverCpu[mode].ms / serverCpu[mode].writes) * 1000;
    });
    return { ours: figures };
  },
};

const NO_BUS = 'the SDK and the ceiling have no distributed bus (that is the point): single process only';

/** The modes: one node without a bus; A and B on Redis (writes on B, or on A); C and D on PostgreSQL (on D, or on C). */
const MODES = ['single', 'cross', 'local', 'pgcross', 'pglocal'] as const;
type Mode = (typeof MODES)[number];

/** The rows of node C and node D, joined over PostgreSQL, beside the Redis ones. */
function postgresRows(p: Params): RowSpec[] {
  const pair =
    (a: string, b: string, digits = 2) =>
    (f: Figures) =>
      `${num(f[a]).toFixed(digits)} / ${num(f[b]).toFixed(digits)}`;
  return [
    {
      label: `crossnode PostgreSQL ${p.streams}×${p.events}: cross-node (streams on C, writes on D, LISTEN/NOTIFY), deliveries/s`,
      unit: '/s',
      key: 'pgcrossDeliveriesPerSec',
      digits: 0,
      note: 'beside the Redis row above (cross-node), same streams, same writes, turns alternating',
    },
    {
      label: 'crossnode PostgreSQL: cross-node, publish→receive p50 / p99, writes back to back',
      unit: 'ms',
      value: pair('pgcrossP50Ms', 'pgcrossP99Ms'),
    },
    {
      label: "crossnode PostgreSQL: cross-node, publish→receive p50 / p99, writes at the single node's rate",
      unit: 'ms',
      value: pair('pgcrossAtSingleRateP50Ms', 'pgcrossAtSingleRateP99Ms'),
    },
    {
      label: 'crossnode PostgreSQL: cross-node, publish→receive p50 / p99, one write at a time',
      unit: 'ms',
      value: pair('pgcrossPacedP50Ms', 'pgcrossPacedP99Ms'),
    },
    {
      label: 'crossnode PostgreSQL: same node (streams and writes on C), deliveries/s; p50 one at a time',
      unit: '',
      value: (f) => `${num(f['pglocalDeliveriesPerSec']).toFixed(0)}/s; ${num(f['pglocalPacedP50Ms']).toFixed(2)} ms`,
    },
    {
      label:
        'crossnode PostgreSQL: server CPU per write, node C (bus receive + fan-out) / node D (write route + NOTIFY)',
      unit: 'µs',
      value: pair('pgcrossCpuUsPerEvent', 'pgcrossCpuUsPerEventB', 0),
    },
    {
      label: 'crossnode PostgreSQL: the PostgreSQL server’s CPU per 1,000 writes (its processes, /proc), cross-node',
      unit: 'ms',
      key: 'pgcrossServerCpuMsPer1k',
      digits: 1,
    },
    {
      label: 'crossnode PostgreSQL: bus messages published by D / received by C / dropped (C + D)',
      unit: '',
      value: (f) => ['pgBusPublishedD', 'pgBusReceivedC', 'pgBusDropped'].map((k) => String(f[k])).join(' / '),
    },
  ];
}

/** What writes one at a time gave one mode: every frame's latency, and per write the first stream's. */
interface OneAtATime {
  latencies: number[];
  firstLatencies: number[];
  complete: boolean;
}

/**
 * `events` writes of note `name` per setup, one at a time: each is sent once every stream received the
 * previous one, so one event is in flight end to end and no queue forms anywhere. The setups take
 * turns write by write (their order reversed every other write), so a change in the machine's load
 * hits them alike, which matters for a difference of a millisecond.
 */
async function oneAtATime(
  setups: readonly { readers: readonly StreamReader[]; write: number }[],
  name: string,
  events: number,
): Promise<OneAtATime[]> {
  const writers = setups.map((setup) => noteWriter(setup.write));
  const out = setups.map((): OneAtATime => ({ latencies: [], firstLatencies: [], complete: true }));
  try {
    for (const writer of writers) await writer.put(`${name}-primer`, 0);
    const order = setups.map((_, i) => i);
    for (let k = 0; k < events; k++) {
      for (const m of k % 2 === 0 ? order : [...order].reverse()) {
        const { readers } = setups[m]!;
        const result = out[m]!;
        const base = readers.map((x) => x.events);
        const t = now();
        await writers[m]!.put(name, k);
        result.complete &&= await waitFor(() => readers.every((x, i) => x.events > (base[i] as number)), 10_000, 1);
        let first = Number.POSITIVE_INFINITY;
        readers.forEach((x, i) => {
          const idx = base[i] as number;
          if (idx >= x.events || idx >= x.times.length) return;
          const latency = (x.times[idx] as number) - t;
          result.latencies.push(latency);
          first = Math.min(first, latency);
        });
        if (Number.isFinite(first)) result.firstLatencies.push(first);
      }
    }
  } finally {
    for (const writer of writers) writer.close();
  }
  return out;
}
