import type { Context, Middleware } from 'koa';
import { findLiveToken, hashToken, resolveToken } from '../auth/tokens.js';
import type { User } from '../auth/users.repository.js';
import type { Deps } from '../deps.js';
import { Errors } from '../errors.js';

/**
 * Identifies the client from `Authorization: Bearer <token>` (or DRF's `Token <token>`). It only
 * identifies: a bad credential is remembered in `ctx.state.authError` and answered after the
 * throttle has counted the request against the anonymous budget.
 */
export function authenticate(deps: Pick<Deps, 'db' | 'clock' | 'readCache'>): Middleware {
  return async (ctx, next) => {
    ctx.state.user = null;
    const header = ctx.get('Authorization').trim();
    const [scheme = '', ...rest] = header.split(/\s+/);
    if (/^(bearer|token)$/i.test(scheme)) {
      if (rest.length === 0)
        ctx.state.authError = Errors.invalidToken('Invalid token header. No credentials provided.');
      else if (rest.length > 1)
        ctx.state.authError = Errors.invalidToken('Invalid token header. Token string should not contain spaces.');
      else {
        const user = /^[0-9a-f]{64}$/.test(rest[0]!) ? await identify(ctx, deps, rest[0]!) : null;
        if (user) ctx.state.user = user;
        else ctx.state.authError = Errors.invalidToken();
      }
    }
    await next();
  };
}

/**
 * The token's user: remembered by this worker (confirmed against the token epoch while the
 * throttle runs, see `rejectBadCredentials`), else looked up in PostgreSQL.
 */
async function identify(
  ctx: Context,
  deps: Pick<Deps, 'db' | 'clock' | 'readCache'>,
  token: string,
): Promise<User | null> {
  const now = deps.clock.now();
  const lookup = () => findLiveToken(deps.db, token, now);
  const tokens = deps.readCache?.tokens;
  if (!tokens) return resolveToken(deps.db, token, now);
  const tokenHash = hashToken(token);
  const recalled = tokens.recall(tokenHash, now, lookup);
  if (!recalled) return tokens.lookUp(tokenHash, lookup);
  ctx.state.tokenConfirmed = recalled.confirm;
  return recalled.user;
}

/** Answers a bad credential (after throttling) for every route that authenticates. */
export const rejectBadCredentials: Middleware = async (ctx, next) => {
  if (ctx.state.tokenConfirmed && !(await ctx.state.tokenConfirmed)) {
    ctx.state.user = null;
    throw Errors.invalidToken();
  }
  if (ctx.state.authError) throw ctx.state.authError;
  await next();
};
