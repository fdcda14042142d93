import { readFileSync, rmSync } from 'node:fs';
import { chown, readFile, writeFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import type { ServerAccount } from './server-account.js';

// Kept inside the data directory so that a second start of the same cluster finds it.
const PASSWORD_FILE = '.paceline-password';

/**
 * A `postmaster.pid` left by a killed run makes PostgreSQL refuse to start when its PID now
 * belongs to another process. Removes the file unless that PID is a postgres serving `dataDir`,
 * in which case it throws: two servers must never share a data directory.
 */
export function clearStaleLock(dataDir: string, log: (line: string) => void): void {
  const lockFile = join(dataDir, 'postmaster.pid');
  let pid: number;
  try {
    pid = Number.parseInt(readFileSync(lockFile, 'utf8').split('\n')[0] ?? '', 10);
  } catch {
    return;
  }
  if (isServing(pid, dataDir)) {
    const owner = pacelineParent(pid);
    if (owner !== undefined) {
      throw new Error(
        `PostgreSQL (pid ${pid}) is serving ${dataDir} for the Paceline whose primary is pid ${owner}: ` +
          '`npm run cli -- status` names it and its ports, `npm run cli -- stop` stops it with its database. Never ' +
          'kill a running database',
      );
    }
    // No Paceline started it any more (its primary was killed): the only case where stopping it is the advice.
    throw new Error(
      `PostgreSQL (pid ${pid}) still serves ${dataDir}, left behind by a Paceline that did not stop ` +
        '(no Paceline runs it now): ' +
        `stop it cleanly with \`kill -TERM ${pid}\` and start again`,
    );
  }
  rmSync(lockFile);
  log(`removed stale ${lockFile} (pid ${pid} is not a running postgres)`);
}

/**
 * The port of the PostgreSQL serving `dataDir` now (line 4 of its `postmaster.pid`), or
 * undefined when none is: how a tool finds the server `npm start` runs, whatever port it chose.
 */
export function servingPort(dataDir: string): number | undefined {
  let lines: string[];
  try {
    lines = readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n');
  } catch {
    return undefined;
  }
  const [pid, port] = [Number.parseInt(lines[0] ?? '', 10), Number.parseInt(lines[3] ?? '', 10)];
  return isServing(pid, dataDir) && port > 0 ? port : undefined;
}

/** The PID of the Paceline primary whose child `pid` is, or undefined when its parent is no Paceline (an orphan). */
function pacelineParent(pid: number): number | undefined {
  try {
    const parent = Number(/^PPid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]);
    const argv = readFileSync(`/proc/${parent}/cmdline`, 'utf8').split('\0');
    return parent > 1 && argv.some((arg) => /(^|\/)(src\/main\.ts|dist\/src\/main\.js)$/.test(arg))
      ? parent
      : undefined;
  } catch {
    return undefined;
  }
}

function isServing(pid: number, dataDir: string): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
  let argv: string[];
  try {
    argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
  } catch {
    return true; // no /proc: a live PID is the best evidence there is
  }
  return basename(argv[0] ?? '') === 'postgres' && argv.includes(dataDir);
}

/** Reads the superuser password stored by {@link storePassword}. */
export async function readPassword(dataDir: string): Promise<string> {
  try {
    return (await readFile(join(dataDir, PASSWORD_FILE), 'utf8')).trim();
  } catch {
    throw new Error(`${dataDir} holds a PostgreSQL cluster this project did not create (no ${PASSWORD_FILE})`);
  }
}

/** Stores the superuser password next to the cluster, readable by its owner only. */
export async function storePassword(dataDir: string, password: string, account?: ServerAccount): Promise<void> {
  const file = join(dataDir, PASSWORD_FILE);
  await writeFile(file, `${password}\n`, { mode: 0o600 });
  if (account !== undefined) await chown(file, account.uid, account.gid);
}
