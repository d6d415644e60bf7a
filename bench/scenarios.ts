/**
 * The ten scenarios: their parameters (full and quick), what each measures, and the figures the
 * table shows with their targets. The load generator (`load.ts`) implements them; this file only
 * describes and judges.
 */
import type { Figures, ScenarioResult, Target } from './load.ts';

/** The table's columns. */
export const TARGETS: readonly Target[] = ['ours', 'sdk', 'ceiling'];
/** The columns plus the ceiling mounted in Express, for the scenarios whose figures Express weighs on. */
const WITH_FRAMEWORK: readonly Target[] = [...TARGETS, 'ceiling-express'];

/**
 * A row that puts the ceiling-in-Express's figure in the ceiling column, beside ours: ours/ceiling
 * then reads "ours against the same bare work served through Express". No target: it explains.
 */
function frameworkRow(label: string, unit: string, key: string, digits: number): RowSpec {
  return {
    label,
    unit,
    digits,
    only: ['ours', 'ceiling'],
    value: (figures, all) => (figures === all.ceiling ? all['ceiling-express']?.[key] : figures[key]),
    note: "the ceiling column holds the ceiling mounted in Express behind the host's auth (same code, no library): the framework's own share",
  };
}

/** One row of the table. */
export interface RowSpec {
  readonly label: string;
  readonly unit: string;
  /** Read the figure for one target from its results (default: `figures[key]`). */
  readonly key?: string;
  readonly value?: (figures: Figures, all: ScenarioResult) => number | boolean | string | undefined;
  /** Targets the figure applies to; the others show `n/a`. */
  readonly only?: readonly Target[];
  readonly digits?: number;
  readonly target?: string;
  /** Whether the target is met, from every target's value of this row. */
  readonly met?: (
    values: Partial<Record<Target, number | boolean | string | undefined>>,
    all: ScenarioResult,
  ) => boolean | undefined;
  /** A note for the reader (e.g. what the SDK does not do). */
  readonly note?: string;
}

export interface ScenarioSpec {
  readonly name: string;
  readonly title: string;
  readonly full: Record<string, unknown>;
  readonly quick: Record<string, unknown>;
  /** Which servers it runs against. */
  readonly targets: readonly Target[];
  /**
   * Also run node A and node B: two `ours` joined by a `RedisBus` on one Redis. Without a Redis that
   * answers, the scenario is skipped with the reason (a failure under CI).
   */
  readonly redisNodes?: boolean;
  readonly timeoutMs: number;
  readonly rows: (params: any) => RowSpec[];
}

const num = (v: unknown): number => (typeof v === 'number' ? v : Number.NaN);
const NO_BUS = 'the SDK and the ceiling have no distributed bus (that is the point): single process only';
const atMost = (factor: number) => (values: Partial<Record<Target, unknown>>) =>
  Number.isFinite(num(values.ours)) && Number.isFinite(num(values.ceiling))
    ? num(values.ours) <= factor * num(values.ceiling)
    : undefined;

