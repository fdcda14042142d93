import type { Kysely } from 'kysely';
import type { Database } from '../../db/database.js';
import { hashPassword } from './passwords.js';

export interface User {
  id: number;
  username: string;
}

export type CreateUserOutcome = { ok: true; user: User } | { ok: false; error: 'taken' };

/** Creates a user with a scrypt-hashed password; a taken username is an outcome, not an error. */
export async function createUser(db: Kysely<Database>, username: string, password: string): Promise<CreateUserOutcome> {
  const password_hash = await hashPassword(password);
  const row = await db
    .insertInto('users')
    .values({ username, password_hash })
    .onConflict((oc) => oc.column('username').doNothing())
    .returning(['id', 'username'])
    .executeTakeFirst();
  return row ? { ok: true, user: row } : { ok: false, error: 'taken' };
}

export async function findUserByName(db: Kysely<Database>, username: string) {
  return db
    .selectFrom('users')
    .select(['id', 'username', 'password_hash', 'disabled_at'])
    .where('username', '=', username)
    .executeTakeFirst();
}

/** Usernames: 1–150 characters of letters, digits and @.+-_ (as Django's). */
export function isValidUsername(username: string): boolean {
  return /^[\w.@+-]{1,150}$/.test(username);
}
