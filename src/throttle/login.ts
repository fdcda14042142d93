import { createHmac } from 'node:crypto';

/**
 * The form of a username that the login budget counts: trimmed, NFKC-normalised and lower-cased,
 * so `Alice`, ` alice ` and a full-width `ａｌｉｃｅ` share one budget. Names that exist and names
 * that do not are treated alike: nothing here looks at the users.
 */
export function normaliseUsername(username: string): string {
  // NFKC again after lower-casing: lower-casing can leave a string that is not in NFKC form.
  return username.trim().normalize('NFKC').toLowerCase().normalize('NFKC');
}

/**
 * The throttle ident of a login attempt naming `username`: `login:` and a keyed hash of the
 * normalised name (HMAC-SHA-256 under `secret`, 128 bits, base64url). Names never sit in Redis
 * in clear, and without the secret a list of candidate names cannot be matched against the keys.
 * One ident per name: its key has one Redis Cluster hash slot, as every throttle key.
 */
export function loginIdent(username: string, secret: string): string {
  const digest = createHmac('sha256', secret)
    .update('paceline login throttle\u0000')
    .update(normaliseUsername(username))
    .digest('base64url');
  return `login:${digest.slice(0, 22)}`;
}
