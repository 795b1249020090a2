/** Nearest-rank percentile of an unsorted sample (p in 0..100); NaN for an empty sample. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1]!;
}

export interface LatencySummary {
  n: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

export function summarise(values: readonly number[]): LatencySummary {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (p: number) =>
    sorted.length === 0
      ? Number.NaN
      : sorted[Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length))) - 1]!;
  return {
    n: sorted.length,
    p50: at(50),
    p90: at(90),
    p99: at(99),
    max: sorted.length === 0 ? Number.NaN : sorted[sorted.length - 1]!,
  };
}

/** Least-squares slope of y over x; NaN with fewer than two distinct x. */
export function slope(points: readonly { x: number; y: number }[]): number {
  const n = points.length;
  if (n < 2) return Number.NaN;
  const mx = points.reduce((s, p) => s + p.x, 0) / n;
  const my = points.reduce((s, p) => s + p.y, 0) / n;
  let num = 0;
  let den = 0;
  for (const p of points) {
    num += (p.x - mx) * (p.y - my);
    den += (p.x - mx) ** 2;
  }
  return den === 0 ? Number.NaN : num / den;
}

export const round = (v: number, digits = 1): number =>
  Number.isFinite(v) ? Number(v.toFixed(digits)) : v;

/** The middle value (the upper of the two middle ones for an even count). */
export function median(xs: readonly number[]): number {
  const sorted = [...xs].sort((a, b) => a - b);
  const mid = sorted[Math.floor(sorted.length / 2)];
  if (mid === undefined) throw new Error('median of no values');
  return mid;
}

/**
 * Runs a short raw baseline `times` times and keeps the run with the median rate: a burst of a
 * second or less is easily caught by a moment of contention (or quiet) on a shared machine.
 */
export async function medianOf<T extends { rate: number }>(
  times: number,
  fn: () => Promise<T>,
): Promise<T & { runs: number[] }> {
  const results: T[] = [];
  for (let i = 0; i < times; i++) results.push(await fn());
  const sorted = [...results].sort((a, b) => a.rate - b.rate);
  return { ...sorted[Math.floor(sorted.length / 2)]!, runs: results.map((r) => r.rate) };
}
