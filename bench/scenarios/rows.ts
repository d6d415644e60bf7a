/** Pieces of rows more than one scenario's table uses. */
import type { Figures, RowSpec, ScenarioResult, Target } from '../scenario.ts';

/** A figure as a number, `NaN` when it is not one. */
export const num = (v: unknown): number => (typeof v === 'number' ? v : Number.NaN);

/** Met when ours is at most `factor` times the ceiling. */
export const atMost = (factor: number) => (values: Partial<Record<Target, unknown>>) =>
  Number.isFinite(num(values.ours)) && Number.isFinite(num(values.ceiling))
    ? num(values.ours) <= factor * num(values.ceiling)
    : undefined;

/** Which server's figure a row shows in the ours column, and which one's in the ceiling column. */
export interface Columns {
  readonly ours: Target;
  readonly ceiling: Target;
}

/**
 * A row of one figure of two servers other than the columns' own, put in the ours and ceiling columns
 * (so ours/ceiling, the target and its check read them as the columns); `rest` adds a target or a note.
 */
export function pairRow(
  label: string,
  unit: string,
  key: string,
  digits: number,
  columns: Columns,
  rest: Pick<RowSpec, 'target' | 'met' | 'note'> = {},
): RowSpec {
  return {
    label,
    unit,
    digits,
    only: ['ours', 'ceiling'],
    value: (figures, all) => all[figures === all.ceiling ? columns.ceiling : columns.ours]?.[key],
    ...rest,
  };
}

/**
 * A row that puts the ceiling-in-Express's figure in the ceiling column, beside ours: ours/ceiling
 * then reads "ours against the same bare work served through Express". No target: it explains.
 */
export function frameworkRow(label: string, unit: string, key: string, digits: number): RowSpec {
  return pairRow(
    label,
    unit,
    key,
    digits,
    { ours: 'ours', ceiling: 'ceiling-express' },
    {
      note: "the ceiling column holds the ceiling mounted in Express behind the host's auth (same code, no library): the framework's own share",
    },
  );
}

/**
 * Fastify's two rows of one figure, their labels saying which servers the ours and ceiling columns
 * hold: ours on Fastify against the bare ceiling (with the target, when `factor` is given: at most
 * `factor` × the ceiling), then against the same ceiling mounted in Fastify behind the same auth hook
 * (no target: it tells Fastify's share of the figure from the library's).
 */
export function fastifyRows(label: string, unit: string, key: string, digits: number, factor?: number): RowSpec[] {
  return [
    pairRow(
      `${label}, ours on Fastify`,
      unit,
      key,
      digits,
      { ours: 'ours-fastify', ceiling: 'ceiling' },
      factor !== undefined ? { target: `≤ ${factor.toFixed(1)}× ceiling`, met: atMost(factor) } : {},
    ),
    pairRow(`${label}, ours on Fastify against the ceiling in Fastify`, unit, key, digits, {
      ours: 'ours-fastify',
      ceiling: 'ceiling-fastify',
    }),
  ];
}

/**
 * A row that puts ours with metrics (an OpenTelemetry `MeterProvider` registered before the hub, scraped
 * as Prometheus would) in the ours column and ours (no provider) in the ceiling column: ours/ceiling then
 * reads what metrics on cost. The target is issue 21's: at most 1.05× ours.
 */
export function metricsRow(label: string, unit: string, key: string, digits: number): RowSpec {
  return pairRow(
    `${label}, ours with metrics against ours`,
    unit,
    key,
    digits,
    { ours: 'ours-metrics', ceiling: 'ours' },
    { target: '≤ 1.05× ours', met: atMost(1.05) },
  );
}

/**
 * What the orchestrator's scraper read of ours with metrics, in the ours column: the scrapes it served
 * while the scenario ran, and the metric families of the last one (`target_info` aside), which are the
 * library's instruments: none means the metrics rows measured a provider the hub does not report to.
 */
export function scrapeRows(scenario: string): RowSpec[] {
  const scraped = (key: string) => (_figures: Figures, all: ScenarioResult) => all['ours-metrics']?.[key];
  return [
    {
      label: `${scenario}: ours with metrics, scrapes it served`,
      unit: '',
      digits: 0,
      only: ['ours'],
      value: scraped('scrapes'),
      note: 'the ours column holds ours with metrics; the "ours with metrics against ours" rows put it in the ours column and ours (no MeterProvider) in the ceiling column',
    },
    {
      label: `${scenario}: ours with metrics, metric families at the last scrape`,
      unit: '',
      digits: 0,
      only: ['ours'],
      value: scraped('metricFamilies'),
    },
  ];
}
