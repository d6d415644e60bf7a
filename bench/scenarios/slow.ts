/**
 * slow consumer: one stream stops reading while its URI is flooded (memory measured after GC at
 * each checkpoint of `floods`); healthy streams listen to another URI updated every `every`th event.
 */
import { now } from '../../tools/shared/clock.ts';
import { percentile } from '../../tools/shared/stats.ts';
import {
  closeAll,
  lastFrame,
  openListen,
  openMany,
  publish,
  sleep,
  type StreamReader,
  usage,
  waitFor,
} from '../lib/client.ts';
import { noteUri } from '../lib/wire.ts';
import { type Figures, type RowSpec, type Scenario, type ScenarioResult, TARGETS } from '../scenario.ts';
import { num } from './rows.ts';

type Params = { healthy: number; floods: number[]; every: number; chunk: number };

export const slow: Scenario<Params> = {
  name: 'slow',
  title: 'slow consumer: one stream stops reading while its URI is flooded; healthy streams on another URI',
  full: { healthy: 100, floods: [20000, 100000], every: 100, chunk: 1000 },
  quick: { healthy: 50, floods: [20000, 40000], every: 100, chunk: 1000 },
  targets: TARGETS,
  timeoutMs: 300_000,
  rows: (p) => [
    ...p.floods.map((n, i): RowSpec => ({
      label: `slow consumer: server heap+external growth after GC, ${n} updates`,
      unit: 'MB',
      key: `growthMb@${n}`,
      digits: 2,
      ...(i === 0
        ? {}
        : { target: '≤ 1 MB', met: (v) => (Number.isFinite(num(v.ours)) ? num(v.ours) <= 1 : undefined) }),
    })),
    ...p.floods.map((n): RowSpec => ({
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
  async run(ports, targets, p) {
    const result: ScenarioResult = {};
    const A = noteUri(1_000_000);
    const B = noteUri(1_000_001);
    const C = noteUri(1_000_002);
    const total = p.floods[p.floods.length - 1] as number;
    for (const target of targets) {
      const port = ports[target];
      const healthy = await openMany(port, p.healthy, () => ({ resourceSubscriptions: [B] }), {
        capacity: Math.ceil(((p.floods[0] as number) + total) / p.every) + 8,
      });
      const stuck = await openListen(port, 'slow', { resourceSubscriptions: [A] }, { capture: true });
      stuck.pause();
      await sleep(300);
      // `count` events, every `every`th one an update of B (the healthy streams'), the others of
      // `other`, published `chunk` at a time; `at(n)` runs after the first n. Returns B's latencies.
      const phase = async (other: string, count: number, at: (n: number) => Promise<void>): Promise<number[]> => {
        const pattern = Array.from({ length: p.every }, (_, i) => (i === p.every - 1 ? B : other));
        const bTimes: number[] = [];
        const base = healthy.map((r) => r.events);
        for (let done = 0; done < count;) {
          const t = await publish(port, { kind: 'resource', count: p.chunk, uris: pattern });
          for (let k = p.every - 1; k < t.length; k += p.every) bTimes.push(t[k] as number);
          done += p.chunk;
          await at(done);
        }
        await waitFor(() => healthy.every((r, i) => r.events >= (base[i] as number) + bTimes.length), 60_000);
        const lat: number[] = [];
        healthy.forEach((r, i) => latencies(lat, r, base[i] as number, bTimes));
        return lat;
      };
      const baseline = await phase(C, p.floods[0] as number, async () => {});
      const m0 = await usage(port, true);
      const figures: Figures = {};
      const during = await phase(A, total, async (n) => {
        if (!p.floods.includes(n)) return;
        const m = await usage(port, true);
        figures[`growthMb@${n}`] = (m.mem.heapUsed + m.mem.external - (m0.mem.heapUsed + m0.mem.external)) / 1048576;
        figures[`rssGrowthMb@${n}`] = (m.mem.rss - m0.mem.rss) / 1048576;
      });
      const before = stuck.events;
      const resumedAt = now();
      stuck.resume();
      await waitFor(() => now() - Math.max(resumedAt, stuck.lastAt) > 500, 60_000, 20);
      const received = stuck.events - before;
      const last = lastFrame(stuck.text);
      const probeBefore = stuck.events;
      await publish(port, { kind: 'resource', count: 1, uris: [A] });
      const open = await waitFor(() => stuck.events > probeBefore, 3000);
      closeAll([...healthy, stuck]);
      result[target] = {
        ...figures,
        receivedOnResume: received,
        learnedLatest: last?.method === 'notifications/resources/updated' && last.params?.uri === A,
        stayedOpen: open,
        healthyP99BaselineMs: percentile(baseline, 99),
        healthyP99DuringMs: percentile(during, 99),
      };
      await sleep(500);
    }
    return result;
  },
};

/** Publish→receive latencies of stream `reader` for events `t` that it received as its frames `from…`. */
function latencies(out: number[], reader: StreamReader, from: number, t: readonly number[]): void {
  for (let k = 0; k < t.length; k++) {
    const idx = from + k;
    if (idx >= reader.events || idx >= reader.times.length) break;
    out.push((reader.times[idx] as number) - (t[k] as number));
  }
}
