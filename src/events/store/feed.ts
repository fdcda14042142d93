import type { Kysely } from 'kysely';
import type { Database } from '../../../db/database.js';
import { eventColumns, rowToEvent, type RecordedEvent } from './task.queries.js';

/** One read of the global feed: which events, and how many at most. */
export interface FeedRequest {
  after: number;
  limit: number;
}

/**
 * Events with position > `after`, in position order, at most `limit`. Positions are drawn under
 * the global append lock, which is released only after commit, so a position becomes visible
 * only after every smaller one: a reader never sees a gap that fills in later, and following
 * `next` from 0 visits every event exactly once.
 */
export async function readFeed(db: Kysely<Database>, { after, limit }: FeedRequest): Promise<RecordedEvent[]> {
  const rows = await db
    .selectFrom('events')
    .select(eventColumns)
    .where('position', '>', after)
    .orderBy('position', 'asc')
    .limit(limit)
    .execute();
  return rows.map(rowToEvent);
}