export const SCENARIOS: readonly ScenarioSpec[] = [
  {
    name: 'fanout',
    title: 'fan-out: streams on toolsListChanged, events published back to back',
    full: { streams: 1000, events: 200, rounds: 3 },
    quick: { streams: 300, events: 50, rounds: 3 },
    targets: TARGETS,
    timeoutMs: 240_000,
    rows: (p) => [
      {
        label: `fan-out ${p.streams}×${p.events}: deliveries/s (stream × event, until each stream has the last)`,
        unit: '/s',
        key: 'deliveriesPerSec',
        digits: 0,
        target: '≥ 0.95× ceiling',
        met: (v) => (Number.isFinite(num(v.ours)) ? num(v.ours) >= 0.95 * num(v.ceiling) : undefined),
      },
      { label: `fan-out: frames received per stream (of ${p.events})`, unit: '', key: 'framesPerStream', digits: 1 },
      { label: 'fan-out: frames received/s', unit: '/s', key: 'framesPerSec', digits: 0 },
      { label: 'fan-out: publish→receive p50', unit: 'ms', key: 'p50Ms', digits: 1 },
      { label: 'fan-out: publish→receive p99', unit: 'ms', key: 'p99Ms', digits: 1 },
      {
        label: 'fan-out: server CPU per delivery (stream × event)',
        unit: 'µs',
        key: 'cpuUsPerDelivery',
        digits: 2,
        target: '≤ 1.0× ceiling',
        met: atMost(1.0),
      },
      { label: 'fan-out: server CPU per frame written', unit: 'µs', key: 'cpuUsPerFrame', digits: 2 },
      { label: 'fan-out: every stream got the last event', unit: '', key: 'complete' },
    ],
  },
  {
    name: 'tick',
    title:
      "one event per tick: streams on one note's URI, each event from its own write request (PUT /api/notes/alice/tick), one in flight at a time",
    full: { streams: 1000, writes: 200, warmup: 20, rounds: 3, routeWarmup: 500 },
    quick: { streams: 200, writes: 50, warmup: 10, rounds: 1, routeWarmup: 200 },
    targets: TARGETS,
    timeoutMs: 300_000,
    rows: (p) => [
      {
        label: `tick ${p.streams}×${p.writes}: write route alone (no stream open), server CPU per write request`,
        unit: 'µs',
        key: 'routeCpuUs',
        digits: 0,
      },
      { label: 'tick: write route alone, round trip per write request', unit: 'ms', key: 'routeMs', digits: 3 },
      {
        label: 'tick: deliveries/s, gross (stream × event, until each stream has the last)',
        unit: '/s',
        key: 'deliveriesPerSec',
        digits: 0,
      },
      {
        label: "tick: deliveries/s, net of the write route's round trips (target on this figure)",
        unit: '/s',
        key: 'netDeliveriesPerSec',
        digits: 0,
        target: '≥ 0.95× ceiling',
        met: (v) => (Number.isFinite(num(v.ours)) ? num(v.ours) >= 0.95 * num(v.ceiling) : undefined),
      },
      { label: `tick: frames received per stream (of ${p.writes})`, unit: '', key: 'framesPerStream', digits: 1 },
      { label: 'tick: frames per client read (1 = no batching)', unit: '', key: 'framesPerChunk', digits: 2 },
      { label: 'tick: write sent → frame received p50', unit: 'ms', key: 'p50Ms', digits: 2 },
      { label: 'tick: write sent → frame received p99', unit: 'ms', key: 'p99Ms', digits: 2 },
      {
        label: `tick: server CPU per write request, ${p.streams} streams open`,
        unit: 'µs',
        key: 'cpuUsPerWrite',
        digits: 0,
      },
      {
        label: 'tick: server CPU per delivery, gross (write route + fan-out)',
        unit: 'µs',
        key: 'cpuUsPerDelivery',
        digits: 2,
      },
      {
        label: 'tick: server CPU per delivery, net of the write route (target on this figure)',
        unit: 'µs',
        key: 'netCpuUsPerDelivery',
        digits: 2,
        target: '≤ 1.0× ceiling',
        met: atMost(1.0),
      },
      { label: 'tick: every stream got the last write', unit: '', key: 'complete' },
    ],
  },
  {
    name: 'resources',
    title: 'resource fan-out: streams × URIs each, the write route and publish bursts to random URIs',
    full: {
      streams: 2000,
      urisPerStream: 10,
      stages: [0, 500, 1000, 2000],
      writeMs: 3000,
      concurrency: 8,
      burst: 4000,
      seed: 7,
    },
    quick: {
      streams: 400,
      urisPerStream: 10,
      stages: [0, 100, 200, 400],
      writeMs: 500,
      concurrency: 8,
      burst: 1000,
      seed: 7,
    },
    targets: TARGETS,
    timeoutMs: 600_000,
    rows: (p) => {
      const stages = p.stages as number[];
      const max = stages[stages.length - 1] as number;
      return [
        ...stages.map((n): RowSpec => ({
          label: `resources: write route req/s, ${n} streams open`,
          unit: '/s',
          key: `writeRps@${n}`,
          digits: 0,
        })),
        ...stages.map((n): RowSpec => ({
          label: `resources: server CPU per write request, ${n} open`,
          unit: 'µs',
          key: `writeCpuUs@${n}`,
          digits: 0,
        })),
        {
          label: `resources: write route server capacity kept at ${max}×${p.urisPerStream} (by CPU)`,
          unit: '%',
          value: (f) => (num(f[`writeCpuUs@${stages[0]}`]) / num(f[`writeCpuUs@${max}`])) * 100,
          digits: 1,
          target: '≥ 90%',
          met: (v) => (Number.isFinite(num(v.ours)) ? num(v.ours) >= 90 : undefined),
        },
        {
          label: `resources: write route throughput kept at ${max}×${p.urisPerStream}`,
          unit: '%',
          value: (f) => num(f['retention']) * 100,
          digits: 1,
          target: '≥ 90%',
          met: (v) => (Number.isFinite(num(v.ours)) ? num(v.ours) >= 90 : undefined),
        },
        ...stages.map((n): RowSpec => ({
          label: `resources: server CPU per update nobody holds, ${n} open`,
          unit: 'µs',
          key: `missCpuUs@${n}`,
          digits: 1,
        })),
        {
          label: 'resources: matching slope (CPU per update per 1,000 streams)',
          unit: 'µs',
          key: 'publishSlopeUs',
          digits: 2,
          target: '≤ 5 µs',
          met: (v) => (Number.isFinite(num(v.ours)) ? num(v.ours) <= 5 : undefined),
        },
        ...stages.slice(1).map((n): RowSpec => ({
          label: `resources: server CPU per update one stream holds, ${n} open`,
          unit: 'µs',
          key: `hitCpuUs@${n}`,
          digits: 1,
        })),
        { label: 'resources: slope of the latter per 1,000 streams', unit: 'µs', key: 'hitSlopeUs', digits: 2 },
        { label: 'resources: write route CPU slope per 1,000 streams', unit: 'µs', key: 'writeSlopeUs', digits: 1 },
        { label: `resources: delivered/s at ${max} streams`, unit: '/s', key: 'deliveredPerSec', digits: 0 },
        { label: 'resources: publish→receive p50', unit: 'ms', key: 'p50Ms', digits: 2 },
        { label: 'resources: publish→receive p99', unit: 'ms', key: 'p99Ms', digits: 2 },
      ];
    },
  },
  {
    name: 'slow',
    title: 'slow consumer: one stream stops reading while its URI is flooded; healthy streams on another URI',
    full: { healthy: 100, floods: [20000, 100000], every: 100, chunk: 1000 },
    quick: { healthy: 50, floods: [20000, 40000], every: 100, chunk: 1000 },
    targets: TARGETS,
    timeoutMs: 300_000,
    rows: (p) => [
      ...(p.floods as number[]).map((n, i): RowSpec => ({
        label: `slow consumer: server heap+external growth after GC, ${n} updates`,
        unit: 'MB',
        key: `growthMb@${n}`,
        digits: 2,
        ...(i === 0
          ? {}
          : { target: '≤ 1 MB', met: (v) => (Number.isFinite(num(v.ours)) ? num(v.ours) <= 1 : undefined) }),
      })),
      ...(p.floods as number[]).map((n): RowSpec => ({
        label: `slow consumer: RSS growth, ${n} updates`,
        unit: 'MB',
        key: `rssGrowthMb@${n}`,
        digits: 1,
      })),
      { label: 'slow consumer: frames received on resume', unit: '', key: 'receivedOnResume', digits: 0 },
      {
        label: 'slow consumer: last frame on resume is the latest update',
        unit: '',
        key: 'learnedLatest',
        target: 'yes',
        met: (v) => v.ours === true,
      },
      {
        label: 'slow consumer: stream still open afterwards',
        unit: '',
        key: 'stayedOpen',
        target: 'yes',
        met: (v) => v.ours === true,
      },
      {
        label: `slow consumer: ${p.healthy} healthy streams' p99, before`,
        unit: 'ms',
        key: 'healthyP99BaselineMs',
        digits: 2,
      },
      {
        label: "slow consumer: healthy streams' p99, meanwhile",
        unit: 'ms',
        key: 'healthyP99DuringMs',
        digits: 2,
        target: '≤ 1.5× before, or +1 ms',
        met: (_v, all) => {
          const before = num(all.ours?.['healthyP99BaselineMs']);
          const during = num(all.ours?.['healthyP99DuringMs']);
          return Number.isFinite(during) ? during <= Math.max(1.5 * before, before + 1) : undefined;
        },
      },
    ],
  },
  {
    name: 'idle',
    title: 'idle memory: open streams (toolsListChanged + 10 URIs each), heap and RSS per stream after GC',
    full: { streams: 2000, warmup: 50 },
    quick: { streams: 500, warmup: 20 },
    targets: WITH_FRAMEWORK,
    timeoutMs: 180_000,
    rows: (p) => [
      {
        label: `idle: heap per open stream (${p.streams} open)`,
        unit: 'KB',
        key: 'heapKbPerStream',
        digits: 2,
        target: '≤ 1.0× ceiling',
        met: atMost(1.0),
      },
      frameworkRow('idle: heap per open stream, against the ceiling in Express', 'KB', 'heapKbPerStream', 2),
      { label: 'idle: external memory per open stream', unit: 'KB', key: 'externalKbPerStream', digits: 2 },
      { label: 'idle: RSS per open stream', unit: 'KB', key: 'rssKbPerStream', digits: 1 },
    ],
  },
  {
    name: 'open',
    title: 'open cost: listen naming 1,000 URIs, each through the read check and subscribe hook, one at a time',
    full: { samples: 200, warmup: 20, uris: 1000 },
    quick: { samples: 40, warmup: 10, uris: 1000 },
    targets: WITH_FRAMEWORK,
    timeoutMs: 180_000,
    rows: (p) => [
      {
        label: `open ${p.uris} URIs: time to ack p50`,
        unit: 'ms',
        key: 'ackP50Ms',
        digits: 2,
        target: '≤ 1.0× ceiling',
        met: atMost(1.0),
        note: 'the SDK runs no read check or subscribe hook',
      },
      frameworkRow('open: time to ack p50, against the ceiling in Express', 'ms', 'ackP50Ms', 2),
      { label: 'open: time to ack p99', unit: 'ms', key: 'ackP99Ms', digits: 2 },
      { label: 'open: server CPU per listen (open, ack, close)', unit: 'µs', key: 'cpuUsPerOpen', digits: 0 },
      frameworkRow('open: server CPU per listen, against the ceiling in Express', 'µs', 'cpuUsPerOpen', 0),
      { label: 'open: URIs honoured in the ack', unit: '', key: 'honored', digits: 0 },
    ],
  },
  {
    name: 'passthrough',
    title: 'pass-through: tools/list requests/s through the host app, with and without the middleware (the SDK build)',
    full: { rounds: 6, durationMs: 2000, concurrency: 8 },
    quick: { rounds: 2, durationMs: 700, concurrency: 8 },
    targets: ['ours', 'sdk'],
    timeoutMs: 180_000,
    rows: () => [
      { label: 'pass-through: tools/list req/s', unit: '/s', key: 'rps', digits: 0, only: ['ours', 'sdk'] },
      {
        label: 'pass-through: server CPU per request',
        unit: 'µs',
        key: 'cpuUsPerRequest',
        digits: 0,
        only: ['ours', 'sdk'],
      },
      {
        label: 'pass-through: overhead of the middleware',
        unit: '%',
        value: (f, all) => (1 - num(f['rps']) / num(all.sdk?.['rps'])) * 100,
        only: ['ours'],
        digits: 1,
        target: '≤ 3%',
        met: (v) => (Number.isFinite(num(v.ours)) ? num(v.ours) <= 3 : undefined),
      },
    ],
  },
  {
    name: 'validation',
    title: 'validation: a listen naming 1k / 10k / 50k URIs, time to its answer (ack or error)',
    full: { sizes: [1000, 10000, 50000], reps: 5 },
    quick: { sizes: [1000, 10000, 50000], reps: 2 },
    targets: TARGETS,
    timeoutMs: 180_000,
    rows: (p) => [
      ...(p.sizes as number[]).map((n): RowSpec => ({
        label: `validation: ${n} URIs, time to answer (HTTP status)`,
        unit: 'ms',
        value: (f) => `${num(f[`ms@${n}`]).toFixed(2)} (${String(f[`status@${n}`])})`,
      })),
      {
        label: 'validation: per-URI cost at the largest vs the smallest size',
        unit: '×',
        key: 'perUriGrowth',
        digits: 2,
        target: '≤ 2× (linear or better)',
        met: (v) => (Number.isFinite(num(v.ours)) ? num(v.ours) <= 2 : undefined),
      },
    ],
  },
  {
    name: 'disconnect',
    title: 'disconnect: idle clients hang up at once; streams the server still counts afterwards',
    full: { streams: 1000, checksMs: [1000, 5000] },
    quick: { streams: 300, checksMs: [1000, 2000] },
    targets: TARGETS,
    timeoutMs: 120_000,
    rows: (p) => {
      const checks = p.checksMs as number[];
      return checks.map((at, i): RowSpec => ({
        label: `disconnect: of ${p.streams} hung up, still counted after ${at / 1000} s`,
        unit: '',
        key: `openAfter${at}`,
        digits: 0,
        ...(i === 0 ? { target: '0', met: (v) => (typeof v.ours === 'number' ? v.ours === 0 : undefined) } : {}),
      }));
    },
  },
  {
    name: 'crossnode',
    title:
      "cross-node: streams on node A, writes through node B's write route, a RedisBus between; the same load on one node",
    full: { streams: 1000, events: 100, paced: 90, warmup: 20, rounds: 3 },
    quick: { streams: 200, events: 50, paced: 20, warmup: 10, rounds: 1 },
    targets: ['ours'],
    redisNodes: true,
    timeoutMs: 180_000,
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
          target: '≤ single node + 1 ms',
          met: plusOneMs('singleP50Ms', 'crossP50Ms'),
        },
        { label: 'crossnode: single node, publish→receive p99, writes back to back', unit: 'ms', key: 'singleP99Ms' },
        { label: 'crossnode: cross-node, publish→receive p99, writes back to back', unit: 'ms', key: 'crossP99Ms' },
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
          value: (f) =>
            `${num(f['singlePacedFirstP50Ms']).toFixed(2)} / ${num(f['crossPacedFirstP50Ms']).toFixed(2)} ms`,
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
        { label: 'crossnode: every stream got the last write, every mode', unit: '', key: 'complete' },
      ];
    },
  },
];
