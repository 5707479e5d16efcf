/** The statistics every part of the bench reports with: medians of rounds, percentiles of times. */

export function median(values: number[]): number | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/**
 * The `p` quantile (0.99 for p99) of values sorted ascending, nearest rank: the smallest value
 * with at least that share of values at or below it; 0 when there are none.
 */
export function percentile(sorted: number[], p: number): number {
  return sorted[Math.max(0, Math.ceil(p * sorted.length) - 1)] ?? 0;
}

/** The median of `values` and their spread (smallest, largest); undefined when there are none. */
export function summarize(values: number[]) {
  if (values.length === 0) return undefined;
  return { median: median(values)!, min: Math.min(...values), max: Math.max(...values) };
}
