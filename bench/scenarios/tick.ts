/**
 * one event per tick: N streams hold one note's URI, and K writes of that note go through each
 * server's own write route (`PUT /api/notes/alice/tick`), one request in flight at a time, so every
 * event is published in a tick of its own and there is nothing to batch: one socket write per stream
 * per event, for every server. Before any stream opens, the same K writes (after unmeasured ones)
 * measure each server's write route alone, CPU and round trip per request: the host's route (Express,
 * JSON, the notes service) costs far more than the ceiling's bare one, and that is the host app's
 * cost, not the library's, so the net figures subtract it. Then the streams open on every server, a warm-up burst per server, and
 * bursts of K writes alternate server by server (order reversed every other round); medians of the
 * rounds, percentiles of every frame.
 */
import { now } from '../../tools/shared/clock.ts';
import { median, percentile } from '../../tools/shared/stats.ts';
import { closeAll, cpuBetween, noteWriter, openMany, prefill, sleep, type StreamReader, usage } from '../lib/client.ts';
import { type Burst, writeBurst } from '../lib/rounds.ts';
import { PRINCIPAL } from '../lib/wire.ts';
import { type Scenario, type ScenarioResult, type Target, WITH_FASTIFY } from '../scenario.ts';
import { atMost, fastifyRows, num } from './rows.ts';

type Params = { streams: number; writes: number; warmup: number; rounds: number; routeWarmup: number };

export const tick: Scenario<Params> = {
  name: 'tick',
  title:
    "one event per tick: streams on one note's URI, each event from its own write request (PUT /api/notes/alice/tick), one in flight at a time",
  full: { streams: 1000, writes: 200, warmup: 20, rounds: 3, routeWarmup: 500 },
  quick: { streams: 200, writes: 50, warmup: 10, rounds: 1, routeWarmup: 200 },
  targets: WITH_FASTIFY,
  timeoutMs: 600_000,
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
    ...fastifyRows('tick: server CPU per delivery, net of the write route', 'µs', 'netCpuUsPerDelivery', 2, 1.0),
    ...fastifyRows('tick: write route alone, server CPU per write request', 'µs', 'routeCpuUs', 0),
    { label: 'tick: every stream got the last write', unit: '', key: 'complete' },
  ],
  async run(ports, targets, p) {
    const note = 'tick';
    const uri = `note://${PRINCIPAL}/${note}`;
    const route: Partial<Record<Target, RouteCost>> = {};
    for (const target of targets) {
      await prefill(ports[target], [uri]);
      route[target] = await writeRouteCost(ports[target], note, p.writes, p.routeWarmup);
    }
    const readers: Partial<Record<Target, StreamReader[]>> = {};
    const capacity = p.warmup + p.rounds * p.writes;
    for (const target of targets) {
      readers[target] = await openMany(ports[target], p.streams, () => ({ resourceSubscriptions: [uri] }), {
        capacity,
      });
    }
    await sleep(300);
    const bursts: Partial<Record<Target, Burst[]>> = {};
    for (const target of targets) {
      await writeBurst(readers[target]!, ports[target], [ports[target]], note, p.warmup);
      await sleep(200);
    }
    for (let r = 0; r < p.rounds; r++) {
      for (const target of r % 2 === 0 ? targets : [...targets].reverse()) {
        (bursts[target] ??= []).push(
          await writeBurst(readers[target]!, ports[target], [ports[target]], note, p.writes),
        );
        await sleep(200);
      }
    }
    closeAll(targets.flatMap((target) => readers[target]!));
    const result: ScenarioResult = {};
    for (const target of targets) {
      const list = bursts[target] ?? [];
      const alone = route[target]!;
      const lat = list.flatMap((x) => x.latencies);
      const cpuPerWrite = median(list.map((x) => x.cpuUsPerEvent[0] as number));
      result[target] = {
        routeCpuUs: alone.cpuUs,
        routeMs: alone.ms,
        deliveriesPerSec: median(list.map((x) => x.deliveriesPerSec)),
        // The time the writes' own round trips take with no stream open is not the fan-out's.
        netDeliveriesPerSec: median(
          list.map((x) => {
            const fanoutSeconds = x.seconds - (p.writes * alone.ms) / 1000;
            return fanoutSeconds > 0 ? (p.streams * p.writes) / fanoutSeconds : Number.NaN;
          }),
        ),
        framesPerStream: median(list.map((x) => x.framesPerStream)),
        framesPerChunk: median(list.map((x) => x.framesPerChunk)),
        p50Ms: percentile(lat, 50),
        p99Ms: percentile(lat, 99),
        cpuUsPerWrite: cpuPerWrite,
        cpuUsPerDelivery: cpuPerWrite / p.streams,
        netCpuUsPerDelivery: (cpuPerWrite - alone.cpuUs) / p.streams,
        complete: list.every((x) => x.complete),
      };
    }
    return result;
  },
};

/** What one server's write route costs alone: server CPU and round trip per write request. */
interface RouteCost {
  cpuUs: number;
  ms: number;
}

/**
 * `writes` writes of note `name` through the write route of `port`, one in flight at a time, while no
 * stream holds the note: the route's own cost (HTTP parsing, the framework, the app's service, the
 * answer), after `warmup` unmeasured writes (the route's cost still falls after a few hundred).
 */
async function writeRouteCost(port: number, name: string, writes: number, warmup: number): Promise<RouteCost> {
  const writer = noteWriter(port);
  try {
    for (let k = 0; k < warmup; k++) await writer.put(name, k);
    const u0 = await usage(port);
    const t0 = now();
    for (let k = 0; k < writes; k++) await writer.put(name, k);
    const ms = (now() - t0) / writes;
    const u1 = await usage(port);
    return { cpuUs: cpuBetween(u0, u1) / writes, ms };
  } finally {
    writer.close();
  }
}
