import { createHmac } from 'node:crypto';

/**
 * The name a client goes by in metrics and logs (docs/throttling.md "Who is throttled"): a user
 * as `user:<id>`, anything else (an address, a login's username) as `c-` and 16 hex digits of an
 * HMAC-SHA256 keyed with `secret`. The same on every host that shares the secret (CURSOR_SECRET),
 * and not reversible without it: the raw address never reaches a metric label.
 */
export function pseudonymOf(secret: string, ident: string): string {
  if (ident.startsWith('user:')) return ident;
  return `c-${createHmac('sha256', secret).update(`throttle-client\0${ident}`).digest('hex').slice(0, 16)}`;
}

/** `pseudonymOf` with the last answers kept: a busy client's name is worked out once per burst. */
export function createPseudonyms(secret: string, keep = 4096): (ident: string) => string {
  const known = new Map<string, string>();
  return (ident) => {
    let name = known.get(ident);
    if (name === undefined) {
      name = pseudonymOf(secret, ident);
      if (known.size >= keep) known.clear();
      known.set(ident, name);
    }
    return name;
  };
}
