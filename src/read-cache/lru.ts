/**
 * A least-recently-used map bounded by bytes: each entry states its size, and the oldest entries
 * go when the total passes the budget. A Map keeps insertion order, so a hit moves its entry to
 * the end by deleting and setting it again.
 */
export class ByteLru<V extends { bytes: number }> {
  #entries = new Map<string, V>();
  #bytes = 0;

  constructor(private readonly budget: number) {}

  get(key: string): V | undefined {
    const entry = this.#entries.get(key);
    if (entry === undefined) return undefined;
    this.#entries.delete(key);
    this.#entries.set(key, entry);
    return entry;
  }

  /** The entry for `key`, without counting it as a use. */
  peek(key: string): V | undefined {
    return this.#entries.get(key);
  }

  set(key: string, entry: V): void {
    this.delete(key);
    if (entry.bytes > this.budget) return;
    this.#entries.set(key, entry);
    this.#bytes += entry.bytes;
    for (const [oldest, value] of this.#entries) {
      if (this.#bytes <= this.budget) break;
      this.#entries.delete(oldest);
      this.#bytes -= value.bytes;
    }
  }

  delete(key: string): void {
    const entry = this.#entries.get(key);
    if (entry === undefined) return;
    this.#entries.delete(key);
    this.#bytes -= entry.bytes;
  }

  clear(): void {
    this.#entries.clear();
    this.#bytes = 0;
  }

  get size(): number {
    return this.#entries.size;
  }

  get bytes(): number {
    return this.#bytes;
  }
}
