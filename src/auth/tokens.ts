import { createHash, randomBytes } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.js';
import { DECOY_HASH, verifyPassword } from './passwords.js';
import { findUserByName, type User } from './users.repository.js';

export interface IssuedToken {
  token: string;
  expiresAt: Date;
}

/** Tokens are stored only as their SHA-256, so a database leak does not leak credentials. */
export function hashToken(token: string): string {
  return createHash('sha256').update(token).digest('base64url');
}

/** Checks a password against a stored hash: `verifyPassword`, or it run within the login CPU budget. */
export type PasswordCheck = (password: string, stored: string) => Promise<boolean>;

/**
 * Exchanges a username and password for a new bearer token (32 random bytes, hex) that expires
 * after `ttlMs`. Returns null for an unknown or disabled user or a wrong password, in the same time:
 * all go through `verify` once (the unknown user against a decoy hash).
 */
export async function issueToken(
  db: Kysely<Database>,
  username: string,
  password: string,
  ttlMs: number,
  now: Date,
  verify: PasswordCheck = verifyPassword,
): Promise<IssuedToken | null> {
  const user = await findUserByName(db, username);
  const matches = await verify(password, user?.password_hash ?? DECOY_HASH);
  // A disabled user is refused as a wrong password is, after the same work (docs/operations.md "Users").
  if (!user || !matches || user.disabled_at !== null) return null;
  const token = randomBytes(32).toString('hex');
  const expiresAt = new Date(now.getTime() + ttlMs);
  await db
    .insertInto('tokens')
    .values({ token_hash: hashToken(token), user_id: user.id, expires_at: expiresAt })
    .execute();
  return { token, expiresAt };
}

/** What PostgreSQL knows of a presented token: live (with its user and expiry), or why it is not. */
export type TokenCheck =
  { state: 'live'; user: User; expiresAt: Date } | { state: 'expired' } | { state: 'revoked' } | { state: 'unknown' };

/**
 * One lookup that says whether a token is live and, when not, why: revoked (logout, `token:revoke`,
 * or its user disabled) or expired, while its row is kept; unknown once the retention sweep took it
 * (docs/api.md "Authentication").
 */
export async function checkToken(db: Kysely<Database>, token: string, now: Date): Promise<TokenCheck> {
  const row = await db
    .selectFrom('tokens')
    .innerJoin('users', 'users.id', 'tokens.user_id')
    .select(['users.id', 'users.username', 'users.disabled_at', 'tokens.expires_at', 'tokens.revoked_at'])
    .where('tokens.token_hash', '=', hashToken(token))
    .executeTakeFirst();
  if (!row) return { state: 'unknown' };
  if (row.revoked_at !== null || row.disabled_at !== null) return { state: 'revoked' };
  if (row.expires_at <= now) return { state: 'expired' };
  return { state: 'live', user: { id: row.id, username: row.username }, expiresAt: row.expires_at };
}

/**
 * Revokes one token. Its row stays, marked, for {@link REVOKED_KEPT_MS}, so its next use is told it
 * was revoked; its expiry is brought to `now`, so a host of the release before, which knows no
 * mark, refuses it too during a rolling deploy (docs/api.md "Authentication").
 */
export async function revokeToken(db: Kysely<Database>, token: string, now: Date): Promise<void> {
  await db
    .updateTable('tokens')
    .set({ revoked_at: now, expires_at: now })
    .where('token_hash', '=', hashToken(token))
    .where('revoked_at', 'is', null)
    .where('expires_at', '>', now)
    .execute();
}

/** How long the retention sweep keeps a revoked token's row after its revocation. */
export const REVOKED_KEPT_MS = 24 * 3_600_000;

/**
 * Deletes up to `batchSize` tokens that expired by `now` (revoked ones once kept for
 * {@link REVOKED_KEPT_MS}); returns how many went. Small batches
 * keep locks short (the retention sweep of the job child calls it until a batch comes back short).
 */
export async function sweepExpiredTokens(db: Kysely<Database>, now: Date, batchSize: number): Promise<number> {
  const revokedBefore = new Date(now.getTime() - REVOKED_KEPT_MS);
  const { rows } = await sql<{ n: number }>`
    with gone as (
      delete from tokens where ctid in (
        select ctid from tokens
        where expires_at <= ${now} and (revoked_at is null or revoked_at <= ${revokedBefore})
        limit ${batchSize}
      ) returning 1
    ) select count(*)::int as n from gone`.execute(db);
  return rows[0]?.n ?? 0;
}
