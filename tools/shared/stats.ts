/** Small statistics for the bench and the soak: percentiles, medians, a least-squares slope, a seeded PRNG. */

/** The `p`th percentile (0–100) of `values`, by nearest rank; `NaN` when empty. Sorts a copy. */
export function percentile(values: ArrayLike<number>, p: number): number {
  return sortedPercentile(Float64Array.from(values).sort(), p);
}

/** {@link percentile} of values already sorted in ascending order (no copy). */
export function sortedPercentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank] as number;
}

export function median(values: ArrayLike<number>): number {
  return percentile(values, 50);
}

/** The least-squares slope of `ys` over `xs`. */
export function slope(xs: readonly number[], ys: readonly number[]): number {
  const n = xs.length;
  const mx = xs.reduce((a, b) => a + b, 0) / n;
  const my = ys.reduce((a, b) => a + b, 0) / n;
  let num = 0;
  let den = 0;
  for (let i = 0; i < n; i++) {
    num += ((xs[i] as number) - mx) * ((ys[i] as number) - my);
    den += ((xs[i] as number) - mx) ** 2;
  }
  return den === 0 ? Number.NaN : num / den;
}

/** A seeded PRNG (mulberry32): the same seed makes the same choices (every server gets the same "random" URIs). */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
