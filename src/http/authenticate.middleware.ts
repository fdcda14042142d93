import type { Context, Middleware } from 'koa';
import { checkToken, hashToken, type TokenCheck } from '../auth/tokens.js';
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
        const check: Identity = /^[0-9a-f]{64}$/.test(rest[0]!)
          ? await identify(ctx, deps, rest[0]!)
          : { state: 'unknown' };
        if (check.state === 'live') ctx.state.user = check.user;
        else ctx.state.authError = refusal(check.state);
      }
    }
    await next();
  };
}

/** A token's user, or why it is refused. */
type Identity = { state: 'live'; user: User } | { state: Exclude<TokenCheck['state'], 'live'> };

/**
 * The token's user: remembered by this worker (confirmed against the token epoch while the
 * throttle runs, see `rejectBadCredentials`), else looked up in PostgreSQL. The lookup that
 * finds a live token also says why another is refused, so the reason costs no extra query.
 */
async function identify(
  ctx: Context,
  deps: Pick<Deps, 'db' | 'clock' | 'readCache'>,
  token: string,
): Promise<Identity> {
  const now = deps.clock.now();
  const lookup = () => checkToken(deps.db, token, now);
  const tokens = deps.readCache?.tokens;
  if (!tokens) return lookup();
  const tokenHash = hashToken(token);
  const recalled = tokens.recall(tokenHash, now, lookup);
  if (!recalled) return tokens.lookUp(tokenHash, lookup);
  ctx.state.tokenConfirmed = recalled.confirm;
  return { state: 'live', user: recalled.user };
}

/** DRF's `Invalid token.`, with RFC 6750's error_description where the token's end is known (docs/api.md). */
function refusal(state: Exclude<TokenCheck['state'], 'live'>) {
  if (state === 'expired') return Errors.invalidToken('Invalid token.', 'The token has expired');
  if (state === 'revoked') return Errors.invalidToken('Invalid token.', 'The token has been revoked');
  return Errors.invalidToken();
}

/** Answers a bad credential (after throttling) for every route that authenticates. */
export const rejectBadCredentials: Middleware = async (ctx, next) => {
  const confirmed = ctx.state.tokenConfirmed as Promise<TokenCheck['state']> | undefined;
  const state = confirmed ? await confirmed : 'live';
  if (state !== 'live') {
    ctx.state.user = null;
    throw refusal(state);
  }
  if (ctx.state.authError) throw ctx.state.authError;
  await next();
};
