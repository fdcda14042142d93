import type { Readable, Writable } from 'node:stream';
import type { Kysely } from 'kysely';
import type { Database } from '../../db/database.js';
import type { Config } from '../config.js';
import { prepareExport, prepareImport } from './backup.commands.js';
import { prepareMigrateDown, prepareMigrateStatus } from './migrations.commands.js';
import type { ProgressStream } from './progress.js';

/** What a command of the database's lifecycle is given. */
export interface AdminContext {
  config: Config;
  /** Where `npm run` was typed (npm's INIT_CWD): FILE arguments are relative to it. */
  cwd: string;
  stdin: Readable;
  stdout: Writable;
  stderr: ProgressStream;
  /** Writes `paceline: <message>` as one line on stderr and returns the exit code 1. */
  fail(message: string): number;
}

/** A command whose arguments were read: what to run on the database, or the line that refuses them. */
export type PreparedCommand = { ok: true; run(db: Kysely<Database>): Promise<number> } | { ok: false; error: string };

const COMMANDS: Readonly<Record<string, (args: string[], context: AdminContext) => PreparedCommand>> = {
  export: prepareExport,
  import: prepareImport,
  'migrate:status': prepareMigrateStatus,
  'migrate:down': prepareMigrateDown,
};

export const ADMIN_USAGE = `  export [FILE]      back up the event log, users, tokens, reports and idempotency records
                     as of one instant, to FILE (default paceline-<time>.jsonl.gz; - for stdout)
  import FILE        load a backup into an empty database, then rebuild every projection
  migrate:status     every migration, applied (when) or pending
  migrate:down [--to NAME] [--yes]
                     undo the last migration, or every one after NAME; without --yes, only
                     show what would be undone`;

/** The command's preparation, or undefined when `command` is not one of these. */
export function prepareAdminCommand(
  command: string,
  args: string[],
  context: AdminContext,
): PreparedCommand | undefined {
  return Object.hasOwn(COMMANDS, command) ? COMMANDS[command]!(args, context) : undefined;
}
