import type { Kysely, Transaction } from 'kysely';
import type { Database, UserAuditTable } from '../../db/database.js';
import { hashPassword } from './passwords.js';
import { insertUser, type CreateUserOutcome } from './users.repository.js';

/** One row of `user:list`. */
export interface UserSummary {
  id: number;
  username: string;
  createdAt: Date;
  disabledAt: Date | null;
  liveTokens: number;
}

/** One change an operator made (`user:audit`). */
export interface AuditEntry {
  at: Date;
  username: string;
  action: UserAuditTable['action'];
  tokensRevoked: number;
  actor: string;
}

/** What a change did: the user changed and the tokens it revoked, or that no such user exists. */
export type AdminOutcome = { ok: true; id: number; tokensRevoked: number; already: boolean } | { ok: false };

/** Every user with its live (neither expired nor revoked) tokens at `now`, by id. */
export async function listUsers(db: Kysely<Database>, now: Date): Promise<UserSummary[]> {
  const rows = await db
    .selectFrom('users')
    .leftJoin('tokens', (join) =>
      join
        .onRef('tokens.user_id', '=', 'users.id')
        .on('tokens.expires_at', '>', now)
        .on('tokens.revoked_at', 'is', null),
    )
    .select(['users.id', 'users.username', 'users.created_at', 'users.disabled_at'])
    .select((eb) => eb.fn.count<string>('tokens.token_hash').as('live'))
    .groupBy('users.id')
    .orderBy('users.id')
    .execute();
  return rows.map((row) => ({
    id: row.id,
    username: row.username,
    createdAt: row.created_at,
    disabledAt: row.disabled_at,
    liveTokens: Number(row.live),
  }));
}

/** `user:create`: a new user, audited in the same transaction. */
export async function createAuditedUser(
  db: Kysely<Database>,
  username: string,
  password: string,
  actor: string,
): Promise<CreateUserOutcome> {
  const password_hash = await hashPassword(password);
  return db.transaction().execute(async (trx) => {
    const outcome = await insertUser(trx, username, password_hash);
    if (outcome.ok) await audit(trx, outcome.user.id, username, 'created', 0, actor);
    return outcome;
  });
}

/** `user:set-password`: replaces the password hash; the user's tokens stay (`token:revoke` ends them). */
export async function setPassword(
  db: Kysely<Database>,
  username: string,
  password: string,
  actor: string,
): Promise<AdminOutcome> {
  const password_hash = await hashPassword(password);
  return changeUser(db, username, async (trx, id) => {
    await trx.updateTable('users').set({ password_hash }).where('id', '=', id).execute();
    await audit(trx, id, username, 'password-set', 0, actor);
    return { tokensRevoked: 0, already: false };
  });
}

/**
 * `user:disable`: marks the user disabled and revokes its live tokens, in one transaction.
 * Disabling a disabled user revokes anything left and says it was disabled already.
 */
export async function disableUser(db: Kysely<Database>, username: string, actor: string, now: Date) {
  return changeUser(db, username, async (trx, id) => {
    const changed = await trx
      .updateTable('users')
      .set({ disabled_at: now })
      .where('id', '=', id)
      .where('disabled_at', 'is', null)
      .executeTakeFirst();
    const tokensRevoked = await revokeLiveTokens(trx, id, now);
    await audit(trx, id, username, 'disabled', tokensRevoked, actor);
    return { tokensRevoked, already: changed.numUpdatedRows === 0n };
  });
}

/** `user:enable`: the user may log in again; tokens revoked meanwhile stay revoked. */
export async function enableUser(db: Kysely<Database>, username: string, actor: string) {
  return changeUser(db, username, async (trx, id) => {
    const changed = await trx
      .updateTable('users')
      .set({ disabled_at: null })
      .where('id', '=', id)
      .where('disabled_at', 'is not', null)
      .executeTakeFirst();
    await audit(trx, id, username, 'enabled', 0, actor);
    return { tokensRevoked: 0, already: changed.numUpdatedRows === 0n };
  });
}

/** `token:revoke`: revokes every live token of the user. */
export async function revokeUserTokens(db: Kysely<Database>, username: string, actor: string, now: Date) {
  return changeUser(db, username, async (trx, id) => {
    const tokensRevoked = await revokeLiveTokens(trx, id, now);
    await audit(trx, id, username, 'tokens-revoked', tokensRevoked, actor);
    return { tokensRevoked, already: false };
  });
}

/** The latest `limit` changes, newest first; of one user when `username` is given. */
export async function listAudit(db: Kysely<Database>, limit: number, username?: string): Promise<AuditEntry[]> {
  let query = db
    .selectFrom('user_audit')
    .select(['at', 'username', 'action', 'tokens_revoked', 'actor'])
    .orderBy('id', 'desc')
    .limit(limit);
  if (username !== undefined) query = query.where('username', '=', username);
  const rows = await query.execute();
  return rows.map(({ tokens_revoked, ...row }) => ({ ...row, tokensRevoked: tokens_revoked }));
}

/** Runs `change` on the user named, locked for the transaction; no such user is an outcome. */
async function changeUser(
  db: Kysely<Database>,
  username: string,
  change: (trx: Transaction<Database>, id: number) => Promise<{ tokensRevoked: number; already: boolean }>,
): Promise<AdminOutcome> {
  return db.transaction().execute(async (trx) => {
    const user = await trx
      .selectFrom('users')
      .select('id')
      .where('username', '=', username)
      .forUpdate()
      .executeTakeFirst();
    if (!user) return { ok: false };
    return { ok: true, id: user.id, ...(await change(trx, user.id)) };
  });
}

async function revokeLiveTokens(trx: Transaction<Database>, userId: number, now: Date): Promise<number> {
  const result = await trx
    .updateTable('tokens')
    // Expired now too, as revokeToken does: a host of the release before refuses them as well.
    .set({ revoked_at: now, expires_at: now })
    .where('user_id', '=', userId)
    .where('revoked_at', 'is', null)
    .where('expires_at', '>', now)
    .executeTakeFirst();
  return Number(result.numUpdatedRows);
}

async function audit(
  trx: Transaction<Database>,
  userId: number,
  username: string,
  action: UserAuditTable['action'],
  tokensRevoked: number,
  actor: string,
): Promise<void> {
  await trx
    .insertInto('user_audit')
    .values({ user_id: userId, username, action, tokens_revoked: tokensRevoked, actor })
    .execute();
}
