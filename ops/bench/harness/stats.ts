/** The median of `values`, NaN left out (NaN when none are left). */
export function median(values: readonly number[]): number {
  const sorted = values.filter((v) => !Number.isNaN(v)).sort((a, b) => a - b);
  if (sorted.length === 0) return NaN;
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

/** The value at quantile `p` (0-1) of ascending `sorted`, by nearest rank (NaN when empty). */
export function quantile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))]!;
}

/** The sum of `pick` over `items`. */
export const sumOf = <T>(items: readonly T[], pick: (item: T) => number): number =>
  items.reduce((total, item) => total + pick(item), 0);

/** The lowest and highest of `values`, as a table shows a spread: `0.91–1.04`. */
export const spread = (values: readonly number[], digits = 2): string =>
  `${Math.min(...values).toFixed(digits)}–${Math.max(...values).toFixed(digits)}`;

/** Count, median, p99 and most of `samples` (ms). */
export function latencies(samples: ArrayLike<number>): { count: number; p50: number; p99: number; max: number } {
  const sorted = Array.from(samples).sort((a, b) => a - b);
  return { count: sorted.length, p50: quantile(sorted, 0.5), p99: quantile(sorted, 0.99), max: sorted.at(-1) ?? NaN };
}

/** `pick` summed over `items` and divided by `count` (0 when `count` is 0), to `digits` decimals. */
export const per = <T>(items: readonly T[], pick: (item: T) => number, count: number, digits = 2): number =>
  count === 0 ? 0 : Number((sumOf(items, pick) / count).toFixed(digits));
