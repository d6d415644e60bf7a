/** Turns scenario results into table rows (values, ratios, targets) and prints them. */
import { type Scenario, type ScenarioResult, type Target, TARGETS } from './scenario.ts';

type Value = number | boolean | string | undefined;

/** One row of the table, as printed and as stored in the JSON. */
export interface Row {
  readonly scenario: string;
  readonly label: string;
  readonly unit: string;
  readonly digits: number;
  readonly values: Partial<Record<Target, Value>>;
  readonly oursVsSdk: number | undefined;
  readonly oursVsCeiling: number | undefined;
  readonly target: string;
  readonly met: boolean | undefined;
  readonly note?: string;
}

export interface Report {
  date: string;
  mode: 'quick' | 'full';
  machine: {
    node: string;
    platform: string;
    cpus: number;
    cpuModel: string;
    memoryGb: number;
    /** The 1-minute load average when the run started: other work on the machine skews every figure. */
    loadAvg?: number;
  };
  git: { commit: string; engineDirty: boolean };
  scenarios: Record<
    string,
    { title: string; params: Record<string, unknown>; result: ScenarioResult; skipped?: string }
  >;
  rows: Row[];
  durationS: number;
}

function ratio(a: Value, b: Value): number | undefined {
  return typeof a === 'number' && typeof b === 'number' && Number.isFinite(a) && Number.isFinite(b) && b !== 0
    ? a / b
    : undefined;
}

export function buildRows(spec: Scenario, params: Record<string, unknown>, result: ScenarioResult): Row[] {
  return spec.rows(params).map((row) => {
    const values: Partial<Record<Target, Value>> = {};
    for (const target of TARGETS) {
      const figures = result[target];
      if (figures === undefined || (row.only !== undefined && !row.only.includes(target))) continue;
      values[target] = row.value !== undefined ? row.value(figures, result) : figures[row.key ?? ''];
    }
    return {
      scenario: spec.name,
      label: row.label,
      unit: row.unit,
      digits: row.digits ?? 2,
      values,
      oursVsSdk: ratio(values.ours, values.sdk),
      oursVsCeiling: ratio(values.ours, values.ceiling),
      target: row.target ?? '',
      met: row.met?.(values, result),
      ...(row.note !== undefined ? { note: row.note } : {}),
    };
  });
}

/** The one row of a scenario that could not run here, saying why. */
export function skippedRow(spec: Scenario, reason: string): Row {
  return {
    scenario: spec.name,
    label: `${spec.name}: skipped`,
    unit: '',
    digits: 0,
    values: {},
    oursVsSdk: undefined,
    oursVsCeiling: undefined,
    target: '',
    met: undefined,
    note: reason,
  };
}

/** A value as the table shows it. */
export function formatValue(value: Value, digits: number, unit: string): string {
  if (value === undefined) return 'n/a';
  if (typeof value === 'boolean') return value ? 'yes' : 'no';
  if (typeof value === 'string') return value;
  if (!Number.isFinite(value)) return 'n/a';
  const text = value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
  return unit === '' || unit === '/s' || unit === '×' ? text : `${text} ${unit}`;
}

const formatRatio = (r: number | undefined): string =>
  r === undefined ? '' : `${r.toLocaleString('en-US', { maximumFractionDigits: r < 10 ? 2 : 0 })}×`;

/** The table: one row per figure; `withScenario` adds nothing but keeps labels as they are. */
export function formatTable(rows: readonly Row[], withHeader: boolean): string {
  const header = ['figure', 'ours', 'SDK', 'ceiling', 'ours/SDK', 'ours/ceiling', 'target', 'met?'];
  const lines = rows.map((row) => [
    row.label,
    formatValue(row.values.ours, row.digits, row.unit),
    formatValue(row.values.sdk, row.digits, row.unit),
    formatValue(row.values.ceiling, row.digits, row.unit),
    formatRatio(row.oursVsSdk),
    formatRatio(row.oursVsCeiling),
    row.target,
    row.target === '' ? '' : row.met === undefined ? '?' : row.met ? 'met' : 'NOT MET',
  ]);
  const all = [header, ...lines];
  const widths = header.map((_, c) => Math.max(...all.map((line) => (line[c] ?? '').length)));
  const render = (line: string[]): string =>
    line.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join(' │ ');
  const rule = widths.map((w) => '─'.repeat(w)).join('─┼─');
  const body = lines.map(render);
  // Notes say why a figure is n/a or not comparable (the SDK runs no checks, has no bus; why a scenario was skipped).
  const notes = rows.filter((row) => row.note !== undefined).map((row) => `note (${row.label}): ${row.note}`);
  return (withHeader ? [render(header), rule, ...body] : [render(header), rule, ...body])
    .concat(notes)
    .map((l) => `  ${l}`)
    .join('\n');
}

/** The same table in Markdown, for docs/performance.md. */
export function markdownTable(rows: readonly Row[]): string {
  const out = [
    '| figure | ours | SDK | ceiling | ours/SDK | ours/ceiling | target | met? |',
    '| --- | ---: | ---: | ---: | ---: | ---: | --- | --- |',
  ];
  for (const row of rows) {
    out.push(
      `| ${row.label} | ${formatValue(row.values.ours, row.digits, row.unit)} | ${formatValue(row.values.sdk, row.digits, row.unit)} | ${formatValue(row.values.ceiling, row.digits, row.unit)} | ${formatRatio(row.oursVsSdk)} | ${formatRatio(row.oursVsCeiling)} | ${row.target} | ${row.target === '' ? '' : row.met === undefined ? '?' : row.met ? 'met' : '**not met**'} |`,
    );
  }
  return out.join('\n');
}
