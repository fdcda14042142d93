import { z } from 'zod';
import { Errors } from '../../base/errors.js';
import { readFeed, type FeedRequest } from '../../events/store/feed.js';
import { streamFacts } from '../../events/store/task.queries.js';
import { buildLink } from '../../pagination/links.js';
import { readLimit } from '../../pagination/params.js';
import { parsePythonInt } from '../../pagination/python-int.js';
import { parseQuery, readLastValue, type QueryParams } from '../../pagination/query-string.js';
import { readLatest } from '../../stores/read-replicas.js';
import { publishedHead, readHeadAhead } from '../cached-read.js';
import { audienceOf, viewEvent } from './event.view.js';
import type { ResourceRouter, RouteParts } from '../router.js';
import { requestUrl } from '../../server/request-url.js';
import { requireUser } from '../users.js';
import { defineOperation, route } from '../openapi/operation.js';
import { errorSchema, feedSchema } from '../openapi/schemas.js';

const eventOperations = {
  feed: defineOperation({
    method: 'get',
    path: '/api/events/',
    operationId: 'eventFeed',
    summary: 'Every event after a position, in commit order',
    tag: 'events',
    access: 'required',
    query: {
      after: z.int().min(0).describe('Position to read after (default 0).'),
      limit: z.int().min(1).describe('Events per answer (default PAGE_SIZE, clamped to MAX_PAGE_SIZE).'),
    },
    responses: {
      200: { description: 'The events, and the link to poll next.', body: feedSchema },
      400: { description: 'A malformed `after` or `limit`.', body: errorSchema },
    },
  }),
};

/**
 * The global event feed (docs/architecture.md, "Events"): `GET /api/events/?after=P&limit=N`, for
 * authenticated clients. `next` is always a link (after the last event returned, or `after` again
 * when none), so a consumer at the end keeps polling it. Every event is listed, each shown as its
 * reader may see it (docs/security.md "Who can see what"): whole to its task's owner, without ids of people
 * and requests to others, and with nothing but its place and type once its task is deleted.
 */
export function eventRoutes(router: ResourceRouter, { deps, guard }: RouteParts): void {
  const { config } = deps;

  // The published head is asked for only when a replica might answer.
  const ahead = deps.replicas ? [readHeadAhead(deps)] : [];
  route(router, eventOperations.feed, ...ahead, guard(), async (ctx) => {
    const user = requireUser(ctx);
    const query = parseQuery(ctx.querystring);
    const request = readFeedRequest(query, { pageSize: config.PAGE_SIZE, maxPageSize: config.MAX_PAGE_SIZE });
    // On a replica only when it has replayed the published head (docs/architecture.md, "Read replicas").
    const results = await readLatest(
      deps,
      () => publishedHead(ctx, deps),
      (db) => readFeed(db, request),
    );
    // Read after the events: a task deleted meanwhile is shown as deleted, never the other way round.
    const facts = await streamFacts(deps.db, [...new Set(results.map((event) => event.streamId))]);
    const last = results.at(-1)?.position ?? request.after;
    const next = buildLink({ url: requestUrl(ctx, config), query }, { after: last, limit: request.limit });
    ctx.body = {
      next,
      results: results.map((event) => viewEvent(event, audienceOf(facts.get(event.streamId), user.id))),
    };
  });

  router.refuseOtherMethods(() => guard(), 'none');
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
