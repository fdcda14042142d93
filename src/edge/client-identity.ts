import type { IncomingMessage } from 'node:http';
import type { Context } from 'koa';
import type { Deps } from '../deps.js';
import { clientAddressOf } from '../server/client-address.js';
import type { Check, ScopeName, ScopeRule } from '../throttle/index.js';
import { ipKey, ipv6PrefixFor } from '../throttle/index.js';

// Who a request is counted as, by the throttle (throttle.ts), the concurrency limits (concurrency.ts) and the
// token lookups of clients without a user (authenticate.ts): the rule that counts it and the client's identity.

/** The rule a request is counted by: a scope keyed by user cannot key a client without one, anon counts it. */
export function ruleFor(
  named: ScopeRule | undefined,
  rules: ReadonlyMap<ScopeName, ScopeRule>,
  hasUser: boolean,
): ScopeRule {
  const general = hasUser ? 'user' : 'anon';
  const rule = named && (named.keyedBy !== 'user' || hasUser) ? named : rules.get(general);
  if (!rule) throw new Error(`throttle scope "${general}" is not configured`);
  return rule;
}

/**
 * The check that counts this request in the scope `named` or the general one (`ruleFor`): the rule, with the
 * client's plan or override applied (docs/throttling.md "Plans and overrides"), and who it counts the client as.
 */
export function checkOf(
  ctx: Context,
  named: ScopeRule | undefined,
  rules: ReadonlyMap<ScopeName, ScopeRule>,
  deps: Deps,
): Check {
  const { user } = ctx.state;
  const base = ruleFor(named, rules, user !== null);
  const ident = identify(ctx, base, deps);
  return { rule: deps.limits ? deps.limits.ruleFor(base, ident, user?.id, Date.now()) : base, ident };
}

/**
 * The check that would count a request of route `scope` if it had no user: where bad credentials
 * are counted. Undefined when throttling is off.
 */
export function anonymousCheck(
  deps: Deps,
  rules: ReadonlyMap<ScopeName, ScopeRule>,
  scope?: ScopeName,
): (req: IncomingMessage) => Check | undefined {
  const named = scope === undefined ? undefined : rules.get(scope);
  return (req) => {
    if (!deps.config.THROTTLE_ENABLED) return undefined;
    const base = ruleFor(named, rules, false);
    const ident = addressIdent(req, base, deps);
    return { rule: deps.limits ? deps.limits.ruleFor(base, ident, undefined, Date.now()) : base, ident };
  };
}

/** The identity `rule` counts this request's client by: `user:<id>` or `ip:<address or prefix>`. */
export function identify(ctx: Context, rule: ScopeRule, deps: Deps): string {
  if (rule.keyedBy === 'user' && ctx.state.user) return `user:${ctx.state.user.id}`;
  return addressIdent(ctx.req, rule, deps);
}

/** The identity `rule` counts a request's address by: `ip:<address or IPv6 prefix>`. */
function addressIdent(req: IncomingMessage, rule: ScopeRule, { config }: Pick<Deps, 'config'>): string {
  // X-Forwarded-For counts only from a trusted proxy (TRUSTED_PROXIES): anyone else is their socket address.
  return `ip:${ipKey(clientAddressOf(req, config), ipv6PrefixFor(rule.scope, config))}`;
}
