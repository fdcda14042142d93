import type { IncomingMessage } from 'node:http';
import type { Context } from 'koa';
import { checkToken, hashToken, type TokenCheck } from '../auth/tokens.js';
import type { KeyedTurns, UnknownTokens } from '../auth/unknown-tokens.js';
import type { User } from '../auth/users.repository.js';
import type { Deps } from '../deps.js';
import { Errors, type AppError } from '../base/errors.js';
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
type Found = { state: 'live'; user: User } | { state: Exclude<TokenCheck['state'], 'live'> };
const UNKNOWN: Found = { state: 'unknown' };

/**
 * Who a request's `Authorization: Bearer <token>` (or DRF's `Token <token>`) says the client is. It only
 * identifies: the guard (guard.ts) counts the request first (a bad credential against the anonymous
 * budget), then answers `credentialError` and awaits `confirmed`.
 */
export interface Identity {
  user: User | null;
  /** A bad credential, answered after the throttle has counted the request. */
  credentialError?: AppError;
  /** For a token remembered by this worker: still live, or why not (see read-cache/token-cache.ts). */
  confirmed?: Promise<TokenCheck['state']>;
  /** Ends this request's turn at looking a token up: the guard calls it once the throttle has counted it. */
  endTurn?: () => void;
}

/** Reads the request's credentials; a lookup's turn, if one was taken, is in `endTurn`. */
export async function identifyClient(ctx: Context, deps: AuthDeps, guard: LookupGuard): Promise<Identity> {
  const header = ctx.get('Authorization').trim();
  const [scheme = '', ...rest] = header.split(/\s+/);
  if (!/^(bearer|token)$/i.test(scheme)) return { user: null };
  if (rest.length === 0)
    return { user: null, credentialError: Errors.invalidToken('Invalid token header. No credentials provided.') };
  if (rest.length > 1)
    return {
      user: null,
      credentialError: Errors.invalidToken('Invalid token header. Token string should not contain spaces.'),
    };
  const identity: Identity = { user: null };
  let check = UNKNOWN;
  try {
    if (/^[0-9a-f]{64}$/.test(rest[0]!)) check = await identify(ctx, deps, guard, rest[0]!, identity);
  } catch (error) {
    identity.endTurn?.(); // the lookup failed: its turn ends with it
    throw error;
  }
  if (check.state === 'live') identity.user = check.user;
  else identity.credentialError = refusal(check.state);
  return identity;
}

/**
 * The user this worker remembers for a request's token, with no I/O (undefined: no token, or not remembered): the
 * listener's guess, before Koa (src/listener/classify.ts), that knowing the client costs no PostgreSQL (docs/throttling.md "Past capacity: admission and shedding").
 */
export function rememberedClient(
  authorization: string | undefined,
  deps: Pick<AuthDeps, 'readCache' | 'clock'>,
): User | undefined {
  const tokens = deps.readCache?.tokens;
  const [scheme = '', token, extra] = (authorization ?? '').trim().split(/\s+/);
  if (!tokens || extra !== undefined || !/^(bearer|token)$/i.test(scheme) || !/^[0-9a-f]{64}$/.test(token ?? ''))
    return undefined;
  return tokens.knows(hashToken(token!), deps.clock.now());
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
async function identify(
  ctx: Context,
  deps: AuthDeps,
  guard: LookupGuard,
  token: string,
  identity: Identity,
): Promise<Found> {
  const now = deps.clock.now();
  const lookup = () => checkToken(deps.db, token, now);
  const tokens = deps.readCache?.tokens;
  const tokenHash = hashToken(token);
  const recalled = tokens?.recall(tokenHash, now, lookup);
  if (recalled) {
    identity.confirmed = recalled.confirm;
    return { state: 'live', user: recalled.user };
  }
  if (guard.unknown.has(tokenHash, now.getTime())) return UNKNOWN;
  const check = guard.anonymousCheck(ctx.req);
  const client = check && `${check.rule.scope} ${check.ident}`;
  let refused = false;
  if (check && client) {
    identity.endTurn = await guard.turns.enter(client);
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

/** Answers a bad credential, once the throttle has counted the request: a 401 with why. */
export async function checkCredentials(ctx: Context, identity: Identity): Promise<void> {
  const state = identity.confirmed ? await identity.confirmed : 'live';
  if (state !== 'live') {
    ctx.state.user = null;
    throw refusal(state);
  }
  if (identity.credentialError) throw identity.credentialError;
}
