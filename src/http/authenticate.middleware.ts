import type { IncomingMessage } from 'node:http';
import type { Context, Middleware } from 'koa';
import { checkToken, hashToken, type TokenCheck } from '../auth/tokens.js';
import type { KeyedTurns, UnknownTokens } from '../auth/unknown-tokens.js';
import type { User } from '../auth/users.repository.js';
import type { Deps } from '../deps.js';
import { Errors } from '../errors.js';
import type { Check } from '../throttle/index.js';

/** What keeps tokens no one knows from costing the database, shared by every route of a process. */
export interface LookupGuard {
  unknown: UnknownTokens;
  /** One token lookup at a time per anonymous client and scope (see `identify`). */
  turns: KeyedTurns;
  /** The check a request would be counted by without a user (its address); undefined when unthrottled. */
  anonymousCheck: (req: IncomingMessage) => Check | undefined;
}

type AuthDeps = Pick<Deps, 'db' | 'clock' | 'readCache' | 'throttler'>;

/** A token's user, or why it is refused. */
type Identity = { state: 'live'; user: User } | { state: Exclude<TokenCheck['state'], 'live'> };
const UNKNOWN: Identity = { state: 'unknown' };

/**
 * Identifies the client from `Authorization: Bearer <token>` (or DRF's `Token <token>`). It only
 * identifies: a bad credential is remembered in `ctx.state.authError` and answered after the
 * throttle has counted the request against the anonymous budget.
 */
export function authenticate(deps: AuthDeps, guard: LookupGuard): Middleware {
  return async (ctx, next) => {
    ctx.state.user = null;
    // The lookup's turn ends here at the latest, also when the lookup or anything after it throws.
    try {
      await identifyClient(ctx, deps, guard);
      await next();
    } finally {
      ctx.state.afterThrottle?.();
    }
  };
}

async function identifyClient(ctx: Context, deps: AuthDeps, guard: LookupGuard): Promise<void> {
  const header = ctx.get('Authorization').trim();
  const [scheme = '', ...rest] = header.split(/\s+/);
  if (!/^(bearer|token)$/i.test(scheme)) return;
  if (rest.length === 0) ctx.state.authError = Errors.invalidToken('Invalid token header. No credentials provided.');
  else if (rest.length > 1)
    ctx.state.authError = Errors.invalidToken('Invalid token header. Token string should not contain spaces.');
  else {
    const check = /^[0-9a-f]{64}$/.test(rest[0]!) ? await identify(ctx, deps, guard, rest[0]!) : UNKNOWN;
    if (check.state === 'live') ctx.state.user = check.user;
    else ctx.state.authError = refusal(check.state);
  }
}

/**
 * The token's user, or why it is refused: remembered by this worker (confirmed against the token
 * epoch while the throttle runs, see `rejectBadCredentials`), else looked up in PostgreSQL — but
 * not for a token just found unknown, nor for a client its address's budget has already refused
 * once it has presented MAX_STRIKES bad tokens while refused (the request is counted there as bad
 * credentials are, docs/architecture.md "Auth and errors"). Lookups of one address take turns,
 * each until the throttle has counted its request, so a flood of random tokens from it costs at
 * most its anonymous budget plus MAX_STRIKES lookups per process. The lookup that finds a live
 * token also says why another is refused, so the reason costs no extra query.
 */
async function identify(ctx: Context, deps: AuthDeps, guard: LookupGuard, token: string): Promise<Identity> {
  const now = deps.clock.now();
  const lookup = () => checkToken(deps.db, token, now);
  const tokens = deps.readCache?.tokens;
  const tokenHash = hashToken(token);
  const recalled = tokens?.recall(tokenHash, now, lookup);
  if (recalled) {
    ctx.state.tokenConfirmed = recalled.confirm;
    return { state: 'live', user: recalled.user };
  }
  if (guard.unknown.has(tokenHash, now.getTime())) return UNKNOWN;
  const check = guard.anonymousCheck(ctx.req);
  const client = check && `${check.rule.scope} ${check.ident}`;
  let refused = false;
  if (check && client) {
    ctx.state.afterThrottle = await guard.turns.enter(client);
    const nowMs = deps.clock.now().getTime();
    refused = deps.throttler.isRefused(check);
    if (guard.unknown.has(tokenHash, nowMs) || (refused && guard.unknown.struckOut(client, nowMs))) return UNKNOWN;
  }
  const found = tokens ? await tokens.lookUp(tokenHash, lookup) : await lookup();
  if (found.state === 'live') return { state: 'live', user: found.user };
  if (found.state === 'unknown') guard.unknown.add(tokenHash, deps.clock.now().getTime());
  if (refused && client) guard.unknown.strike(client, deps.clock.now().getTime());
  return found;
}

/** DRF's `Invalid token.`, with RFC 6750's error_description where the token's end is known (docs/api.md). */
function refusal(state: Exclude<TokenCheck['state'], 'live'>) {
  if (state === 'expired') return Errors.invalidToken('Invalid token.', 'The token has expired');
  if (state === 'revoked') return Errors.invalidToken('Invalid token.', 'The token has been revoked');
  return Errors.invalidToken();
}

/** Answers a bad credential (after throttling) for every route that authenticates. */
export const rejectBadCredentials: Middleware = async (ctx, next) => {
  const state = ctx.state.tokenConfirmed ? await ctx.state.tokenConfirmed : 'live';
  if (state !== 'live') {
    ctx.state.user = null;
    throw refusal(state);
  }
  if (ctx.state.authError) throw ctx.state.authError;
  await next();
};
