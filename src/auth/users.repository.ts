import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database } from '../../db/database.js';
import { normaliseUsername } from '../throttle/login.js';
import { hashPassword } from './passwords.js';

export interface User {
  id: number;
  username: string;
}

export type CreateUserOutcome =
  { ok: true; user: User } | { ok: false; error: 'taken' } | { ok: false; error: 'case-variant'; existing: string };

/**
 * Creates a user with a scrypt-hashed password. One account per folded name (`normaliseUsername`:
 * trimmed, NFKC, lower-case), the form the login budget counts (docs/security.md "Login CPU
 * budget"): a name taken exactly, or by another account that folds alike, is an outcome, not an error.
 */
export async function createUser(db: Kysely<Database>, username: string, password: string): Promise<CreateUserOutcome> {
  const password_hash = await hashPassword(password);
  return db.transaction().execute((trx) => insertUser(trx, username, password_hash));
}

/** createUser's work inside the caller's transaction `trx`, with the password already hashed. */
export async function insertUser(
  trx: Transaction<Database>,
  username: string,
  password_hash: string,
): Promise<CreateUserOutcome> {
  const folded = normaliseUsername(username);
  // Creations of names that fold alike take turns, so two of them cannot both find the name free.
  await sql`select pg_advisory_xact_lock(hashtext(${'paceline user ' + folded}))`.execute(trx);
  const variant = (await findFoldedAlike(trx, folded)).find((name) => name !== username);
  if (variant !== undefined) return { ok: false, error: 'case-variant', existing: variant };
  const row = await trx
    .insertInto('users')
    .values({ username, password_hash })
    .onConflict((oc) => oc.column('username').doNothing())
    .returning(['id', 'username'])
    .executeTakeFirst();
  return row ? { ok: true, user: row } : { ok: false, error: 'taken' };
}

/**
 * The usernames that fold to `folded`. Names made through the API are ASCII, which PostgreSQL's
 * "C" lower-casing folds as JavaScript does; a name with other characters (only SQL can make one)
 * is folded here instead.
 */
async function findFoldedAlike(db: Kysely<Database>, folded: string): Promise<string[]> {
  const rows = await db
    .selectFrom('users')
    .select('username')
    .where((eb) =>
      eb.or([
        eb(sql`lower(username collate "C")`, '=', folded),
        eb(sql`username collate "C"`, '!~', sql.lit('^[ -~]*$')),
      ]),
    )
    .execute();
  return rows.map((row) => row.username).filter((name) => normaliseUsername(name) === folded);
}

/**
 * Groups of existing usernames that differ only by case (or fold alike otherwise), made before
 * creation refused them or written by SQL: each group, in creation order, sorted by its first name.
 */
export async function findCaseVariantGroups(db: Kysely<Database>): Promise<string[][]> {
  const groups = new Map<string, string[]>();
  // Every name, folded here: the check must fold exactly as the login budget does, which SQL cannot.
  const rows = await db.selectFrom('users').select('username').orderBy('id').execute();
  for (const { username } of rows) {
    const key = normaliseUsername(username);
    groups.set(key, [...(groups.get(key) ?? []), username]);
  }
  return [...groups.values()].filter((names) => names.length > 1).sort((a, b) => (a[0]! < b[0]! ? -1 : 1));
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
