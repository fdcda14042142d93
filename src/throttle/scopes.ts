import { parseRate, type Rate } from './rate.js';

/** A throttle scope: `'anon' | 'user' | 'token-obtain' | 'reports' | 'login'` or any other declared one. */
export type ScopeName = string;

/**
 * What a client is counted by in a scope: its client IP (see `ipKey`), its user id, or the
 * username a login names (see `loginIdent`; only the login route checks such a scope).
 * `/api/rate-limits/` shows it as `keyed_by`, and its schema lists these values.
 */
export const KEYED_BY = ['ip', 'user', 'username'] as const;
export type KeyedBy = (typeof KEYED_BY)[number];

/** One scope's budget and what it is counted by. */
export interface ScopeRule {
  scope: ScopeName;
  rate: Rate;
  keyedBy: KeyedBy;
  /**
   * A rate tried beside `rate` (THROTTLE_SHADOW_RATES): it decides the requests `rate` admits, on a
   * log of its own, and never refuses; its would-be refusals are marked (docs/throttling.md "Shadow rules").
   */
  shadow?: Rate;
  /** The scope runs wholly in shadow (THROTTLE_SHADOW_SCOPES): `rate` is decided and counted, never enforced. */
  inShadow?: boolean;
  /** The plan whose rate this is, when a plan set it (docs/throttling.md "Plans and overrides"). */
  plan?: string;
  /** The override whose rate this is, while one is in force for the client. */
  override?: number;
  /** The requests in progress its plan allows the client in this scope (THROTTLE_PLAN_CONCURRENCY). */
  inProgress?: number;
}

/** Which scopes run a shadow rate beside their own, and which run wholly in shadow. */
export interface ShadowSettings {
  rates: Readonly<Record<ScopeName, string>>;
  scopes: ReadonlyArray<ScopeName>;
}

/**
 * `rule` with its shadow settings: a shadow rate beside it, or the whole scope in shadow.
 * @throws Error on a bad shadow rate (see `parseRate`).
 */
export function withShadow(rule: ScopeRule, shadows: ShadowSettings | undefined): ScopeRule {
  if (shadows?.scopes.includes(rule.scope)) return { ...rule, inShadow: true };
  const text = shadows && Object.hasOwn(shadows.rates, rule.scope) ? shadows.rates[rule.scope] : undefined;
  return text === undefined ? rule : { ...rule, shadow: parseRate(text) };
}

/** What the scopes of docs/architecture.md "Throttling" are keyed by; other scopes must say so in `buildScopes`. */
export const DEFAULT_KEYED_BY: Readonly<Record<string, KeyedBy>> = {
  anon: 'ip',
  user: 'user',
  'token-obtain': 'ip',
  reports: 'user',
  login: 'username',
};

/**
 * The scopes of docs/architecture.md "Throttling" have their own settings; THROTTLE_RATES may name
 * only the scopes routes declare with `guard({ scope, rate })` (docs/configuration.md "Rules between settings").
 */
export const OWN_RATE_SETTINGS: Readonly<Record<string, string>> = {
  anon: 'THROTTLE_ANON',
  user: 'THROTTLE_USER',
  'token-obtain': 'THROTTLE_TOKEN_OBTAIN',
  reports: 'THROTTLE_REPORTS',
  login: 'THROTTLE_LOGIN',
};

const SCOPE_NAME = /^[a-z0-9][a-z0-9._-]*$/;

/**
 * Builds the scope table (scope name → rule) from configured rate texts, e.g.
 * `buildScopes({ anon: '20/min', user: '100/min', 'token-obtain': '5/min', reports: '10/hour' })`.
 *
 * `keyedBy` adds to (or overrides) {@link DEFAULT_KEYED_BY} for other scopes. Scope names are
 * lower-case letters, digits, `.`, `_` and `-`, so they are safe in Redis keys and header fields.
 *
 * `shadows` (THROTTLE_SHADOW_RATES and THROTTLE_SHADOW_SCOPES) adds shadow rules, see `withShadow`.
 *
 * @throws Error on a bad scope name, a bad rate (see `parseRate`), or a scope whose key is unknown.
 */
export function buildScopes(
  rates: Readonly<Record<ScopeName, string>>,
  keyedBy: Readonly<Record<ScopeName, KeyedBy>> = {},
  shadows?: ShadowSettings,
): ReadonlyMap<ScopeName, ScopeRule> {
  const table = new Map<ScopeName, ScopeRule>();
  for (const [scope, text] of Object.entries(rates)) {
    if (!SCOPE_NAME.test(scope)) throw new Error(`invalid throttle scope name ${JSON.stringify(scope)}`);
    const key = keyedBy[scope] ?? DEFAULT_KEYED_BY[scope];
    if (key === undefined) throw new Error(`throttle scope "${scope}" needs keyedBy 'ip' or 'user'`);
    table.set(scope, withShadow({ scope, rate: parseRate(text), keyedBy: key }, shadows));
  }
  return table;
}
