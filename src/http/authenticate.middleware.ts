import type { Middleware } from 'koa';
import { resolveToken } from '../auth/tokens.js';
import type { Deps } from '../deps.js';
import { Errors } from '../errors.js';

/**
 * Identifies the client from `Authorization: Bearer <token>` (or DRF's `Token <token>`). It only
 * identifies: a bad credential is remembered in `ctx.state.authError` and answered after the
 * throttle has counted the request against the anonymous budget.
 */
export function authenticate(deps: Pick<Deps, 'db' | 'clock'>): Middleware {
  return async (ctx, next) => {
    ctx.state.user = null;
    const header = ctx.get('Authorization').trim();
    const [scheme = '', ...rest] = header.split(/\s+/);
    if (/^(bearer|token)$/i.test(scheme)) {
      if (rest.length === 0) ctx.state.authError = Errors.invalidToken('Invalid token header. No credentials provided.');
      else if (rest.length > 1) ctx.state.authError = Errors.invalidToken('Invalid token header. Token string should not contain spaces.');
      else {
        const user = /^[0-9a-f]{64}$/.test(rest[0]!) ? await resolveToken(deps.db, rest[0]!, deps.clock.now()) : null;
        if (user) ctx.state.user = user;
        else ctx.state.authError = Errors.invalidToken();
      }
    }
    await next();
  };
}

/** Answers a bad credential (after throttling) for every route that authenticates. */
export const rejectBadCredentials: Middleware = async (ctx, next) => {
  if (ctx.state.authError) throw ctx.state.authError;
  await next();
};
