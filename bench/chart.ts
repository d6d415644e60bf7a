/**
 * The benchmark chart: a hand-written SVG (no chart library) of nine key figures, ours beside the
 * SDK's own listen and the `node:http` ceiling, from one run's report. The first two columns are the
 * fan-out (a burst published in one tick) and the tick scenario (one event per write request, net of
 * the write route), CPU per delivery above deliveries/s.
 */
import type { Figures, Target } from './scenario.ts';
import type { Report } from './report.ts';

/**
 * The chart's three series (the ceiling in Express, ours on Fastify, the ceiling in Fastify and ours with
 * metrics have rows of their own in the table and docs/performance.md; they are not charted).
 */
type Charted = Exclude<Target, 'ceiling-express' | 'ours-fastify' | 'ceiling-fastify' | 'ours-metrics'>;
const COLORS: Record<Charted, string> = { ours: '#0e7c66', sdk: '#d9622b', ceiling: '#8a8f98' };
const NAMES: Record<Charted, string> = { ours: 'mcp-subscriptions', sdk: 'SDK listen', ceiling: 'node:http ceiling' };
const ORDER: readonly Charted[] = ['ours', 'sdk', 'ceiling'];
const FONT = 'font-family="system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif"';

function esc(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

function fmt(value: number, digits: number): string {
  return value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

function niceMax(value: number): number {
  if (!(value > 0)) return 1;
  const exp = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 2.5, 5, 10]) if (value <= step * exp) return step * exp;
  return 10 * exp;
}

interface Box {
  readonly x: number;
  readonly y: number;
  readonly w: number;
  readonly h: number;
}

function frame(box: Box, title: string, subtitle: string): string {
  return [
    `<rect x="${box.x}" y="${box.y}" width="${box.w}" height="${box.h}" rx="8" fill="#ffffff" stroke="#d7dbe0"/>`,
    `<text x="${box.x + 14}" y="${box.y + 24}" ${FONT} font-size="14" font-weight="600" fill="#1f2328">${esc(title)}</text>`,
    `<text x="${box.x + 14}" y="${box.y + 42}" ${FONT} font-size="11.5" fill="#59636e">${esc(subtitle)}</text>`,
  ].join('\n');
}

/** Three horizontal bars, one per server, with their values. */
function bars(
  box: Box,
  title: string,
  subtitle: string,
  values: Partial<Record<Target, number>>,
  unit: string,
  digits: number,
): string {
  const out = [frame(box, title, subtitle)];
  const finite = ORDER.map((t) => values[t]).filter((v): v is number => v !== undefined && Number.isFinite(v));
  const max = niceMax(Math.max(0, ...finite));
  const left = box.x + 124;
  const width = box.w - 124 - 70;
  ORDER.forEach((target, i) => {
    const y = box.y + 60 + i * 34;
    const value = values[target];
    out.push(`<text x="${box.x + 14}" y="${y + 15}" ${FONT} font-size="12" fill="#1f2328">${NAMES[target]}</text>`);
    if (value === undefined || !Number.isFinite(value)) {
      out.push(`<text x="${left}" y="${y + 15}" ${FONT} font-size="12" fill="#8a8f98">n/a</text>`);
      return;
    }
    const w = Math.max(1, (Math.max(0, value) / max) * width);
    out.push(`<rect x="${left}" y="${y + 2}" width="${w.toFixed(1)}" height="18" rx="3" fill="${COLORS[target]}"/>`);
    out.push(
      `<text x="${(left + w + 6).toFixed(1)}" y="${y + 15}" ${FONT} font-size="12" fill="#1f2328">${esc(fmt(value, digits))}${esc(unit)}</text>`,
    );
  });
  return out.join('\n');
}

