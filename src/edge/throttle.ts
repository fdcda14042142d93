import type { Context } from 'koa';
import type { Deps } from '../deps.js';
import type { Check, ScopeName, ScopeRule } from '../throttle/index.js';
import { createRefusalAnswers, longestWait, rateLimitHeaders } from './throttle-answers.js';
import { checkOf } from './client-identity.js';
import { answerFor, createDecide, takenFrom, type Decide, type Limit } from './decision.js';
import { answerRefusal } from './refusal.js';
import { createBurstLogger, withoutRedis } from './throttle-store-down.js';
import { isOverLimit } from '../throttle/cost.js';
import { overLimitAnswer } from './throttle-answers.js';
import type { RouteCost } from './route-cost.js';

/**
 * The throttle of one process: `throttleFor(scope)` counts a request against its scope before any
 * permission check or other work. Without a named scope the general rate applies: `user` for an
 * authenticated client, `anon` otherwise. A named scope (e.g. `token-obtain`) replaces the
 * general rate on its route; one keyed by user (e.g. `reports`) counts only authenticated
 * clients, and anonymous ones (or bad credentials) against `anon`. Store failures are logged once per burst for all
 * routes together; what a check Redis did not answer gets is THROTTLE_FAILURE_MODE's (see `withoutRedis`). The
 * decision itself is recorded by decision.ts, as every limit's is.
 * @throws Error from `throttleFor` when the named scope has no rule (at start, where the route is declared).
 */
export function createThrottle(
  deps: Deps,
  rules: ReadonlyMap<ScopeName, ScopeRule>,
  decide: Decide = createDecide(deps),
): (scope?: ScopeName, cost?: RouteCost) => RateCheck {
  const limit = rateLimit(deps);
  decide.declare(rules.keys(), rules.values());
  return (scope, cost) => {
    if (scope !== undefined && !rules.has(scope)) throw new Error(`throttle scope "${scope}" is not configured`);
    if (scope !== undefined && rules.get(scope)?.keyedBy === 'username')
      throw new Error(`throttle scope "${scope}" counts usernames: the login route checks it`);
    if (scope !== undefined) decide.declare([scope], [rules.get(scope) as ScopeRule]);
    return throttle(deps, rules, decide, limit, scope, cost);
  };
}

/**
 * Counts one request against its scope: true when it may go on (with its RateLimit fields set), false when it was
 * answered here with a 429.
 */
export type RateCheck = (ctx: Context) => Promise<boolean>;

/**
 * A rate as the decision takes it (decision.ts): the sliding log in Redis; without Redis,
 * THROTTLE_FAILURE_MODE (this worker's share of the limit, admitted uncounted, or a 503).
 */
function rateLimit(deps: Deps): Limit {
  const localShare = deps.alone?.rates;
  const answers = createRefusalAnswers();
  return {
    store: {
      errors: createBurstLogger(deps, 'throttle store unavailable; applying THROTTLE_FAILURE_MODE'),
      answered: () => localShare?.answered(),
    },
    series: (scope) => scope,
    async take(check: Check) {
      // The throttler applies THROTTLE_TIMEOUT_MS (see deps.ts).
      const decisions = await deps.throttler.consume([check]);
      return takenFrom(decisions, longestWait(decisions));
    },
    withoutStore(check) {
      const decisions = withoutRedis(deps.config, localShare, check);
      return decisions && takenFrom(decisions, longestWait(decisions));
    },
    answer: (taken, counted, rule) =>
      isOverLimit(taken.decisions) ? overLimitAnswer(counted) : answerFor(answers, counted, taken, rule),
  };
}

function throttle(
  deps: Deps,
  rules: ReadonlyMap<ScopeName, ScopeRule>,
  decide: Decide,
  limit: Limit,
  scope?: ScopeName,
  cost?: RouteCost,
): RateCheck {
  const { config } = deps;
  // Looked up once: createThrottle has checked that a named scope has its rule.
  const named = scope === undefined ? undefined : rules.get(scope);
  return async (ctx) => {
    if (!config.THROTTLE_ENABLED) return true;
    // The client's plan or override applied (docs/throttling.md "Plans and overrides").
    const check: Check = checkOf(ctx, named, rules, deps);
    const { rule } = check;
    // Its weight in its scope's units, if its route says (docs/throttling.md "Cost: requests that weigh more").
    const units = cost?.of(ctx.req, rule);
    if (units !== undefined) check.cost = units;
    const decided = await decide.take(limit, check);
    if (!decided) return true;
    if (decided.refusal) {
      answerRefusal(ctx, decided.refusal.refusal, decided.refusal.answer);
      return false;
    }
    const { decisions } = decided;
    const headers = rateLimitHeaders(decisions);
    // Straight to Node: nothing has been sent yet, and Koa's setter adds only checks for that.
    for (const name in headers) ctx.res.setHeader(name, headers[name] as string);
    // A route that checks another scope of its own (the login's) lists both in the fields; a
    // decision this worker took alone says nothing of the budget in Redis (src/api/rate-limits/own-budget.ts).
    if (!decisions[0]?.degraded) ctx.state.rateLimit = decisions;
    return true;
  };
}
