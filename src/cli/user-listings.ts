import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.js';
import { listAudit, listUsers } from '../auth/user-admin.js';
import type { WithDatabase } from './command.js';
import { fail, say } from './output.js';

/** How long `status` waits for the database before it leaves out the line on user changes. */
const STATUS_DATABASE_WAIT_MS = 5_000;

/**
 * `status`'s line on user administration: the last change recorded, when there is one. A
 * database that does not answer in 5 s leaves the line out; the status itself never fails for it.
 */
export async function printLastUserChange(withDatabase: WithDatabase): Promise<number> {
  const line = withDatabase(async (db) => {
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

/** `user:list`: a table of every user. */
export async function printUsers(db: Kysely<Database>): Promise<number> {
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

/** `user:audit [NAME] [--limit N]`: the latest changes, newest first. */
export async function printAudit(db: Kysely<Database>, args: string[]): Promise<number> {
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
