import { join, resolve } from 'node:path';
import type { Kysely } from 'kysely';
import pg from 'pg';
import { connectDatabase } from '../db/connect.js';
import type { Database } from '../db/database.js';
import { migrateToLatest } from '../db/migrate.js';
import { findCaseVariantGroups } from './auth/users.repository.js';
import { ADMIN_USAGE, prepareAdminCommand } from './cli/admin.commands.js';
import { describeInstance, runningInstance } from './cluster/instance-file.js';
import { formatThrottled, takeThrottledAnswer, THROTTLED_SIGNAL } from './cluster/throttled-file.js';
import { ConfigError, loadConfig, type Config } from './config.js';
import { readEnvFile } from './env-file.js';
import { fail } from './cli/output.js';
import { printLastUserChange } from './cli/user-listings.js';
import { runUserCommand, USER_COMMANDS, USER_USAGE } from './cli/users.commands.js';
import { startEmbeddedPostgres } from './stores/postgres.js';
import { readPassword, servingPort } from './stores/postgres-data-dir.js';
import { provideServiceRole } from './stores/postgres-role.js';
import { findServerAccount } from './stores/server-account.js';

const USAGE = `usage: npm run cli -- <command>
${USER_USAGE}
  user:check         list usernames that differ only by case (exit 1 when there are any)
  migrate            apply pending database migrations
  rebuild            rebuild every projection from the event log
${ADMIN_USAGE}
  status             whether a Paceline runs on DATA_DIR: its primary's PID and ports, and the
                     last change of user:audit
  stop               stop it (SIGTERM to its primary: a drain, then its stores)
  reload             reload it (SIGHUP to its primary: settings re-read, web workers replaced)
  throttled [--scope S] [--pid PID]
                     its heaviest refused clients per scope over THROTTLE_TOP_WINDOW, with
                     their addresses or user ids and the pseudonyms the metrics show (PID:
                     a primary with DATABASE_URL and REDIS_URL, which records no DATA_DIR PID)
  help               show this text (also -h, --help)`;

const HELP = new Set(['help', '-h', '--help']);
const SIGNALS: Readonly<Record<string, NodeJS.Signals>> = { stop: 'SIGTERM', reload: 'SIGHUP' };

/** Administrative commands, run against DATABASE_URL or the embedded database under DATA_DIR. */
async function main(argv: string[]): Promise<number> {
  const [command, ...args] = argv;
  if (command === undefined || HELP.has(command)) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const config = loadConfig({ ...process.env, ...readEnvFile(process.env) });
  const signal = Object.hasOwn(SIGNALS, command) ? SIGNALS[command] : undefined;
  if (command === 'status' || signal) {
    const running = runningInstance(config);
    if (!running) {
      process.stdout.write(`Paceline is not running on DATA_DIR ${resolve(config.DATA_DIR)}\n`);
      return 3;
    }
    if (!signal) {
      process.stdout.write(
        `Paceline is running on DATA_DIR ${running.dataDir}: ${describeInstance(running)}, since ` +
          `${running.startedAt}\n`,
      );
      return printLastUserChange(config, withDatabase);
    }
    process.kill(running.pid, signal);
    process.stdout.write(`sent ${signal} to Paceline's primary (PID ${running.pid})\n`);
    return 0;
  }
  if (USER_COMMANDS.has(command)) return runUserCommand(command, args, config, withDatabase);
  if (command === 'throttled') return printThrottled(config, args);
  if (command === 'user:check') return withDatabase(config, checkUsers);
  if (command === 'migrate') {
    return withDatabase(config, async (db) => {
      const { applied, newer } = await migrateToLatest(db);
      if (newer.length > 0)
        process.stdout.write(`schema is newer than this release (${newer.join(', ')}): nothing to do\n`);
      else process.stdout.write(applied.length ? `applied: ${applied.join(', ')}\n` : 'schema is up to date\n');
      return 0;
    });
  }
  const cwd = process.env.INIT_CWD ?? process.cwd();
  const { stdin, stdout, stderr } = process;
  const prepared = prepareAdminCommand(command, args, { config, cwd, stdin, stdout, stderr, fail });
  if (prepared) return prepared.ok ? withDatabase(config, prepared.run) : fail(prepared.error);
  if (command === 'rebuild') {
    const { rebuildWithProgress } = await import('./cli/progress.js');
    return withDatabase(config, async (db) => {
      await migrateToLatest(db);
      await rebuildWithProgress(db, process.stderr);
      return 0;
    });
  }
  process.stderr.write(`paceline: unknown command "${command}"\n${USAGE}\n`);
  return 2;
}

