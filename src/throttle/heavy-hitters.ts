/**
 * Space-Saving (Metwally, Agrawal, El Abbadi, 2005): the heaviest keys of a stream in `capacity`
 * counters. A key not counted takes the place of the smallest counter and inherits its count, so
 * every count is at most `total / capacity` above the truth (its `error` says how much it may be),
 * and every key seen more than `total / capacity` times holds a counter (docs/throttling.md "Who is
 * throttled"). Pure: no clock, no I/O.
 */
export class SpaceSaving {
  readonly #counters = new Map<string, Counted>();
  #total = 0;
  /** Keys that held the smallest count when last scanned: evicted in turn, so a scan serves many evictions. */
  #smallestKeys: string[] = [];
  #smallestCount = 0;

  /** @param capacity counters kept, ≥ 1: memory is O(capacity) whatever the number of distinct keys. */
  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1)
      throw new Error(`capacity must be a positive integer: ${capacity}`);
  }

  /** Occurrences added so far. */
  get total(): number {
    return this.#total;
  }

  /** Counters held (≤ capacity). */
  get size(): number {
    return this.#counters.size;
  }

  /** The smallest count held when every counter is taken, else 0: the most an absent key may have been seen. */
  get floor(): number {
    if (this.#counters.size < this.capacity) return 0;
    let count = Infinity;
    for (const entry of this.#counters.values()) if (entry.count < count) count = entry.count;
    return count;
  }

  /** Counts `weight` (default 1) occurrences of `key`. */
  add(key: string, weight = 1): void {
    this.#total += weight;
    const held = this.#counters.get(key);
    if (held) {
      held.count += weight;
      return;
    }
    if (this.#counters.size < this.capacity) {
      this.#counters.set(key, { count: weight, error: 0 });
      return;
    }
    const [evicted, smallest] = this.#smallest();
    this.#counters.delete(evicted);
    this.#counters.set(key, { count: smallest.count + weight, error: smallest.count });
  }

  /** Every counter, heaviest first: `count` overestimates the truth by at most `error`. */
  entries(): HeavyHitter[] {
    return [...this.#counters]
      .map(([key, { count, error }]) => ({ key, count, error }))
      .sort((a, b) => b.count - a.count || (a.key < b.key ? -1 : 1));
  }

  #smallest(): [string, Counted] {
    for (;;) {
      const key = this.#smallestKeys.pop();
      if (key === undefined) break;
      const held = this.#counters.get(key);
      // Still there and not counted since the scan: no counter is smaller.
      if (held && held.count === this.#smallestCount) return [key, held];
    }
    // A scan of the counters (10 × THROTTLE_TOP_K), shared by the evictions of every key it finds at the minimum.
    let count = Infinity;
    for (const entry of this.#counters.values()) if (entry.count < count) count = entry.count;
    this.#smallestCount = count;
    for (const [key, entry] of this.#counters) if (entry.count === count) this.#smallestKeys.push(key);
    const key = this.#smallestKeys.pop() as string;
    return [key, this.#counters.get(key) as Counted];
  }
}

interface Counted {
  count: number;
  error: number;
}

/** One key's estimated count and the most by which it may be over the truth. */
export interface HeavyHitter {
  key: string;
  count: number;
  error: number;
}

/**
 * Sums summaries (of time slots, or of processes) into one list, heaviest first. A key a full
 * summary does not hold may have been seen up to its `floor` times there: that is added to the
 * key's `error`, so `count - error ≤ truth ≤ count + error` still holds, and with N occurrences in
 * all and every summary of capacity m the error is at most N / m.
 */
export function mergeHeavyHitters(parts: ReadonlyArray<{ entries: HeavyHitter[]; floor: number }>): HeavyHitter[] {
  const merged = new Map<string, HeavyHitter>();
  for (const part of parts) {
    for (const { key, count, error } of part.entries) {
      const held = merged.get(key);
      if (held) {
        held.count += count;
        held.error += error;
      } else merged.set(key, { key, count, error });
    }
  }
  for (const part of parts) {
    if (part.floor === 0) continue;
    const present = new Set(part.entries.map((entry) => entry.key));
    for (const entry of merged.values()) if (!present.has(entry.key)) entry.error += part.floor;
  }
  return [...merged.values()].sort((a, b) => b.count - a.count || (a.key < b.key ? -1 : 1));
}
