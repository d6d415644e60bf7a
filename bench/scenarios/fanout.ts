/**
 * fan-out: N streams on toolsListChanged, E events back to back, R rounds. A server may coalesce
 * identical events for a socket that pushes back (ours does), so a stream is done when it has E
 * frames or when nothing has arrived anywhere for 300 ms and the server is idle; its last frame stands
 * for the last event. The servers run one after the other, except ours and ours with metrics, whose
 * rounds alternate: their figures are compared to within a few per cent, finer than the drift of a shared
 * machine from one server's rounds to the next's.
 */
import { now } from '../../tools/shared/clock.ts';
import { median, percentile } from '../../tools/shared/stats.ts';
import { closeAll, cpuBetween, openMany, publish, sleep, usage, waitFor } from '../lib/client.ts';
import { collectRound } from '../lib/rounds.ts';
import {
  type Figures,
  inTurns,
  type Scenario,
  type ScenarioResult,
  type Target,
  WITH_FASTIFY,
  withMetrics,
} from '../scenario.ts';
import { atMost, fastifyRows, metricsRow, num, scrapeRows } from './rows.ts';

type Params = { streams: number; events: number; rounds: number };

export const fanout: Scenario<Params> = {
  name: 'fanout',
  title: 'fan-out: streams on toolsListChanged, events published back to back',
  full: { streams: 1000, events: 200, rounds: 3 },
  quick: { streams: 300, events: 50, rounds: 3 },
  targets: withMetrics(WITH_FASTIFY),
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
    ...fastifyRows('fan-out: server CPU per delivery', 'µs', 'cpuUsPerDelivery', 2, 1.0),
    metricsRow('fan-out: server CPU per delivery', 'µs', 'cpuUsPerDelivery', 2),
    { label: 'fan-out: server CPU per frame written', unit: 'µs', key: 'cpuUsPerFrame', digits: 2 },
    { label: 'fan-out: every stream got the last event', unit: '', key: 'complete' },
    ...scrapeRows('fan-out'),
  ],
  async run(ports, targets, p) {
    const result: ScenarioResult = {};
    for (const turn of inTurns(targets)) {
      const servers: FanoutServer[] = [];
      for (const target of turn) servers.push(await prepare(target, ports[target], p));
      // Servers of one turn (ours and ours with metrics) alternate round by round, order reversed every
      // other round, so that what else runs on the machine weighs on both alike.
      for (let r = 0; r < p.rounds; r++) {
        for (const server of r % 2 === 0 ? servers : [...servers].reverse()) {
          await server.round();
          await sleep(200);
        }
      }
      for (const server of servers) {
        server.close();
        result[server.target] = server.figures();
      }
      await sleep(500);
    }
    return result;
  },
};

/** One server's streams and the figures of its rounds. */
interface FanoutServer {
  readonly target: Target;
  round(): Promise<void>;
  figures(): Figures;
  close(): void;
}

/** Opens the streams on one server and sends it the unmeasured burst. */
async function prepare(target: Target, port: number, p: Params): Promise<FanoutServer> {
  const readers = await openMany(port, p.streams, () => ({ toolsListChanged: true }), {
    capacity: 20 + p.events * p.rounds,
  });
  await sleep(300);
  // One unmeasured burst first, so every server's write path is compiled before the figures count: 20
  // events (under a socket's high-water mark, so no server coalesces them), each stream waited for.
  const warmup = Math.min(20, p.events);
  const warm = readers.map((x) => x.events + warmup);
  await publish(port, { kind: 'tools', count: warmup });
  await waitFor(() => readers.every((x, i) => x.events >= (warm[i] as number)), 60_000, 10);
  await sleep(200);
  const rates: number[] = [];
  const frameRates: number[] = [];
  const cpus: number[] = [];
  const frameCpus: number[] = [];
  const perStream: number[] = [];
  const lat: number[] = [];
  let complete = true;
  return {
    target,
    async round() {
      const base = readers.map((x) => x.events);
      const u0 = await usage(port);
      const t = await publish(port, { kind: 'tools', count: p.events });
      const published = now();
      const round = await collectRound(readers, base, t, p.events, published, lat, port);
      const u1 = await usage(port);
      const { frames, last } = round;
      if (!round.complete) complete = false;
      const seconds = (last - (t[0] as number)) / 1000;
      const offered = p.streams * p.events;
      rates.push(offered / seconds);
      frameRates.push(frames / seconds);
      cpus.push(cpuBetween(u0, u1) / offered);
      frameCpus.push(cpuBetween(u0, u1) / frames);
      perStream.push(frames / p.streams);
    },
    figures: () => ({
      deliveriesPerSec: median(rates),
      framesPerSec: median(frameRates),
      framesPerStream: median(perStream),
      p50Ms: percentile(lat, 50),
      p99Ms: percentile(lat, 99),
      cpuUsPerDelivery: median(cpus),
      cpuUsPerFrame: median(frameCpus),
      complete,
    }),
    close: () => closeAll(readers),
  };
}
