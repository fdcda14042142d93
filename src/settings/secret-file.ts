import { randomBytes } from 'node:crypto';
import { chmod, chown, mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';

/**
 * The secret kept in `file`, generated (32 random bytes, base64url) and written readable by its
 * owner only (0600) when the file does not exist yet; `owner`, when given (an embedded store's
 * server account), is made its owner.
 * `created` says whether it was generated now. The secret itself is never logged.
 */
export async function readOrCreateSecret(
  file: string,
  owner?: { uid: number; gid: number },
): Promise<{ secret: string; created: boolean }> {
  try {
    const secret = (await readFile(file, 'utf8')).trim();
    if (secret !== '') return { secret, created: false };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  await mkdir(dirname(file), { recursive: true });
  const secret = randomBytes(32).toString('base64url');
  await writeFile(file, `${secret}\n`, { mode: 0o600 });
  await chmod(file, 0o600); // whatever the umask, or a file that existed empty
  if (owner !== undefined) await chown(file, owner.uid, owner.gid);
  return { secret, created: true };
}
