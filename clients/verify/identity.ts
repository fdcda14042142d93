import type { Client } from './client.js';
import type { Operation } from './history.js';
import { Stop } from './stop.js';

/** A GET that this API answers only to a signed-in user (docs/api.md: the event feed). */
const AUTHENTICATED_ONLY = 'api/events/?limit=1';

/**
 * Identity is checked, not assumed (docs/verify.md "Identity is checked"): before any verdict about a user,
 * the service must show that it takes the user's token as that user, either by answering an
 * authenticated-only GET with the token that it refuses without one, or by naming another
 * `RateLimit-Policy` scope for the limits path with the token than without. A service that ignores an
 * `Authorization` scheme it does not know treats every request as anonymous, and refusals of an anonymous
 * budget would be judged as the user's. Throws a `Stop` naming `--auth-scheme` when neither shows it.
 */
export async function confirmIdentity(
  clients: { withToken: Client; without: Client },
  facts: { username: string; scheme: string; limitsPath: string },
): Promise<void> {
  const { withToken, without } = clients;
  const refused = (why: string) =>
    new Stop(
      `the service did not take ${facts.username}'s token as that user ` +
        `("Authorization: ${facts.scheme} …": ${why}): pass --auth-scheme NAME (Token for DRF’s TokenAuthentication)`,
    );
  const signedIn = await withToken.sendPolitely({ path: AUTHENTICATED_ONLY, f: 'identity' });
  if (signedIn.status === 401 || signedIn.status === 403)
    throw refused(`GET /${AUTHENTICATED_ONLY} answered ${signedIn.status} with it`);
  const anonymous = await without.sendPolitely({ path: AUTHENTICATED_ONLY, f: 'identity without token' });
  if (isOk(signedIn) && (anonymous.status === 401 || anonymous.status === 403)) return;
  const scoped = await withToken.sendPolitely({ path: facts.limitsPath, f: 'identity' });
  const unscoped = await without.sendPolitely({ path: facts.limitsPath, f: 'identity without token' });
  const scope = scopeOf(scoped.headers['ratelimit-policy']);
  const anonymousScope = scopeOf(unscoped.headers['ratelimit-policy']);
  if (scope !== undefined && anonymousScope !== undefined) {
    if (scope !== anonymousScope) return;
    throw refused(`GET /${facts.limitsPath} names the RateLimit-Policy scope "${scope}" with it and without it`);
  }
  throw refused(
    `nothing shows it was recognised: GET /${AUTHENTICATED_ONLY} answered ${signedIn.status} with it and ` +
      `${anonymous.status} without, and no RateLimit-Policy names a scope`,
  );
}

function isOk(op: Operation): boolean {
  return op.status !== null && op.status >= 200 && op.status < 300;
}

/** The first policy's name in `RateLimit-Policy: "user";q=100;w=60` (RFC draft: a quoted key). */
export function scopeOf(header: string | undefined): string | undefined {
  const match = /^\s*"?([^";,]+)"?/.exec(header ?? '');
  return match?.[1];
}
