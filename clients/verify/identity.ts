import { setTimeout as sleep } from 'node:timers/promises';
import type { Client } from './client.js';
import type { Operation } from './history.js';
import { Stop } from './stop.js';

/** A GET that Paceline answers only to a signed-in user (docs/api.md: the event feed). */
const AUTHENTICATED_ONLY = 'api/events/?limit=1';
/** The most anonymous requests spent looking for the end of this address's budget. */
const MAX_ANONYMOUS = 500;
const AUTH_SCHEME = 'pass --auth-scheme NAME (Token for DRF’s TokenAuthentication)';
const IDENTITY_PATH = 'pass --identity-path PATH (a GET answered only to a signed-in user) or --auth-scheme NAME';

export interface IdentityFacts {
  username: string;
  scheme: string;
  limitsPath: string;
  /** `--identity-path`: when given, the one proof asked for. */
  identityPath?: string;
  /** Requests a second the anonymous budget is spent at, at most (`--rate`). */
  rate: number;
}

type Refuse = (why: string, advice?: string) => Stop;

/**
 * Identity is checked, not assumed (docs/verify.md "Identity is checked"): before any verdict about a user, the
 * service must show that it takes the user's token as that user. With `identityPath`, that path must answer
 * 2xx with the token and 401 or 403 without. Otherwise the first of these that shows it: the limits path
 * answers otherwise with the token than without (2xx against 401 or 403, another `RateLimit-Policy` scope,
 * another stated limit); the event feed answers 2xx with it and 401 or 403 without; or, once this address's
 * anonymous budget is spent on the limits path, the token is still admitted there (its budget is its own).
 * A service that ignores an `Authorization` scheme it does not know treats every request as anonymous, and
 * refusals of an anonymous budget would be judged as the user's. Returns how it showed, as a phrase; throws a
 * `Stop` naming the option to pass when nothing does.
 */
export async function confirmIdentity(
  clients: { withToken: Client; without: Client },
  facts: IdentityFacts,
): Promise<string> {
  const refuse: Refuse = (why, advice = AUTH_SCHEME) =>
    new Stop(
      `the service did not take ${facts.username}'s token as that user ("Authorization: ${facts.scheme} …": ${why}): ${advice}`,
    );
  if (facts.identityPath !== undefined) {
    const asked = await byAuthenticatedPath(clients, facts.identityPath, refuse);
    if (asked.proof !== undefined) return asked.proof;
    throw refuse(asked.seen, 'check --identity-path: it must answer 2xx with the token and 401 or 403 without');
  }
  const path = facts.limitsPath;
  const signedIn = await clients.withToken.sendPolitely({ path, f: 'identity' });
  if (isUnauthorised(signedIn)) throw refuse(`GET /${path} answered ${signedIn.status} with it`);
  const anonymous = await clients.without.send({ path, f: 'identity without token' });
  const difference = differenceOf(signedIn, anonymous);
  if (difference !== undefined) return `GET /${path} ${difference}`;
  const feed = await byAuthenticatedPath(clients, AUTHENTICATED_ONLY, refuse);
  if (feed.proof !== undefined) return feed.proof;
  const scope = scopeOf(signedIn.headers['ratelimit-policy']);
  if (scope !== undefined && scope === scopeOf(anonymous.headers['ratelimit-policy']))
    throw refuse(`GET /${path} names the RateLimit-Policy scope "${scope}" with it and without it`);
  const seen = `GET /${path} answered ${statusOf(signedIn)} with it and ${statusOf(anonymous)} without, ${feed.seen}`;
  return byOwnBudget(clients, facts, refuse, seen);
}

/** A path answered only to a signed-in user: 2xx with the token and 401 or 403 without shows it. */
async function byAuthenticatedPath(
  clients: { withToken: Client; without: Client },
  path: string,
  refuse: Refuse,
): Promise<{ proof?: string; seen: string }> {
  const signedIn = await clients.withToken.sendPolitely({ path, f: 'identity' });
  if (isUnauthorised(signedIn)) throw refuse(`GET /${path} answered ${signedIn.status} with it`);
  const anonymous = await clients.without.send({ path, f: 'identity without token' });
  const [withIt, withoutIt] = [statusOf(signedIn), statusOf(anonymous)];
  const seen = `GET /${path} answered ${withIt} with it and ${withoutIt} without`;
  if (!isOk(signedIn) || !isUnauthorised(anonymous)) return { seen };
  return { proof: `GET /${path} answered ${withIt} with the token and ${withoutIt} without`, seen };
}

