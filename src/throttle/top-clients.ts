import { mergeHeavyHitters, SpaceSaving, type HeavyHitter } from './heavy-hitters.js';

/** Slots a window is cut into: the reported window ends now and starts up to one slot late. */
export const WINDOW_SLOTS = 5;
/** Counters per scope and slot, per client reported: a count is within 1/(10·K) of the scope's refusals. */
export const COUNTERS_PER_CLIENT = 10;

/** One scope's heaviest clients over the window: identities as the throttle keys them (`ip:…`, `user:…`). */
export interface ScopeTop {
  scope: string;
  clients: HeavyHitter[];
  /** Refusals of the scope in the window, all clients. */
  total: number;
}

/**
 * The refused requests of one process per scope and client over the last `windowMs`, in Space-Saving
 * summaries of 10 × `k` counters per scope and slot of windowMs / 5 (docs/throttling.md "Who is
 * throttled"). Memory is bounded by scopes × 5 × 10·k counters, however many clients are refused.
 */
export class TopClients {
  readonly #slotMs: number;
  readonly #scopes = new Map<string, Array<{ slot: number; sketch: SpaceSaving }>>();

  constructor(
    readonly k: number,
    readonly windowMs: number,
    private readonly now: () => number,
  ) {
    this.#slotMs = Math.max(1, Math.ceil(windowMs / WINDOW_SLOTS));
  }

  /** Counts one refused request of `client` in `scope`. */
  add(scope: string, client: string): void {
    const slot = Math.floor(this.now() / this.#slotMs);
    let slots = this.#scopes.get(scope);
    if (!slots) this.#scopes.set(scope, (slots = []));
    let current = slots[slots.length - 1];
    if (current?.slot !== slot) {
      current = { slot, sketch: new SpaceSaving(this.k * COUNTERS_PER_CLIENT) };
      slots.push(current);
      // Only this window's slots are kept: the slice drops the ones it has left.
      while (slots.length > 0 && (slots[0] as { slot: number }).slot <= slot - WINDOW_SLOTS) slots.shift();
    }
    current.sketch.add(client);
  }

  /** Counters held now, over every scope and slot. */
  counters(): number {
    let held = 0;
    for (const slots of this.#scopes.values()) for (const { sketch } of slots) held += sketch.size;
    return held;
  }

  /**
   * Every scope's summed counters over the window, heaviest first (up to 10·k per scope: a merge
   * of several processes needs more than the top k of each to find the top k of all).
   */
  report(): ScopeTop[] {
    const slot = Math.floor(this.now() / this.#slotMs);
    const tops: ScopeTop[] = [];
    for (const [scope, all] of this.#scopes) {
      const slots = all.filter((entry) => entry.slot > slot - WINDOW_SLOTS);
      if (slots.length === 0) {
        this.#scopes.delete(scope);
        continue;
      }
      const parts = slots.map(({ sketch }) => ({ entries: sketch.entries(), floor: sketch.floor }));
      const clients = mergeHeavyHitters(parts).slice(0, this.k * COUNTERS_PER_CLIENT);
      tops.push({ scope, clients, total: slots.reduce((sum, { sketch }) => sum + sketch.total, 0) });
    }
    return tops;
  }
}
