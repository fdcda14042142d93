import compose from 'koa-compose';
import type { Middleware } from 'koa';
import type { Deps } from '../deps.js';
import { Errors } from '../errors.js';
import { parseRate, withShadow, type KeyedBy, type ScopeName, type ScopeRule } from '../throttle/index.js';
import { KeyedTurns, UnknownTokens } from '../auth/unknown-tokens.js';
import { authenticate, rejectBadCredentials } from './authenticate.middleware.js';
import { refusalGate, refuseKnown, type RefuseKnown } from './known-refusal.js';
import { createConcurrencyLimits } from './concurrency.middleware.js';
import { anonymousCheck, createThrottle } from './throttle.middleware.js';

export type Guard = ReturnType<typeof createGuard>;

/**
 * A guard's middleware, with what answers a client without credentials that this process already knows the throttle
 * refuses before its route's chain: `refuseKnown` before the app (early-refusal.ts), `refusalGate` inside it.
 */
export type GuardMiddleware = Middleware & { refuseKnown: RefuseKnown; refusalGate: Middleware };

/** A route's own throttle scope: its name, its default rate (THROTTLE_RATES overrides it) and key. */
export interface ScopeDeclaration {
  scope?: ScopeName;
  rate?: string;
  keyedBy?: KeyedBy;
  /** The media types the route can answer in (default JSON only); an Accept with none of them is 406. */
  representations?: readonly string[];
}

const JSON_ONLY = ['application/json'] as const;

/**
 * The front of every API route: identify the client, count it against its throttle scope, then
 * refuse what it cannot be served (an Accept without JSON: 406) and bad credentials. A
 * configured scope is named: `guard({ scope: 'reports' })`; a new one for another expensive
 * endpoint is declared in the same line:
 * `guard({ scope: 'exports', rate: '5/min', keyedBy: 'user' })`.
 */
export function createGuard(deps: Deps, rules: Map<ScopeName, ScopeRule>) {
  const unknown = new UnknownTokens();
  const turns = new KeyedTurns();
  const throttleFor = createThrottle(deps, rules);
  const limitFor = createConcurrencyLimits(deps, rules);
  return ({ scope, rate, keyedBy = 'user', representations = JSON_ONLY }: ScopeDeclaration = {}): GuardMiddleware => {
    if (scope !== undefined && rate !== undefined && !rules.has(scope)) {
      const text = Object.hasOwn(deps.config.THROTTLE_RATES, scope)
        ? (deps.config.THROTTLE_RATES[scope] as string)
        : rate;
      const shadows = { rates: deps.config.THROTTLE_SHADOW_RATES, scopes: deps.config.THROTTLE_SHADOW_SCOPES };
      rules.set(scope, withShadow({ scope, rate: parseRate(text), keyedBy }, shadows));
    }
    const check = anonymousCheck(deps, rules, scope);
    const identify = authenticate(deps, { unknown, turns, anonymousCheck: check });
    // A concurrency limit before the rate: a request it refuses is not counted by the rate.
    const limit = limitFor(scope);
    const counted = limit ? [limit, throttleFor(scope)] : [throttleFor(scope)];
    const guard = compose([identify, ...counted, negotiate(representations), rejectBadCredentials]);
    const refuse = refuseKnown(deps, check);
    return Object.assign(guard, { refuseKnown: refuse, refusalGate: refusalGate(refuse) });
  };
}

/** A client that accepts none of the route's representations gets 406 (counted, as any request). */
function negotiate(representations: readonly string[]): Middleware {
  return async (ctx, next) => {
    const accept = ctx.get('Accept');
    if (accept && !ctx.accepts(...representations)) throw Errors.notAcceptable();
    await next();
  };
}