/**
 * Reports accounts whose names differ only by case: they share one login budget
 * (docs/security.md "Login CPU budget"), so one of each group should be renamed or removed.
 */
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
 * Runs `work` on DATABASE_URL; without it, on the embedded database (starting it if it is down)
 * as the service's role, which is no superuser (docs/security.md "Least privilege").
 */
async function withDatabase(config: Config, work: (db: Kysely<Database>) => Promise<number>): Promise<number> {
  let url = config.DATABASE_URL;
  let stop = async () => {};
  if (!url) {
    const dataDir = join(resolve(config.DATA_DIR), 'pg');
    // A server already running on the data directory (`npm start`'s) is used on whatever port it has.
    let adminUrl = await embeddedUrlIfRunning(dataDir, servingPort(dataDir) ?? config.EMBEDDED_PG_PORT);
    if (!adminUrl) {
      const server = await startEmbeddedPostgres({ dataDir, port: config.EMBEDDED_PG_PORT, persistent: true });
      adminUrl = server.url;
      stop = () => server.stop();
    }
    try {
      url = await provideServiceRole(adminUrl, dataDir, findServerAccount());
    } catch (error) {
      await stop();
      throw error;
    }
  }
  const db = connectDatabase(url, 2, 'paceline-cli');
  try {
    return await work(db);
  } finally {
    await db.destroy();
    await stop();
  }
}

async function embeddedUrlIfRunning(dataDir: string, port: number): Promise<string | null> {
  let password: string;
  try {
    password = await readPassword(dataDir);
  } catch {
    return null;
  }
  const url = `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/paceline`;
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  try {
    await client.connect();
    return url;
  } catch {
    return null;
  } finally {
    await client.end().catch(() => {});
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(
      `paceline: ${error instanceof ConfigError || error instanceof Error ? error.message : String(error)}\n`,
    );
    process.exit(1);
  },
);

/**
 * `throttled [--scope S] [--pid PID]`: asks the running primary (THROTTLED_SIGNAL) and prints its
 * answer, waiting up to 10 s. PID names a primary that does not record itself under DATA_DIR (one
 * started with both DATABASE_URL and REDIS_URL); it writes its answer under its own DATA_DIR.
 */
async function printThrottled(config: Config, args: string[]): Promise<number> {
  const option = (name: string) => (args.includes(name) ? (args[args.indexOf(name) + 1] ?? '') : undefined);
  const scope = option('--scope');
  const pid = option('--pid');
  if (scope === '') return fail('throttled --scope needs a scope name');
  if (pid !== undefined && !/^[1-9]\d*$/.test(pid)) return fail("throttled --pid needs the primary's process id");
  const running = pid === undefined ? runningInstance(config) : undefined;
  const target = pid === undefined ? running?.pid : Number(pid);
  if (target === undefined) return fail(`Paceline is not running on DATA_DIR ${resolve(config.DATA_DIR)}`);
  if (config.THROTTLE_WATCH === 'off') return fail('THROTTLE_WATCH=off: Paceline keeps no throttled clients to show');
  // The signal's default action ends a process: a primary of an older release would stop.
  if (running && !running.answers?.includes(THROTTLED_SIGNAL))
    return fail(`Paceline's primary (PID ${target}) is of a release without the throttled command: restart it first`);
  const since = Date.now();
  process.kill(target, THROTTLED_SIGNAL);
  for (let tries = 0; tries < 100; tries++) {
    const answer = takeThrottledAnswer(config, since);
    if (answer) {
      process.stdout.write(formatThrottled(answer, scope));
      return 0;
    }
    await new Promise((done) => setTimeout(done, 100));
  }
  return fail(`Paceline's primary (PID ${target}) did not answer within 10 s`);
}
