import { z } from 'zod';
import { Errors } from '../../base/errors.js';
import { readOwnerCounts } from '../../events/projections/read-model.js';
import type { ResourceRouter, RouteParts } from '../router.js';
import { defineOperation, route } from '../openapi/operation.js';
import { statsSchema, validationErrorSchema } from '../openapi/schemas.js';

const statsOperations = {
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
 * narrows it to one owner. A route of the tasks resource (tasks.routes.ts), which refuses its other methods; the router runs it
 * rather than `/api/tasks/:id/` for having no parameter.
 */
export function statsRoutes(router: ResourceRouter, { deps, guard }: RouteParts): void {
  route(router, statsOperations.stats, guard(), async (ctx) => {
    const query = ctx.query.owner;
    const owner = Array.isArray(query) ? query.at(-1) : query;
    if (owner?.includes('\u0000')) throw Errors.validation({ owner: ['Null characters are not allowed.'] });
    ctx.body = await readOwnerCounts(deps.db, owner);
  });
}
