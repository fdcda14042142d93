import type { Context, Middleware } from 'koa';
import type { Deps } from '../deps.js';
import { Errors } from '../base/errors.js';
import { parseRate, withShadow, type KeyedBy, type ScopeName, type ScopeRule } from '../throttle/index.js';
import { KeyedTurns, UnknownTokens } from '../auth/unknown-tokens.js';
import { checkCredentials, identifyClient, type LookupGuard } from './authenticate.js';
import { refuseKnown, type RefuseKnown } from './known-refusal.js';
import { createConcurrencyLimits } from './concurrency.js';
import { anonymousCheck } from './client-identity.js';
import { answerRefusal } from './refusal.js';
import { createThrottle } from './throttle.js';
import { createDecide } from './decision.js';
import { routeCost, type CostDeclaration, type RouteCost } from './route-cost.js';

export type Guard = ReturnType<typeof createGuard>;

/**
 * A guard's middleware, with what answers a client without credentials that this process already knows the
 * throttle refuses: `refuseKnown`, which the guard runs first and the listener runs before the app (src/listener/early-refusal.ts).
 */
export type GuardMiddleware = Middleware & { refuseKnown: RefuseKnown; cost?: RouteCost };

/** A route's own throttle scope: its name, its default rate (THROTTLE_RATES overrides it) and key. */
export interface ScopeDeclaration {
  scope?: ScopeName;
  rate?: string;
  keyedBy?: KeyedBy;
  /**
   * What one request costs in the scope's units (default 1; THROTTLE_COSTS overrides a fixed one), or a function
   * of the request computed before the handler (docs/throttling.md "Cost: requests that weigh more").
   */
  cost?: CostDeclaration;
  /** The media types the route can answer in (default JSON only); an Accept with none of them is 406. */
  representations?: readonly string[];
}

const JSON_ONLY = ['application/json'] as const;

/**
 * The front of every API route: identify the client, count it against its throttle scope, then
 * refuse what it cannot be served (an Accept without JSON: 406) and bad credentials. A
 * configured scope is named: `guard({ scope: 'reports' })`; a new one for another expensive
 * endpoint is declared in the same line:
 * `guard({ scope: 'exports', rate: '5/min', keyedBy: 'user' })`; a request that weighs more than one declares
 * its cost: `guard({ scope: 'exports', cost: 5 })`.
 */
export function createGuard(deps: Deps, rules: Map<ScopeName, ScopeRule>) {
  const unknown = new UnknownTokens();
  const turns = new KeyedTurns(deps.config.DATABASE_WAIT_MS);
  // One decision for every limit of the app (decision.ts): its metric series and shadow log are shared.
  const decide = createDecide(deps);
  const throttleFor = createThrottle(deps, rules, decide);
  const limitFor = createConcurrencyLimits(deps, rules, decide);
  return ({
    scope,
    rate,
    keyedBy = 'user',
    cost,
    representations = JSON_ONLY,
  }: ScopeDeclaration = {}): GuardMiddleware => {
    if (scope !== undefined && rate !== undefined && !rules.has(scope)) {
      const text = Object.hasOwn(deps.config.THROTTLE_RATES, scope)
        ? (deps.config.THROTTLE_RATES[scope] as string)
        : rate;
      const shadows = { rates: deps.config.THROTTLE_SHADOW_RATES, scopes: deps.config.THROTTLE_SHADOW_SCOPES };
      rules.set(scope, withShadow({ scope, rate: parseRate(text), keyedBy }, shadows));
    }
    const check = anonymousCheck(deps, rules, scope);
    const lookups: LookupGuard = { unknown, turns, anonymousCheck: check };
    const holdSlot = limitFor(scope);
    const weight = routeCost(deps, rules, scope, cost);
    const countRate = throttleFor(scope, weight);
    const refuse = refuseKnown(deps, decide, check, weight);
    const guard: Middleware = async (ctx, next) => {
      ctx.state.user = null;
      // 1. A client this process knows the throttle refuses, without credentials: answered from memory.
      const known = refuse(ctx.req);
      if (known) return answerRefusal(ctx, known.refusal, known.answer);
      // 2. Who it is (a token lookup takes its turn per address), then 3. counted: a slot of the scope's
      // requests in progress first, so a request it refuses is not counted by the rate, then the rate.
      const identity = await identifyClient(ctx, deps, lookups);
      ctx.state.user = identity.user;
      let held;
      try {
        held = holdSlot ? await holdSlot(ctx) : undefined;
        if (held === 'refused') return;
        if (!(await countRate(ctx))) return void (await held?.release());
      } catch (error) {
        if (held !== undefined && held !== 'refused') await held.release(); // the rate check failed: a 503
        throw error;
      } finally {
        identity.endTurn?.();
      }
      // 4. Only then what it cannot be served: a representation it does not accept, a bad credential.
      try {
        negotiate(ctx, representations);
        await checkCredentials(ctx, identity);
        await next();
      } finally {
        await held?.release();
      }
    };
    return Object.assign(guard, weight ? { refuseKnown: refuse, cost: weight } : { refuseKnown: refuse });
  };
}

/** A client that accepts none of the route's representations gets 406 (counted, as any request). */
function negotiate(ctx: Context, representations: readonly string[]): void {
  const accept = ctx.get('Accept');
  if (accept && !ctx.accepts(...representations)) throw Errors.notAcceptable();
}
