/** validation: time to the answer of a listen naming 1k / 10k / 50k URIs. */
import http from 'node:http';
import { now } from '../../tools/shared/clock.ts';
import { median } from '../../tools/shared/stats.ts';
import { sleep } from '../lib/client.ts';
import { type Filter, listenBody, listenHeaders, noteUri } from '../lib/wire.ts';
import { type Figures, type RowSpec, type Scenario, type ScenarioResult, TARGETS } from '../scenario.ts';
import { num } from './rows.ts';

type Params = { sizes: number[]; reps: number };

export const validation: Scenario<Params> = {
  name: 'validation',
  title: 'validation: a listen naming 1k / 10k / 50k URIs, time to its answer (ack or error)',
  full: { sizes: [1000, 10000, 50000], reps: 5 },
  quick: { sizes: [1000, 10000, 50000], reps: 2 },
  targets: TARGETS,
  timeoutMs: 180_000,
  rows: (p) => [
    ...p.sizes.map((n): RowSpec => ({
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
  async run(ports, targets, p) {
    const result: ScenarioResult = {};
    for (const target of targets) {
      const figures: Figures = {};
      for (const size of p.sizes) {
        const filter: Filter = { resourceSubscriptions: Array.from({ length: size }, (_, i) => noteUri(i)) };
        const times: number[] = [];
        let status = 0;
        for (let r = 0; r < p.reps + 1; r++) {
          const answer = await timeListen(ports[target], `v${size}-${r}`, filter);
          if (r > 0) times.push(answer.ms);
          status = answer.status;
        }
        figures[`ms@${size}`] = median(times);
        figures[`status@${size}`] = status;
      }
      const small = p.sizes[0] as number;
      const large = p.sizes[p.sizes.length - 1] as number;
      figures['perUriGrowth'] =
        (figures[`ms@${large}`] as number) / large / ((figures[`ms@${small}`] as number) / small);
      result[target] = figures;
      await sleep(300);
    }
    return result;
  },
};

/** Sends one listen request; resolves with the time to its first frame or its whole error response. */
function timeListen(port: number, id: string, filter: Filter): Promise<{ ms: number; status: number }> {
  const body = listenBody(id, filter);
  return new Promise((resolve, reject) => {
    const t0 = now();
    const req = http.request(
      { host: '127.0.0.1', port, path: '/mcp', method: 'POST', headers: listenHeaders(body), agent: false },
      (res) => {
        const status = res.statusCode ?? 0;
        const finish = (): void => {
          resolve({ ms: now() - t0, status });
          req.destroy();
          res.destroy();
        };
        if (status === 200) {
          let seen = '';
          res.on('data', (chunk: Buffer) => {
            seen += chunk.toString();
            if (seen.includes('\n\n')) finish();
          });
        } else {
          res.resume();
          res.on('end', finish);
        }
      },
    );
    req.setTimeout(60_000, () => req.destroy(new Error('timed out')));
    req.on('error', reject);
    req.end(body);
  });
}
