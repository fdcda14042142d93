import type { Kysely } from 'kysely';
import type { Database } from '../../db/database.js';
import { buildLink } from '../pagination/links.js';
import { readLimit } from '../pagination/params.js';
import { parsePythonInt } from '../pagination/python-int.js';
import { parseQuery, readLastValue } from '../pagination/query-string.js';
import { viewEvent, type EventView } from './task.queries.js';

/** One read of the global feed: which events, and how many at most. */
export interface FeedRequest {
  after: number;
  limit: number;
}

/** The feed body: `next` is always a link, so a consumer at the end keeps polling it. */
export interface FeedPage {
  next: string;
  results: EventView[];
}

export type FeedParams = { ok: true; value: FeedRequest } | { ok: false; detail: string };

/**
 * Reads `after` (default 0, an integer from 0 to 2^53−1) and `limit` (default `pageSize`,
 * clamped to `maxPageSize`) from a query string; a malformed one is refused with a detail
 * naming it.
 */
export function parseFeedParams(search: string, settings: { pageSize: number; maxPageSize: number }): FeedParams {
  const query = parseQuery(search);
  const rawAfter = readLastValue(query, 'after');
  const after = rawAfter === undefined ? 0n : parsePythonInt(rawAfter);
  if (after === null || after < 0n || after > BigInt(Number.MAX_SAFE_INTEGER)) {
    return { ok: false, detail: `Invalid "after": expected an integer from 0 to ${Number.MAX_SAFE_INTEGER}.` };
  }
  const limit = readLimit(query, { ...settings, cursorSecret: '' });
  if (!limit.ok) return { ok: false, detail: limit.detail };
  return { ok: true, value: { after: Number(after), limit: limit.value } };
}

/**
 * Events with position > `after`, in position order, at most `limit`. Positions are drawn under
 * the global append lock, which is released only after commit, so a position becomes visible
 * only after every smaller one: a reader never sees a gap that fills in later, and following
 * `next` from 0 visits every event exactly once.
 */
export async function readFeed(db: Kysely<Database>, { after, limit }: FeedRequest): Promise<EventView[]> {
  const rows = await db
    .selectFrom('events')
    .select(['position', 'stream_id', 'version', 'type', 'data', 'metadata', 'recorded_at'])
    .where('position', '>', after)
    .orderBy('position', 'asc')
    .limit(limit)
    .execute();
  return rows.map(viewEvent);
}

/** A page of the feed with its `next` link: after the last event returned, or `after` again when none. */
export async function readFeedPage(db: Kysely<Database>, request: FeedRequest, url: URL): Promise<FeedPage> {
  const results = await readFeed(db, request);
  const last = results.at(-1)?.position ?? request.after;
  return { next: buildLink(url, { after: last, limit: request.limit }), results };
}
