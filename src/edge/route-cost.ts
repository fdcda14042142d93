import type { IncomingMessage } from 'node:http';
import type { Deps } from '../deps.js';
import type { ScopeName, ScopeRule } from '../throttle/index.js';
import { OWN_RATE_SETTINGS } from '../throttle/index.js';
import { wholeCost } from '../throttle/cost.js';

/**
 * What one request of a route costs in its scope's units (docs/throttling.md "Cost: requests that weigh more"): a
 * whole number, or a function of the request computed before the handler (from its query, say), which may read
 * only what arrives with the request line and headers.
 */
export type CostDeclaration = number | ((req: IncomingMessage) => number);

/** A route's cost as its guard applies it. */
export interface RouteCost {
  /** What the API document says of it: the units of every request, or that each request's are computed. */
  readonly units: number | 'per request';
  /**
   * The cost of one request counted by `rule`: the route's, when `rule` is the route's own scope (or the route
   * names none); undefined (1) when the request is counted by a general scope instead (a scope keyed by user falls
   * back to `anon` for a client without one, whose request is refused 401 before it does any of the route's work).
   */
  of(req: IncomingMessage, rule: ScopeRule): number | undefined;
  /** @throws Error (one line) when a fixed cost exceeds a limit of a scope it applies to, naming `route`. */
  check(route: string): void;
}

/**
 * The cost of a route that names `scope` (or none: the general scopes) and declares `declared`: THROTTLE_COSTS's
 * for that scope if it names one, else the declared one; undefined for a route whose requests cost 1 each.
 */
export function routeCost(
  deps: Pick<Deps, 'config'>,
  rules: ReadonlyMap<ScopeName, ScopeRule>,
  scope: ScopeName | undefined,
  declared: CostDeclaration | undefined,
): RouteCost | undefined {
  const costs = deps.config.THROTTLE_COSTS;
  const set = scope !== undefined && Object.hasOwn(costs, scope) ? costs[scope] : undefined;
  const cost = set ?? declared;
  if (typeof cost === 'number' && (!Number.isSafeInteger(cost) || cost < 1))
    throw new Error(
      `a route of the ${scope ?? 'general'} scopes declares the cost ${cost}: expected a whole number >= 1`,
    );
  if (cost === undefined || cost === 1) return undefined;
  const applies = (rule: ScopeRule) => scope === undefined || rule.scope === scope;
  const setting = set !== undefined ? `THROTTLE_COSTS=${scope}=${set}` : `its declared cost ${cost}`;
  if (typeof cost === 'function') {
    return { units: 'per request', of: (req, rule) => (applies(rule) ? wholeCost(cost(req)) : undefined), check() {} };
  }
  const units = cost;
  return {
    units,
    of: (_req, rule) => (applies(rule) ? units : undefined),
    check(route) {
      for (const name of scope === undefined ? ['anon', 'user'] : [scope]) {
        const rule = rules.get(name);
        if (!rule || units <= rule.rate.limit) continue;
        const rateSetting = OWN_RATE_SETTINGS[name] ?? 'THROTTLE_RATES';
        throw new Error(
          `${route} costs ${units} units (${setting}), more than the ${name} scope's limit of ` +
            `${rule.rate.limit} (${rateSetting}=${rule.rate.text}): no request of it would ever be admitted`,
        );
      }
    },
  };
}
