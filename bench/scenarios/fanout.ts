/**
 * fan-out: N streams on toolsListChanged, E events back to back, R rounds. A server may coalesce
 * identical events for a socket that pushes back (ours does), so a stream is done when it has E
 * frames or when nothing has arrived anywhere for 300 ms and the server is idle; its last frame stands
 * for the last event.
 */
import { now } from '../../tools/shared/clock.ts';
import { median, percentile } from '../../tools/shared/stats.ts';
import { closeAll, cpuBetween, openMany, publish, sleep, usage, waitFor } from '../lib/client.ts';
import { collectRound } from '../lib/rounds.ts';
import { type Scenario, type ScenarioResult, WITH_FASTIFY } from '../scenario.ts';
import { atMost, fastifyRows, num } from './rows.ts';

type Params = { streams: number; events: number; rounds: number };

export const fanout: Scenario<Params> = {
  name: 'fanout',
  title: 'fan-out: streams on toolsListChanged, events published back to back',
  full: { streams: 1000, events: 200, rounds: 3 },
  quick: { streams: 300, events: 50, rounds: 3 },
  targets: WITH_FASTIFY,
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
    { label: 'fan-out: server CPU per frame written', unit: 'µs', key: 'cpuUsPerFrame', digits: 2 },
    { label: 'fan-out: every stream got the last event', unit: '', key: 'complete' },
  ],
  async run(ports, targets, p) {
    const result: ScenarioResult = {};
    for (const target of targets) {
      const port = ports[target];
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
      for (let r = 0; r < p.rounds; r++) {
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
        await sleep(200);
      }
      closeAll(readers);
      result[target] = {
        deliveriesPerSec: median(rates),
        framesPerSec: median(frameRates),
        framesPerStream: median(perStream),
        p50Ms: percentile(lat, 50),
        p99Ms: percentile(lat, 99),
        cpuUsPerDelivery: median(cpus),
        cpuUsPerFrame: median(frameCpus),
        complete,
      };
      await sleep(500);
    }
    return result;
  },
};