/** One line per server over the stages. */
function lines(
  box: Box,
  title: string,
  subtitle: string,
  xs: readonly number[],
  series: Partial<Record<Target, number[]>>,
  unit: string,
): string {
  const out = [frame(box, title, subtitle)];
  const all = ORDER.flatMap((t) => series[t] ?? []).filter((v) => Number.isFinite(v));
  const max = niceMax(Math.max(0, ...all));
  const left = box.x + 52;
  const right = box.x + box.w - 110;
  const top = box.y + 58;
  const bottom = box.y + box.h - 30;
  const xMax = Math.max(1, ...xs);
  const px = (x: number): number => left + (x / xMax) * (right - left);
  const py = (y: number): number => bottom - (Math.max(0, y) / max) * (bottom - top);
  for (const f of [0, 0.5, 1]) {
    const y = py(max * f);
    out.push(`<line x1="${left}" y1="${y.toFixed(1)}" x2="${right}" y2="${y.toFixed(1)}" stroke="#eceef1"/>`);
    out.push(
      `<text x="${left - 6}" y="${(y + 4).toFixed(1)}" ${FONT} font-size="11" fill="#59636e" text-anchor="end">${esc(fmt(max * f, max * f < 10 && f > 0 ? 1 : 0))}</text>`,
    );
  }
  for (const x of xs) {
    out.push(
      `<text x="${px(x).toFixed(1)}" y="${bottom + 16}" ${FONT} font-size="11" fill="#59636e" text-anchor="middle">${esc(fmt(x, 0))}</text>`,
    );
  }
  ORDER.forEach((target, i) => {
    const ys = series[target];
    if (ys === undefined || ys.length === 0) return;
    const points = ys.map((y, k) => `${px(xs[k] as number).toFixed(1)},${py(y).toFixed(1)}`).join(' ');
    out.push(`<polyline points="${points}" fill="none" stroke="${COLORS[target]}" stroke-width="2.5"/>`);
    const last = ys[ys.length - 1] as number;
    out.push(
      `<text x="${right + 8}" y="${(py(last) + 4 + (i - 1) * 2).toFixed(1)}" ${FONT} font-size="11.5" fill="${COLORS[target]}">${esc(fmt(last, last < 10 ? 1 : 0))}${esc(unit)}</text>`,
    );
  });
  out.push(
    `<text x="${(left + right) / 2}" y="${box.y + box.h - 4}" ${FONT} font-size="11" fill="#59636e" text-anchor="middle">open streams</text>`,
  );
  return out.join('\n');
}

function pick(report: Report, scenario: string, value: (f: Figures) => number): Partial<Record<Target, number>> {
  const result = report.scenarios[scenario]?.result ?? {};
  const out: Partial<Record<Target, number>> = {};
  for (const target of ORDER) {
    const figures = result[target];
    if (figures !== undefined) out[target] = value(figures);
  }
  return out;
}

const n = (v: unknown): number => (typeof v === 'number' ? v : Number.NaN);

