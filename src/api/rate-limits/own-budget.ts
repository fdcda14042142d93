import type { Context } from 'koa';
import type { Deps } from '../../deps.js';
import type { Check, ScopeName, ScopeRule } from '../../throttle/index.js';
import { loginIdent } from '../../throttle/index.js';
import { logStoreFailure } from '../../stores/store-errors.js';
import { identify } from '../../edge/client-identity.js';

/** Each scope's rule for one caller, and who the scope counts it as (undefined: the scope does not apply to it). */
export type OwnChecks = Map<ScopeName, { rule: ScopeRule; ident: string | undefined }>;

/** A caller's budget in one scope: requests it may still make, and seconds until that next grows. */
export interface OwnBudget {
  remaining: number;
  reset_seconds: number;
}

/**
 * The caller's own budget in every enforced scope that applies to it (docs/throttling.md "Your
 * own budget"), read from the throttle logs without recording anything: the general scope this
 * request was counted by, the scopes keyed by its address, and, for a user, those keyed by its
 * id and its own username's login budget. Empty when this request's own check had no answer from
 * Redis (it would not answer this read either) or the read fails. `own`: the caller's rules, from `ownChecks`.
 */
export async function ownBudgets(deps: Deps, ctx: Context, own: OwnChecks): Promise<Map<ScopeName, OwnBudget>> {
  const budgets = new Map<ScopeName, OwnBudget>();
  if (!ctx.state.rateLimit) return budgets;
  const checks: Check[] = [];
  for (const { rule, ident } of own.values()) if (ident !== undefined && !rule.inShadow) checks.push({ rule, ident });
  try {
    const decisions = await deps.throttler.peek(checks);
    for (const { scope, remaining, resetMs } of decisions)
      budgets.set(scope, { remaining, reset_seconds: Math.ceil(resetMs / 1000) });
  } catch (error) {
    logStoreFailure(deps.logger, error, 'could not read the caller budgets; /api/rate-limits/ answers without them');
  }
  return budgets;
}

/**
 * Each scope's rule for this caller, by scope: its plan's or its override's where one sets the scope's rate
 * (docs/throttling.md "Plans and overrides"), with who the scope counts the caller as; the settings' rule and no
 * identity where the scope does not apply to it.
 */
export function ownChecks(deps: Deps, rules: ReadonlyMap<ScopeName, ScopeRule>, ctx: Context): OwnChecks {
  const checks: OwnChecks = new Map();
  const userId = ctx.state.user?.id;
  for (const base of rules.values()) {
    const ident = identOf(deps, ctx, base);
    const rule = ident === undefined || !deps.limits ? base : deps.limits.ruleFor(base, ident, userId, Date.now());
    checks.set(base.scope, { rule, ident });
  }
  return checks;
}

/** Who `rule` counts this caller as, or undefined when the scope does not apply to it. */
function identOf(deps: Deps, ctx: Context, rule: ScopeRule): string | undefined {
  const { user } = ctx.state;
  if (rule.scope === 'anon') return user ? undefined : identify(ctx, rule, deps);
  if (rule.keyedBy === 'user') return user ? `user:${user.id}` : undefined;
  if (rule.keyedBy === 'username') return user ? loginIdent(user.username, deps.cursorSecret) : undefined;
  return identify(ctx, rule, deps);
}
