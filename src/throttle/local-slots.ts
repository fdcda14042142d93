import { NOTHING_HELD, type Slot, type SlotRequest } from './concurrency.js';
import { localShare } from './local-logs.js';
import type { WorkerCensus } from './worker-census.js';

/**
 * THROTTLE_FAILURE_MODE=local for concurrency limits (docs/throttling.md "Concurrency limits"): a
 * request Redis did not answer is admitted while fewer than this worker's share of its limit (the
 * limit divided by the web workers alive, as `census` last counted them, as for rates) of its
 * client's requests in the scope are in progress here. One count per client with a request in
 * progress here, dropped at zero: bounded by the requests in progress.
 */
export class LocalSlots {
  readonly #held = new Map<string, number>();

  constructor(private readonly census: Pick<WorkerCensus, 'workers'>) {}

  /** Clients with a request in progress admitted here. */
  get size(): number {
    return this.#held.size;
  }

  /** Decides `request` by this worker's share; an admitted one holds its slot until `release`. */
  acquire({ scope, ident, limit }: SlotRequest): Slot {
    const key = `${scope} ${ident}`;
    const share = localShare(limit, this.census.workers);
    const held = this.#held.get(key) ?? 0;
    if (held >= share) return { admitted: false, limit, remaining: 0, degraded: true, release: NOTHING_HELD };
    this.#held.set(key, held + 1);
    let released = false;
    const release = () => {
      if (!released) {
        released = true;
        const left = (this.#held.get(key) ?? 1) - 1;
        if (left > 0) this.#held.set(key, left);
        else this.#held.delete(key);
      }
      return Promise.resolve();
    };
    return { admitted: true, limit, remaining: share - held - 1, degraded: true, release };
  }
}
