import type { Deps } from '../src/deps.js';
import { readFeed } from '../src/events/store/feed.js';
import { applyEvents, readCheckpoint } from '../src/events/projections/read-model.js';
import { logStoreFailure } from '../src/stores/store-errors.js';

const MAX_BACKOFF_MS = 30_000;

/**
 * Keeps the per-owner task counts current: reads the event feed after the checkpoint in batches
 * of `READ_MODEL_BATCH` and applies each with `applyEvents` (counts and checkpoint in one
 * transaction), polling every `READ_MODEL_POLL_MS` once caught up and backing off after errors.
 * The checkpoint lives in PostgreSQL, so a follower that was stopped catches up from where the
 * last one committed, and several followers (one per jobs child) never count an event twice.
 */
export class ReadModelFollower {
  #stopped = false;
  #loop: Promise<void> | undefined;
  #wake: (() => void) | undefined;

  constructor(private readonly deps: Pick<Deps, 'db' | 'logger' | 'config'>) {}

  start(): this {
    this.#loop ??= this.#run();
    return this;
  }

  /** Stops after the batch in progress; safe twice. */
  async close(): Promise<void> {
    this.#stopped = true;
    this.#wake?.();
    await this.#loop;
  }

  async #run(): Promise<void> {
    const { db, logger, config } = this.deps;
    let cursor: number | undefined;
    let failures = 0;
    while (!this.#stopped) {
      try {
        cursor ??= await readCheckpoint(db);
        const events = await readFeed(db, { after: cursor, limit: config.READ_MODEL_BATCH });
        // The checkpoint, not the cursor, says where to read next: another follower may be ahead.
        if (events.length > 0) cursor = (await applyEvents(db, events)).checkpoint;
        failures = 0;
        if (events.length < config.READ_MODEL_BATCH) await this.#pause(config.READ_MODEL_POLL_MS);
      } catch (error) {
        failures += 1;
        cursor = undefined;
        if (failures === 1) logStoreFailure(logger, error, 'read model follower failed; retrying with back-off');
        await this.#pause(Math.min(config.READ_MODEL_POLL_MS * 2 ** failures, MAX_BACKOFF_MS));
      }
    }
  }

  #pause(ms: number): Promise<void> {
    if (this.#stopped) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.#wake = done;
    });
  }
}
