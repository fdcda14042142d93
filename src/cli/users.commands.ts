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
import { findCaseVariantGroups, isValidUsername } from '../auth/users.repository.js';
import type { Config } from '../settings/config.js';
import type { Command } from './command.js';
import { fail, say } from './output.js';
import { readNewPassword } from './password-input.js';
import { tellServersTokensRevoked } from './token-epoch.js';
import { printAudit, printUsers } from './user-listings.js';

// The user administration commands (docs/operations.md "Users"). Every change is one transaction
// with its `user_audit` row; `user:audit` lists them. Exit status 0 done, 1 refused.

/** What a command on one user was given: its NAME, a new password (or ''), who runs it and when. */
interface UserChange {
  name: string;
  password: string;
  actor: string;
  now: Date;
  config: Config;
}

export const userCreate = onNamedUser(
  'user:create',
  `  user:create NAME   create a user; the password comes from $PASSWORD, else from a prompt
                     on a terminal, else from the first line of stdin
                     (echo 'a-long-password' | npm run cli -- user:create alice)`,
  { password: true },
  async (db, { name, password, actor }) => {
    const outcome = await createAuditedUser(db, name, password, actor);
    if (!outcome.ok && outcome.error === 'taken') return fail(`user "${name}" already exists`);
    if (!outcome.ok) {
      const why = `differs from "${name}" only by case: one account per name, whatever its case`;
      return fail(`user "${outcome.existing}" already exists and ${why}`);
    }
    return say(`created user "${name}" (id ${outcome.user.id})`);
  },
);

export const userList: Command = {
  usage: '  user:list          every user: id, name, created, disabled since, live tokens',
  needs: 'database',
  prepare: () => ({ ok: true, run: (db) => migrated(db, () => printUsers(db)) }),
};

export const userSetPassword = onNamedUser(
  'user:set-password',
  `  user:set-password NAME
                     give the user a new password, read as user:create reads it`,
  { password: true },
  async (db, { name, password, actor }) => {
    const outcome = await setPassword(db, name, password, actor);
    return outcome.ok ? say(`set a new password for user "${name}" (id ${outcome.id})`) : unknown(name);
  },
);

export const userDisable = onNamedUser(
  'user:disable',
  "  user:disable NAME  refuse the user's logins and revoke its tokens on every server at once",
  { password: false },
  async (db, change) => {
    const outcome = await disableUser(db, change.name, change.actor, change.now);
    if (!outcome.ok) return unknown(change.name);
    return reportRevocation(change, outcome.already ? 'user was disabled already' : 'disabled', outcome);
  },
);

export const userEnable = onNamedUser(
  'user:enable',
  "  user:enable NAME   allow the user's logins again (revoked tokens stay revoked)",
  { password: false },
  async (db, { name, actor }) => {
    const outcome = await enableUser(db, name, actor);
    if (!outcome.ok) return unknown(name);
    return say(`${outcome.already ? 'user was not disabled' : 'enabled'}: "${name}" (id ${outcome.id})`);
  },
);

export const tokenRevoke = onNamedUser(
  'token:revoke',
  '  token:revoke NAME  revoke every token of the user on every server at once',
  { password: false },
  async (db, change) => {
    const outcome = await revokeUserTokens(db, change.name, change.actor, change.now);
    return outcome.ok ? reportRevocation(change, 'revoked', outcome) : unknown(change.name);
  },
);

export const userAudit: Command = {
  usage: '  user:audit [NAME]  the last 20 changes these commands made (--limit N for more)',
  needs: 'database',
  prepare: (args) => ({ ok: true, run: (db) => migrated(db, () => printAudit(db, args)) }),
};

/**
 * `user:check`: reports accounts whose names differ only by case (exit 1 when there are any):
 * they share one login budget (docs/security.md "Login CPU budget"), so one of each group should
 * be renamed or removed.
 */
export const userCheck: Command = {
  usage: '  user:check         list usernames that differ only by case (exit 1 when there are any)',
  needs: 'database',
  prepare: () => ({ ok: true, run: checkUsers }),
};

async function checkUsers(db: Kysely<Database>): Promise<number> {
  await migrateToLatest(db);
  const groups = await findCaseVariantGroups(db);
  if (groups.length === 0) {
    process.stdout.write('no usernames differ only by case\n');
    return 0;
  }
  for (const names of groups) process.stdout.write(`differ only by case: ${names.map((n) => `"${n}"`).join(', ')}\n`);
  process.stderr.write(
    `paceline: ${groups.length} group(s) of usernames differ only by case; they share one login budget: rename or remove all but one of each\n`,
  );
  return 1;
}

/**
 * A command on the user NAME (its first argument): a NAME that cannot be a username, or a missing
 * password, is refused before the database is opened; `change` runs on the migrated database.
 */
function onNamedUser(
  command: string,
  usage: string,
  input: { password: boolean },
  change: (db: Kysely<Database>, request: UserChange) => Promise<number>,
): Command {
  return {
    usage,
    needs: 'database',
    prepare: async ([name = ''], context) => {
      if (!isValidUsername(name))
        return { ok: false, error: `${command} needs a NAME of 1-150 letters, digits or @.+-_` };
      let password = '';
      if (input.password) {
        const read = await readNewPassword(name);
        if (!read.ok) return { ok: false, error: read.error };
        password = read.password;
      }
      const request = { name, password, actor: whoRuns(), now: new Date(), config: context.config };
      return { ok: true, run: (db) => migrated(db, () => change(db, request)) };
    },
  };
}

async function reportRevocation(
  change: UserChange,
  verb: string,
  outcome: Extract<AdminOutcome, { ok: true }>,
): Promise<number> {
  const tokens = `${outcome.tokensRevoked} token${outcome.tokensRevoked === 1 ? '' : 's'} revoked`;
  say(`${verb}: "${change.name}" (id ${outcome.id}), ${tokens}`);
  try {
    return say(await tellServersTokensRevoked(change.config));
  } catch (error) {
    return fail((error as Error).message);
  }
}

/** Runs `work` once the database has every migration of this release. */
export async function migrated(db: Kysely<Database>, work: () => Promise<number>): Promise<number> {
  await migrateToLatest(db);
  return work();
}

/** `account@host` of whoever runs the command, for the audit. */
export function whoRuns(): string {
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
