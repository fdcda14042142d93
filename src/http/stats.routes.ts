import type Router from '@koa/router';
import type { Deps } from '../deps.js';
import { Errors } from '../errors.js';
import { readOwnerCounts } from '../events/projections/read-model.js';
import type { Guard } from './guard.js';
import { createRouter, refuseOtherMethods } from './router.js';

/**
 * `GET /api/tasks/stats/`: live tasks per owner, open and completed, from the asynchronous read
 * model, with the position it is current to and the last position appended. `?owner=NAME`
 * narrows it to one owner. Mounted before the task routes so `stats` is not taken for a task id.
 */
export function statsRoutes(deps: Deps, guard: Guard): Router {
  const router = createRouter();
  router.get('/api/tasks/stats/', guard(), async (ctx) => {
    const query = ctx.query.owner;
    const owner = Array.isArray(query) ? query.at(-1) : query;
    if (owner?.includes('\u0000')) throw Errors.validation({ owner: ['Null characters are not allowed.'] });
    ctx.body = await readOwnerCounts(deps.db, owner);
  });
  return refuseOtherMethods(router, () => guard(), 'read');
}
