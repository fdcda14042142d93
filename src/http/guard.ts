import compose from 'koa-compose';
import type { Middleware } from 'koa';
import type { Deps } from '../deps.js';
import type { ScopeName, ScopeRule } from '../throttle/index.js';
import { authenticate, rejectBadCredentials } from './authenticate.middleware.js';
import { createThrottle } from './throttle.middleware.js';

/**
 * The front of every API route: identify the client, count it against its throttle scope, then
 * refuse bad credentials. Give an expensive route its own scope with `guard({ scope: 'reports' })`.
 */
export type Guard = ReturnType<typeof createGuard>;

export function createGuard(deps: Deps, rules: ReadonlyMap<ScopeName, ScopeRule>) {
  const identify = authenticate(deps);
  const throttleFor = createThrottle(deps, rules);
  return (options: { scope?: ScopeName } = {}): Middleware =>
    compose([identify, throttleFor(options.scope), rejectBadCredentials]);
}
