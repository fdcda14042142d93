import { hostname, userInfo } from 'node:os';
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.js';
import { migrateToLatest } from '../../db/migrate.js';
import {
  createAuditedUser,
  disableUser,
  enableUser,
  listAudit,
  listUsers,
  revokeUserTokens,
  setPassword,
  type AdminOutcome,
} from '../auth/user-admin.js';
import { isValidUsername } from '../auth/users.repository.js';
import type { Config } from '../config.js';
import { readNewPassword } from './password-input.js';
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
        if (!outcome.ok) return fail(`user "${name}" already exists`);
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

/** How long `status` waits for the database before it leaves out the line on user changes. */
const STATUS_DATABASE_WAIT_MS = 5_000;

/**
 * `status`'s line on user administration: the last change recorded, when there is one. A
 * database that does not answer in 5 s leaves the line out; the status itself never fails for it.
 */
export async function printLastUserChange(config: Config, withDatabase: WithDatabase): Promise<number> {
  const line = withDatabase(config, async (db) => {
    const { rows } = await sql<{ present: boolean }>`select to_regclass('user_audit') is not null as present`.execute(
      db,
    );
    const [last] = rows[0]?.present ? await listAudit(db, 1) : [];
    if (last) {
      say(
        `last user change: ${last.at.toISOString()} ${last.action} "${last.username}" by ${last.actor} ` +
          '(npm run cli -- user:audit)',
      );
    }
    return 0;
  });
  const late = new Promise<number>((resolve) => setTimeout(resolve, STATUS_DATABASE_WAIT_MS, 0).unref());
  return Promise.race([line.catch(() => 0), late]);
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

async function printUsers(db: Kysely<Database>): Promise<number> {
  const users = await listUsers(db, new Date());
  if (users.length === 0) return say('no users yet (npm run cli -- user:create NAME)');
  const rows = users.map((u) => [
    String(u.id),
    u.username,
    u.createdAt.toISOString(),
    u.disabledAt?.toISOString() ?? '-',
    String(u.liveTokens),
  ]);
  return say(table(['ID', 'NAME', 'CREATED', 'DISABLED', 'LIVE TOKENS'], rows));
}

async function printAudit(db: Kysely<Database>, args: string[]): Promise<number> {
  const at = args.indexOf('--limit');
  const limit = at >= 0 ? Number(args[at + 1]) : 20;
  if (!Number.isInteger(limit) || limit < 1) return fail('--limit needs a whole number above 0');
  const name = args.find((arg, index) => !arg.startsWith('--') && (at < 0 || index !== at + 1));
  const entries = await listAudit(db, limit, name);
  if (entries.length === 0) return say('no changes recorded');
  const rows = entries.map((e) => [e.at.toISOString(), e.username, e.action, String(e.tokensRevoked), e.actor]);
  return say(table(['AT', 'NAME', 'CHANGE', 'TOKENS REVOKED', 'BY'], rows));
}

/** Columns padded to their widest cell, two spaces apart. */
function table(header: string[], rows: string[][]): string {
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column]!.length)));
  return [header, ...rows]
    .map((row) =>
      row
        .map((cell, i) => cell.padEnd(widths[i]!))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
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

function say(line: string): number {
  process.stdout.write(`${line}\n`);
  return 0;
}

function fail(message: string): number {
  process.stderr.write(`paceline: ${message}\n`);
  return 1;
}
