export { createThrottler, isAdmitted, throttleKey } from './consume.js';
export type { Check, Decision, Throttler } from './throttler.js';
export { clientIp, ipKey, ipv6PrefixFor, LOGIN_ADDRESS_SCOPE } from './identity.js';
export { loginIdent, normaliseUsername } from './login.js';
export { MAX_RATE_LIMIT, MAX_RATE_WINDOW_MS, parseRate } from './rate.js';
export type { Rate } from './rate.js';
export { DEFAULT_KEYED_BY, KEYED_BY, OWN_RATE_SETTINGS, buildScopes, withShadow } from './scopes.js';
export type { KeyedBy, ScopeName, ScopeRule, ShadowSettings } from './scopes.js';
