import type Router from '@koa/router';
import { z } from 'zod';
import type { Deps } from '../deps.js';
import { Errors } from '../errors.js';
import { readOwnerCounts } from '../events/projections/read-model.js';
import type { Guard } from './guard.js';
import { createRouter, refuseOtherMethods } from './router.js';
import { defineOperation, route } from './openapi/operation.js';
import { statsSchema, validationErrorSchema } from './openapi/schemas.js';

export const statsOperations = {
  stats: defineOperation({
    method: 'get',
    path: '/api/tasks/stats/',
    operationId: 'taskStats',
    summary: 'Live tasks per owner',
    description: 'From the asynchronous read model: `as_of_position` trails `last_position` while it catches up.',
    tag: 'tasks',
    access: 'optional',
    query: { owner: z.string().describe('Only this owner.') },
    responses: {
      200: { description: 'Counts per owner.', body: statsSchema },
      400: { description: 'A malformed `owner`.', body: validationErrorSchema },
    },
  }),
};

/**
 * `GET /api/tasks/stats/`: live tasks per owner, open and completed, from the asynchronous read
 * model, with the position it is current to and the last position appended. `?owner=NAME`
 * narrows it to one owner. Mounted before the task routes so `stats` is not taken for a task id.
 */
export function statsRoutes(deps: Deps, guard: Guard): Router {
  const router = createRouter();
  route(router, statsOperations.stats, guard(), async (ctx) => {
    const query = ctx.query.owner;
    const owner = Array.isArray(query) ? query.at(-1) : query;
    if (owner?.includes('\u0000')) throw Errors.validation({ owner: ['Null characters are not allowed.'] });
    ctx.body = await readOwnerCounts(deps.db, owner);
  });
  return refuseOtherMethods(router, () => guard(), 'read');
}
