/** resource fan-out: streams × URIs each, stages of open streams, write route and publish bursts. */
import { percentile, prng, slope } from '../../tools/shared/stats.ts';
import {
  closeAll,
  cpuBetween,
  hammer,
  openMany,
  prefill,
  publish,
  sleep,
  type StreamReader,
  usage,
  waitFor,
} from '../lib/client.ts';
import { type Filter, noteUri, TOKEN } from '../lib/wire.ts';
import { type Figures, type RowSpec, type Scenario, type ScenarioResult, TARGETS } from '../scenario.ts';
import { num } from './rows.ts';

type Params = {
  streams: number;
  urisPerStream: number;
  stages: number[];
  writeMs: number;
  concurrency: number;
  burst: number;
  seed: number;
};

export const resources: Scenario<Params> = {
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
    const stages = p.stages;
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
  async run(ports, targets, p) {
    const result: ScenarioResult = {};
    const pool = p.streams * p.urisPerStream;
    const uris = Array.from({ length: pool }, (_, i) => noteUri(i));
    const filter = (i: number): Filter => ({
      resourceSubscriptions: uris.slice(i * p.urisPerStream, (i + 1) * p.urisPerStream),
    });
    const writeBody = JSON.stringify({ text: 'updated' });
    const writeHeaders = { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` };
    for (const target of targets) {
      const port = ports[target];
      await prefill(port, uris);
      const rand = prng(p.seed);
      const readers: StreamReader[] = [];
      const figures: Figures = {};
      const xs: number[] = [];
      const publishCpu: number[] = [];
      const writeCpu: number[] = [];
      let complete = true;
      // Warm the write route's code paths: the first stage must not pay for the JIT.
      await hammer(port, { durationMs: p.writeMs, concurrency: p.concurrency }, () => ({
        method: 'PUT',
        path: `/api/notes/alice/n${Math.floor(rand() * pool)}`,
        body: writeBody,
        headers: writeHeaders,
      }));
      const hitXs: number[] = [];
      const hitCpu: number[] = [];
      for (const stage of p.stages) {
        if (readers.length < stage) {
          readers.push(
            ...(await openMany(port, stage - readers.length, filter, { from: readers.length, capacity: 256 })),
          );
          await sleep(300);
        }
        const w0 = await usage(port);
        const writes = await hammer(port, { durationMs: p.writeMs, concurrency: p.concurrency }, () => ({
          method: 'PUT',
          path: `/api/notes/alice/n${Math.floor(rand() * pool)}`,
          body: writeBody,
          headers: writeHeaders,
        }));
        const w1 = await usage(port);
        figures[`writeRps@${stage}`] = writes.requests / (writes.elapsedMs / 1000);
        figures[`writeCpuUs@${stage}`] = cpuBetween(w0, w1) / writes.requests;
        writeCpu.push(cpuBetween(w0, w1) / writes.requests);
        // Let deliveries of the write phase land before the bursts.
        await sleep(200);
        // Matching alone: updates of URIs no stream holds, so nothing is written at any stage.
        const misses = Array.from({ length: p.burst }, () => noteUri(pool + Math.floor(rand() * pool)));
        const m0 = await usage(port);
        await publish(port, { kind: 'resource', count: p.burst, uris: misses });
        const m1 = await usage(port);
        xs.push(stage / 1000);
        publishCpu.push(cpuBetween(m0, m1) / p.burst);
        figures[`missCpuUs@${stage}`] = cpuBetween(m0, m1) / p.burst;
        if (stage === 0) continue;
        // Matching and delivery: updates of random URIs held by exactly one open stream each.
        const order = Array.from(
          { length: p.burst },
          () => uris[Math.floor(rand() * stage * p.urisPerStream)] as string,
        );
        const base = readers.map((r) => r.events);
        const before = sum(readers);
        const u0 = await usage(port);
        const t = await publish(port, { kind: 'resource', count: p.burst, uris: order });
        const ok = await waitFor(() => sum(readers) - before >= p.burst, 60_000);
        const u1 = await usage(port);
        complete &&= ok;
        hitXs.push(stage / 1000);
        hitCpu.push(cpuBetween(u0, u1) / p.burst);
        figures[`hitCpuUs@${stage}`] = cpuBetween(u0, u1) / p.burst;
        if (stage === p.stages[p.stages.length - 1]) {
          const seen = new Int32Array(readers.length);
          const lat: number[] = [];
          let last = 0;
          for (let k = 0; k < order.length; k++) {
            const uri = order[k] as string;
            const s = Math.floor(Number(uri.slice(uri.lastIndexOf('n') + 1)) / p.urisPerStream);
            const reader = readers[s];
            if (reader === undefined) continue;
            const idx = (base[s] as number) + (seen[s] as number);
            seen[s]!++;
            if (idx < reader.events && idx < reader.times.length) {
              const at = reader.times[idx] as number;
              lat.push(at - (t[k] as number));
              last = Math.max(last, at);
            }
          }
          figures['deliveredPerSec'] = (sum(readers) - before) / ((last - (t[0] as number)) / 1000);
          figures['p50Ms'] = percentile(lat, 50);
          figures['p99Ms'] = percentile(lat, 99);
        }
      }
      figures['hitSlopeUs'] = slope(hitXs, hitCpu);
      const first = p.stages[0] as number;
      const lastStage = p.stages[p.stages.length - 1] as number;
      figures['retention'] = (figures[`writeRps@${lastStage}`] as number) / (figures[`writeRps@${first}`] as number);
      figures['publishSlopeUs'] = slope(xs, publishCpu);
      figures['writeSlopeUs'] = slope(xs, writeCpu);
      figures['complete'] = complete;
      closeAll(readers);
      result[target] = figures;
      await sleep(500);
    }
    return result;
  },
};

const sum = (readers: readonly StreamReader[]): number => readers.reduce((a, r) => a + r.events, 0);