/** Renders the report's key figures as one SVG document. */
export function renderChart(report: Report): string {
  const W = 1000;
  const pw = 318;
  const ph = 176;
  const gap = 13;
  const top = 70;
  const rows = 3;
  const boxes: Box[] = Array.from({ length: 3 * rows }, (_, i) => ({
    x: gap + (i % 3) * (pw + gap),
    y: top + Math.floor(i / 3) * (ph + gap),
    w: pw,
    h: ph,
  }));
  const H = top + rows * ph + (rows - 1) * gap + 40;
  const parts: string[] = [];
  const fan = report.scenarios['fanout'];
  parts.push(
    bars(
      boxes[0]!,
      'Fan-out: server CPU per delivery',
      fan
        ? `${String(fan.params['streams'])} streams × ${String(fan.params['events'])} events · lower is better`
        : 'not run',
      pick(report, 'fanout', (f) => n(f['cpuUsPerDelivery'])),
      ' µs',
      2,
    ),
  );
  const tick = report.scenarios['tick'];
  const tickSize = tick ? `${String(tick.params['streams'])} × ${String(tick.params['writes'])}` : '';
  parts.push(
    bars(
      boxes[1]!,
      'One event per tick: CPU per delivery',
      tick ? `${tickSize}, net of the write route · lower is better` : 'not run',
      pick(report, 'tick', (f) => n(f['netCpuUsPerDelivery'])),
      ' µs',
      2,
    ),
  );
  parts.push(
    bars(
      boxes[3]!,
      'Fan-out: deliveries/s',
      fan
        ? `${String(fan.params['streams'])} × ${String(fan.params['events'])} in one tick · higher is better`
        : 'not run',
      pick(report, 'fanout', (f) => n(f['deliveriesPerSec']) / 1000),
      ' k/s',
      0,
    ),
  );
  parts.push(
    bars(
      boxes[4]!,
      'One event per tick: deliveries/s',
      tick ? `${tickSize}, net of the write route · higher is better` : 'not run',
      pick(report, 'tick', (f) => n(f['netDeliveriesPerSec']) / 1000),
      ' k/s',
      1,
    ),
  );
  const res = report.scenarios['resources'];
  const stages = (res?.params['stages'] as number[] | undefined) ?? [];
  const series: Partial<Record<Target, number[]>> = {};
  for (const target of ORDER) {
    const figures = res?.result[target];
    if (figures !== undefined) series[target] = stages.map((s) => n(figures[`missCpuUs@${s}`]));
  }
  parts.push(
    lines(
      boxes[2]!,
      'Matching one resource update',
      'server CPU per update vs open streams (10 URIs each)',
      stages,
      series,
      ' µs',
    ),
  );
  const maxStage = stages[stages.length - 1] ?? 0;
  parts.push(
    bars(
      boxes[5]!,
      'Write route capacity kept',
      `by server CPU per request, ${maxStage} vs 0 streams open · higher is better`,
      pick(report, 'resources', (f) => (n(f[`writeCpuUs@${stages[0] ?? 0}`]) / n(f[`writeCpuUs@${maxStage}`])) * 100),
      ' %',
      0,
    ),
  );
  const slow = report.scenarios['slow'];
  const floods = (slow?.params['floods'] as number[] | undefined) ?? [];
  const flood = floods[floods.length - 1] ?? 0;
  parts.push(
    bars(
      boxes[6]!,
      'Slow consumer: server memory growth',
      `heap + external after GC, ${flood.toLocaleString('en-US')} updates to a stalled stream`,
      pick(report, 'slow', (f) => n(f[`growthMb@${flood}`])),
      ' MB',
      2,
    ),
  );
  const idle = report.scenarios['idle'];
  parts.push(
    bars(
      boxes[7]!,
      'Idle memory: heap per open stream',
      idle ? `${String(idle.params['streams'])} open streams, after GC · lower is better` : 'not run',
      pick(report, 'idle', (f) => n(f['heapKbPerStream'])),
      ' KB',
      1,
    ),
  );
  parts.push(
    bars(
      boxes[8]!,
      'Open: time to ack, 1,000 URIs (p50)',
      'our read check + subscribe hook per URI; the SDK runs none',
      pick(report, 'open', (f) => n(f['ackP50Ms'])),
      ' ms',
      2,
    ),
  );
  const m = report.machine;
  const title = `mcp-subscriptions vs the SDK's own listen vs a bare node:http ceiling`;
  const sub = `${report.mode} run, ${report.date.slice(0, 10)} · Node ${m.node} · ${m.cpus} × ${m.cpuModel} · servers and load generator on one machine (npm run bench)`;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" role="img" aria-label="${esc(title)}">`,
    `<rect width="${W}" height="${H}" fill="#f6f8fa"/>`,
    `<text x="${gap}" y="30" ${FONT} font-size="18" font-weight="700" fill="#1f2328">${esc(title)}</text>`,
    `<text x="${gap}" y="52" ${FONT} font-size="12" fill="#59636e">${esc(sub)}</text>`,
    ...parts,
    ...ORDER.map(
      (t, i) =>
        `<rect x="${gap + i * 170}" y="${H - 26}" width="12" height="12" rx="2" fill="${COLORS[t]}"/><text x="${gap + i * 170 + 18}" y="${H - 16}" ${FONT} font-size="12" fill="#1f2328">${NAMES[t]}</text>`,
    ),
    '</svg>',
    '',
  ].join('\n');
}
