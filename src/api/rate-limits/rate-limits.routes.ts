import type { ResourceRouter, RouteParts } from '../router.js';
import { defineOperation, route } from '../openapi/operation.js';
import { rateLimitsSchema } from '../openapi/schemas.js';
import { ownBudgets, ownChecks } from './own-budget.js';

const rateLimitOperations = {
  list: defineOperation({
    method: 'get',
    path: '/api/rate-limits/',
    operationId: 'listRateLimits',
    summary: 'The throttle scopes and their rates, with the caller’s own budget in each',
    tag: 'meta',
    access: 'optional',
    priority: 'memory',
    responses: { 200: { description: 'A plain array (not paginated).', body: rateLimitsSchema } },
  }),
};

/**
 * The live throttle configuration: the limits enforced, so none while THROTTLE_ENABLED is off,
 * each with its shadow rate and, where the scope applies to the caller, the caller's remaining
 * budget, read without spending it (docs/throttling.md "Your own budget"), and the caller's own rate where its
 * plan or an override sets it (docs/throttling.md "Plans and overrides"). This collection opts
 * out of pagination: it is small and bounded by the number of scopes, so it answers a plain array.
 */
export function rateLimitRoutes(router: ResourceRouter, { deps, rules, guard }: RouteParts): void {
  route(router, rateLimitOperations.list, guard(), async (ctx) => {
    if (!deps.config.THROTTLE_ENABLED) return void (ctx.body = []);
    const own = ownChecks(deps, rules, ctx);
    const budgets = await ownBudgets(deps, ctx, own);
    const plan = ctx.state.user ? (deps.limits?.planOf(ctx.state.user.id) ?? 'default') : null;
    ctx.body = [...rules.values()].map((base) => {
      const { rule, ident } = own.get(base.scope) ?? { rule: base, ident: undefined };
      const until = rule.override === undefined ? undefined : deps.limits?.overrideEnd(rule.override);
      return {
        scope: rule.scope,
        rate: rule.rate.text,
        keyed_by: rule.keyedBy,
        enforced: !rule.inShadow,
        shadow_rate: rule.shadow?.text ?? null,
        remaining: budgets.get(rule.scope)?.remaining ?? null,
        reset_seconds: budgets.get(rule.scope)?.reset_seconds ?? null,
        plan: ident === undefined ? null : plan,
        override_until: until === undefined ? null : until.toISOString(),
      };
    });
  });
  router.refuseOtherMethods(() => guard());
}
