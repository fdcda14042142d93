import type Router from '@koa/router';
import type { Deps } from '../deps.js';
import { Errors } from '../errors.js';
import { readFeed, type FeedRequest } from '../events/store/feed.js';
import { streamFacts } from '../events/store/task.queries.js';
import { buildLink } from '../pagination/links.js';
import { readLimit } from '../pagination/params.js';
import { parsePythonInt } from '../pagination/python-int.js';
import { parseQuery, readLastValue, type QueryParams } from '../pagination/query-string.js';
import { audienceOf, viewEvent } from './event.view.js';
import type { Guard } from './guard.js';
import { createRouter, refuseOtherMethods } from './router.js';
import { requestUrl } from './request-url.js';
import { requireUser } from './users.js';

/**
 * The global event feed (docs/architecture.md, "Events"): `GET /api/events/?after=P&limit=N`, for
 * authenticated clients. `next` is always a link (after the last event returned, or `after` again
 * when none), so a consumer at the end keeps polling it. Every event is listed, each shown as its
 * reader may see it (README "Who can see what"): whole to its task's owner, without ids of people
 * and requests to others, and with nothing but its place and type once its task is deleted.
 */
export function eventRoutes(deps: Deps, guard: Guard): Router {
  const router = createRouter();
  const { config } = deps;

  router.get('/api/events/', guard(), async (ctx) => {
    const user = requireUser(ctx);
    const query = parseQuery(ctx.querystring);
    const request = readFeedRequest(query, { pageSize: config.PAGE_SIZE, maxPageSize: config.MAX_PAGE_SIZE });
    const results = await readFeed(deps.db, request);
    // Read after the events: a task deleted meanwhile is shown as deleted, never the other way round.
    const facts = await streamFacts(deps.db, [...new Set(results.map((event) => event.streamId))]);
    const last = results.at(-1)?.position ?? request.after;
    const next = buildLink({ url: requestUrl(ctx, config), query }, { after: last, limit: request.limit });
    ctx.body = { next, results: results.map((event) => viewEvent(event, audienceOf(facts.get(event.streamId), user.id))) };
  });

  return refuseOtherMethods(router, () => guard(), 'none');
}

/**
 * Reads `after` (default 0, an integer from 0 to 2^53−1) and `limit` (default `pageSize`,
 * clamped to `maxPageSize`); a malformed one is a 400 naming it.
 */
function readFeedRequest(query: QueryParams, sizes: { pageSize: number; maxPageSize: number }): FeedRequest {
  const rawAfter = readLastValue(query, 'after');
  const after = rawAfter === undefined ? 0n : parsePythonInt(rawAfter);
  if (after === null || after < 0n || after > BigInt(Number.MAX_SAFE_INTEGER)) {
    throw Errors.badRequest(`Invalid "after": expected an integer from 0 to ${Number.MAX_SAFE_INTEGER}.`);
  }
  const limit = readLimit(query, sizes);
  if (!limit.ok) throw Errors.badRequest(limit.detail);
  return { after: Number(after), limit: limit.value };
}
