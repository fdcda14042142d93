import type { Kysely } from 'kysely';
import type { Database } from '../../db/database.js';
import { applyEvents } from '../../src/events/projections/read-model.js';
import { readFeed } from '../../src/events/store/feed.js';

/**
 * Applies every event past the read model's checkpoint, 5,000 at a time, until none is left:
 * what the projector would have done by now. Bounded at 1,000 batches.
 */
export async function catchUpReadModel(db: Kysely<Database>): Promise<void> {
  for (let i = 0; i < 1_000; i += 1) {
    const { position } = await db
      .selectFrom('projection_checkpoints')
      .select('position')
      .where('name', '=', 'owner_task_counts')
      .executeTakeFirstOrThrow();
    const events = await readFeed(db, { after: position, limit: 5_000 });
    if (events.length === 0) return;
    await applyEvents(db, events);
  }
}
