import type Router from '@koa/router';
import type { Deps } from '../deps.js';
import { Errors } from '../errors.js';
import { parseFeedParams, readFeedPage } from '../events/feed.js';
import type { Guard } from './guard.js';
import { createRouter, refuseOtherMethods } from './router.js';
import { requestUrl } from './request-url.js';
import { requireUser } from './users.js';

/** The global event feed (DESIGN §5): `GET /api/events/?after=P&limit=N`, for authenticated clients. */
export function eventRoutes(deps: Deps, guard: Guard): Router {
  const router = createRouter();
  const { config } = deps;

  router.get('/api/events/', guard(), async (ctx) => {
    requireUser(ctx);
    const params = parseFeedParams(ctx.querystring, { pageSize: config.PAGE_SIZE, maxPageSize: config.MAX_PAGE_SIZE });
    if (!params.ok) throw Errors.badRequest(params.detail);
    ctx.body = await readFeedPage(deps.db, params.value, requestUrl(ctx, config.TRUST_PROXY_HOPS));
  });

  return refuseOtherMethods(router, () => guard(), 'none');
}
