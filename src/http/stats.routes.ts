import Router from '@koa/router';
import type { Deps } from '../deps.js';
import { Errors } from '../errors.js';
import { readOwnerCounts } from '../events/read-model.js';
import type { Guard } from './guard.js';

/**
 * `GET /api/tasks/stats/`: live tasks per owner, open and completed, from the asynchronous read
 * model, with the position it is current to and the last position appended. `?owner=NAME`
 * narrows it to one owner. Mounted before the task routes so `stats` is not taken for a task id.
 */
export function statsRoutes(deps: Deps, guard: Guard): Router {
  const router = new Router();
  router.get('/api/tasks/stats/', guard(), async (ctx) => {
    const owner = ctx.query.owner;
    ctx.body = await readOwnerCounts(deps.db, Array.isArray(owner) ? owner.at(-1) : owner);
  });
  // Any other method ends here too, or the task routes would take `stats` for a task id.
  router.all('/api/tasks/stats/', (ctx) => {
    if (ctx.method !== 'OPTIONS') throw Errors.methodNotAllowed(ctx.method, 'GET, HEAD, OPTIONS');
    ctx.status = 204;
    ctx.set('Allow', 'GET, HEAD, OPTIONS');
  });
  return router;
}