/** What the limits path answers differently with the token, if anything: proof that it was recognised. */
function differenceOf(signedIn: Operation, anonymous: Operation): string | undefined {
  const [withIt, withoutIt] = [statusOf(signedIn), statusOf(anonymous)];
  if (isOk(signedIn) && isUnauthorised(anonymous)) return `answered ${withIt} with the token and ${withoutIt} without`;
  const [scope, anonymousScope] = [signedIn, anonymous].map((op) => scopeOf(op.headers['ratelimit-policy']));
  if (scope !== undefined && anonymousScope !== undefined && scope !== anonymousScope)
    return `named the RateLimit-Policy scope "${scope}" with the token and "${anonymousScope}" without`;
  const [limit, anonymousLimit] = [signedIn, anonymous].map((op) => statedLimit(op.headers));
  if (limit !== undefined && anonymousLimit !== undefined && limit !== anonymousLimit)
    return `stated a limit of ${limit} with the token and ${anonymousLimit} without`;
  return undefined;
}

/**
 * The token's budget is its own: this address's anonymous budget is spent on the limits path until a 429, then
 * the token must be admitted there, and the next anonymous request still refused. A token taken as anonymous
 * would share the spent budget and be refused too.
 */
async function byOwnBudget(
  clients: { withToken: Client; without: Client },
  facts: IdentityFacts,
  refuse: Refuse,
  seen: string,
): Promise<string> {
  const path = facts.limitsPath;
  const spending = await spendAnonymous(clients.without, path, facts.rate);
  if (typeof spending === 'string')
    throw refuse(`nothing shows it was recognised: ${seen}, and ${spending}`, IDENTITY_PATH);
  const spent = `this address's anonymous budget spent (${spending} anonymous requests to GET /${path} admitted, then a 429)`;
  const admitted = await clients.withToken.send({ path, f: 'identity: own budget' });
  if (admitted.status === 429) throw refuse(`with ${spent}, GET /${path} answered 429 with it too`);
  if (isUnauthorised(admitted)) throw refuse(`GET /${path} answered ${admitted.status} with it`);
  const after = await clients.without.send({ path, f: 'identity: anonymous budget' });
  if (admitted.status === null || after.status !== 429) {
    const why = `with ${spent}, GET /${path} answered ${statusOf(admitted)} with it and ${statusOf(after)} without right after`;
    throw refuse(`nothing shows it was recognised: ${why}`, IDENTITY_PATH);
  }
  return `with ${spent}, GET /${path} was admitted with the token (${admitted.status}) and refused without it right after`;
}

/** Anonymous requests, one at a time at most `rate` a second, until a 429: how many were admitted, or why not. */
async function spendAnonymous(without: Client, path: string, rate: number): Promise<number | string> {
  for (let admitted = 0; admitted < MAX_ANONYMOUS; admitted++) {
    const sent = Date.now();
    const op = await without.send({ path, f: 'identity: anonymous budget' });
    if (op.status === 429) return admitted;
    if (op.status === null) return `an anonymous request to GET /${path} got no answer (${op.error})`;
    await sleep(Math.max(0, sent + 1000 / rate - Date.now()));
  }
  return `${MAX_ANONYMOUS} anonymous requests to GET /${path} were all admitted`;
}

function isOk(op: Operation): boolean {
  return op.status !== null && op.status >= 200 && op.status < 300;
}

/** 401 or 403: refused as not signed in (or signed in with a token the service refuses). */
function isUnauthorised(op: Operation): boolean {
  return op.status === 401 || op.status === 403;
}

function statusOf(op: Operation): string {
  return op.status === null ? 'no answer' : String(op.status);
}

/** The first policy's name in `RateLimit-Policy: "user";q=100;w=60` (RFC draft: a quoted key). */
export function scopeOf(header: string | undefined): string | undefined {
  const match = /^\s*"?([^";,]+)"?/.exec(header ?? '');
  return match?.[1];
}

/** The limit an answer states: `RateLimit-Policy`'s `q`, else `RateLimit-Limit` or `X-RateLimit-Limit`. */
export function statedLimit(headers: Record<string, string>): number | undefined {
  const policy = /;\s*q=(\d+)/.exec(headers['ratelimit-policy'] ?? '')?.[1];
  const stated = policy ?? /^\s*(\d+)/.exec(headers['ratelimit-limit'] ?? headers['x-ratelimit-limit'] ?? '')?.[1];
  return stated === undefined ? undefined : Number(stated);
}
