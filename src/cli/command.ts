import type { Readable, Writable } from 'node:stream';
import type { Kysely } from 'kysely';
import type { Database } from '../../db/database.js';
import type { Config } from '../settings/config.js';
import type { ProgressStream } from './progress.js';

/** Runs `work` on the service's database and closes it: DATABASE_URL, or the embedded one under DATA_DIR. */
export type WithDatabase = (work: (db: Kysely<Database>) => Promise<number>) => Promise<number>;

/** What a command is given once the settings are read. */
export interface CommandContext {
  config: Config;
  /** Where `npm run` was typed (npm's INIT_CWD): FILE arguments are relative to it. */
  cwd: string;
  stdin: Readable;
  stdout: Writable;
  stderr: ProgressStream;
  /** Writes `paceline: <message>` as one line on stderr and returns the exit code 1. */
  fail(message: string): number;
  withDatabase: WithDatabase;
}

/** A command whose arguments were read: what to run on the database, or the line that refuses them. */
export type PreparedCommand = { ok: true; run(db: Kysely<Database>): Promise<number> } | { ok: false; error: string };

/**
 * One command of `npm run cli`: its lines of the usage, what it needs before it runs, and how it
 * runs; every one ends in its exit code.
 * - `nothing`: runs before the settings are read (help, which a bad setting must not hide).
 * - `settings`: runs with the settings read (it may open the database itself, as `status` does).
 * - `database`: `prepare` reads its arguments (and a password) first, so a refusal opens no
 *   database; what it prepared then runs on the database.
 */
export type Command =
  | { usage: string; needs: 'nothing'; run(): number }
  | { usage: string; needs: 'settings'; run(args: string[], context: CommandContext): Promise<number> }
  | {
      usage: string;
      needs: 'database';
      prepare(args: string[], context: CommandContext): PreparedCommand | Promise<PreparedCommand>;
    };
