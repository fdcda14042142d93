import type Router from '@koa/router';
import type { ScopeName, ScopeRule } from '../throttle/index.js';
import type { Guard } from './guard.js';
import { createRouter, refuseOtherMethods } from './router.js';
import { defineOperation, route } from './openapi/operation.js';
import { rateLimitsSchema } from './openapi/schemas.js';

export const rateLimitOperations = {
  list: defineOperation({
    method: 'get',
    path: '/api/rate-limits/',
    operationId: 'listRateLimits',
    summary: 'The throttle scopes and their rates',
    tag: 'meta',
    access: 'optional',
    responses: { 200: { description: 'A plain array (not paginated).', body: rateLimitsSchema } },
  }),
};

/**
 * The live throttle configuration: the limits enforced, so none while THROTTLE_ENABLED is off.
 * This collection opts out of pagination: it is small and bounded by the number of scopes, so it
 * answers a plain array.
 */
export function rateLimitRoutes(rules: ReadonlyMap<ScopeName, ScopeRule>, guard: Guard, enabled: boolean): Router {
  const router = createRouter();
  route(router, rateLimitOperations.list, guard(), (ctx) => {
    ctx.body = enabled
      ? [...rules.values()].map((rule) => ({ scope: rule.scope, rate: rule.rate.text, keyed_by: rule.keyedBy }))
      : [];
  });
  return refuseOtherMethods(router, () => guard());
}
