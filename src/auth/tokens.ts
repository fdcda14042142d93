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
 * after `ttlMs`. Returns null for an unknown user or a wrong password, in the same time: both
 * go through `verify` once (the unknown user against a decoy hash).
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
  if (!user || !matches) return null;
  const token = randomBytes(32).toString('hex');
  const expiresAt = new Date(now.getTime() + ttlMs);
  await db
    .insertInto('tokens')
    .values({ token_hash: hashToken(token), user_id: user.id, expires_at: expiresAt })
    .execute();
  return { token, expiresAt };
}

/** The user a live token belongs to, or null when it is unknown, revoked or expired. */
export async function resolveToken(db: Kysely<Database>, token: string, now: Date): Promise<User | null> {
  return (await findLiveToken(db, token, now))?.user ?? null;
}

/** A live token's user and expiry, or null when it is unknown, revoked or expired. */
export async function findLiveToken(
  db: Kysely<Database>,
  token: string,
  now: Date,
): Promise<{ user: User; expiresAt: Date } | null> {
  const row = await db
    .selectFrom('tokens')
    .innerJoin('users', 'users.id', 'tokens.user_id')
    .select(['users.id', 'users.username', 'tokens.expires_at'])
    .where('tokens.token_hash', '=', hashToken(token))
    .where('tokens.expires_at', '>', now)
    .executeTakeFirst();
  return row ? { user: { id: row.id, username: row.username }, expiresAt: row.expires_at } : null;
}

/**
 * Revokes one token, in a statement of its own that touches that one row: a large backlog of
 * expired tokens can never make a logout time out unrevoked. Expired tokens are the retention
 * sweep's (`sweepExpiredTokens`, in batches); `_now` is the caller's clock, not needed here.
 */
export async function revokeToken(db: Kysely<Database>, token: string, _now: Date): Promise<void> {
  await db.deleteFrom('tokens').where('token_hash', '=', hashToken(token)).execute();
}

/**
 * Deletes up to `batchSize` tokens that expired by `now`; returns how many went. Small batches
 * keep locks short (the retention sweep of the job child calls it until a batch comes back short).
 */
export async function sweepExpiredTokens(db: Kysely<Database>, now: Date, batchSize: number): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    with gone as (
      delete from tokens where ctid in (
        select ctid from tokens where expires_at <= ${now} limit ${batchSize}
      ) returning 1
    ) select count(*)::int as n from gone`.execute(db);
  return rows[0]?.n ?? 0;
}
