import { hostname, userInfo } from 'node:os';
import type { Kysely } from 'kysely';
import type { Database } from '../../db/database.js';
import { migrateToLatest } from '../../db/migrate.js';
import {
  createAuditedUser,
  disableUser,
  enableUser,
  revokeUserTokens,
  setPassword,
  type AdminOutcome,
} from '../auth/user-admin.js';
import { isValidUsername } from '../auth/users.repository.js';
import type { Config } from '../config.js';
import { fail, say } from './output.js';
import { readNewPassword } from './password-input.js';
import { printAudit, printUsers } from './user-listings.js';
import { tellServersTokensRevoked } from './token-epoch.js';

/** The user commands' lines of the CLI's usage. */
export const USER_USAGE = `  user:create NAME   create a user; the password comes from $PASSWORD, else from a prompt
                     on a terminal, else from the first line of stdin
                     (echo 'a-long-password' | npm run cli -- user:create alice)
  user:list          every user: id, name, created, disabled since, live tokens
  user:set-password NAME
                     give the user a new password, read as user:create reads it
  user:disable NAME  refuse the user's logins and revoke its tokens on every server at once
  user:enable NAME   allow the user's logins again (revoked tokens stay revoked)
  token:revoke NAME  revoke every token of the user on every server at once
  user:audit [NAME]  the last 20 changes these commands made (--limit N for more)`;

export const USER_COMMANDS: ReadonlySet<string> = new Set([
  'user:create',
  'user:list',
  'user:set-password',
  'user:disable',
  'user:enable',
  'token:revoke',
  'user:audit',
]);

/** Runs `work` on the service's database (the CLI's `withDatabase`). */
export type WithDatabase = (config: Config, work: (db: Kysely<Database>) => Promise<number>) => Promise<number>;

/**
 * The user administration commands (docs/operations.md "Users"). Every change is one transaction
 * with its `user_audit` row; `user:audit` lists them. Exit status 0 done, 1 refused.
 */
export async function runUserCommand(
  command: string,
  args: string[],
  config: Config,
  withDatabase: WithDatabase,
): Promise<number> {
  const [name = ''] = args;
  if (command === 'user:list') return withDatabase(config, (db) => migrated(db, () => printUsers(db)));
  if (command === 'user:audit') return withDatabase(config, (db) => migrated(db, () => printAudit(db, args)));
  if (!isValidUsername(name)) return fail(`${command} needs a NAME of 1-150 letters, digits or @.+-_`);
  let password = '';
  if (command === 'user:create' || command === 'user:set-password') {
    const read = await readNewPassword(name);
    if (!read.ok) return fail(read.error);
    password = read.password;
  }
  const actor = whoRuns();
  const now = new Date();
  return withDatabase(config, (db) =>
    migrated(db, async () => {
      if (command === 'user:create') {
        const outcome = await createAuditedUser(db, name, password, actor);
        if (!outcome.ok && outcome.error === 'taken') return fail(`user "${name}" already exists`);
        if (!outcome.ok) {
          const why = `differs from "${name}" only by case: one account per name, whatever its case`;
          return fail(`user "${outcome.existing}" already exists and ${why}`);
        }
        return say(`created user "${name}" (id ${outcome.user.id})`);
      }
      if (command === 'user:set-password') {
        const outcome = await setPassword(db, name, password, actor);
        return outcome.ok ? say(`set a new password for user "${name}" (id ${outcome.id})`) : unknown(name);
      }
      if (command === 'user:enable') {
        const outcome = await enableUser(db, name, actor);
        if (!outcome.ok) return unknown(name);
        return say(`${outcome.already ? 'user was not disabled' : 'enabled'}: "${name}" (id ${outcome.id})`);
      }
      const outcome =
        command === 'user:disable'
          ? await disableUser(db, name, actor, now)
          : await revokeUserTokens(db, name, actor, now);
      return outcome.ok ? reportRevocation(config, command, name, outcome) : unknown(name);
    }),
  );
}

async function reportRevocation(
  config: Config,
  command: string,
  name: string,
  outcome: Extract<AdminOutcome, { ok: true }>,
): Promise<number> {
  const verb = command === 'user:disable' ? (outcome.already ? 'user was disabled already' : 'disabled') : 'revoked';
  const tokens = `${outcome.tokensRevoked} token${outcome.tokensRevoked === 1 ? '' : 's'} revoked`;
  say(`${verb}: "${name}" (id ${outcome.id}), ${tokens}`);
  try {
    return say(await tellServersTokensRevoked(config));
  } catch (error) {
    return fail((error as Error).message);
  }
}

async function migrated(db: Kysely<Database>, work: () => Promise<number>): Promise<number> {
  await migrateToLatest(db);
  return work();
}

/** `account@host` of whoever runs the command, for the audit. */
function whoRuns(): string {
  let account: string;
  try {
    account = userInfo().username;
  } catch {
    account = `uid ${process.getuid?.() ?? '?'}`;
  }
  return `${account}@${hostname()}`;
}

function unknown(name: string): number {
  return fail(`no user "${name}"`);
}
