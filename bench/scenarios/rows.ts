/** Pieces of rows more than one scenario's table uses. */
import type { RowSpec, Target } from '../scenario.ts';

/** A figure as a number, `NaN` when it is not one. */
export const num = (v: unknown): number => (typeof v === 'number' ? v : Number.NaN);

/** Met when ours is at most `factor` times the ceiling. */
export const atMost = (factor: number) => (values: Partial<Record<Target, unknown>>) =>
  Number.isFinite(num(values.ours)) && Number.isFinite(num(values.ceiling))
    ? num(values.ours) <= factor * num(values.ceiling)
    : undefined;

/**
 * A row that puts the ceiling-in-Express's figure in the ceiling column, beside ours: ours/ceiling
 * then reads "ours against the same bare work served through Express". No target: it explains.
 */
export function frameworkRow(label: string, unit: string, key: string, digits: number): RowSpec {
  return {
    label,
    unit,
    digits,
    only: ['ours', 'ceiling'],
    value: (figures, all) => (figures === all.ceiling ? all['ceiling-express']?.[key] : figures[key]),
    note: "the ceiling column holds the ceiling mounted in Express behind the host's auth (same code, no library): the framework's own share",
  };
}
