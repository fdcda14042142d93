import { execFileSync } from 'node:child_process';

/** The commit measured, and whether the checkout differed from it. */
export function describeCommit(): string {
  try {
    const hash = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
    const dirty =
      execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], { encoding: 'utf8' }).trim() !== '';
    return dirty ? `${hash} with local changes` : hash;
  } catch {
    return 'unknown';
  }
}

/** wrk prints its version in its usage text, and exits 1. */
export function wrkVersion(): string {
  try {
    execFileSync('wrk', ['-v'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (error) {
    const text = String((error as { stdout?: string }).stdout ?? '');
    return /^wrk (\S+)/m.exec(text)?.[1] ?? 'unknown';
  }
  return 'unknown';
}

/** `uptime`'s line: how loaded the shared machine was. */
export function uptime(): string {
  try {
    return execFileSync('uptime', { encoding: 'utf8' }).trim();
  } catch {
    return 'unknown';
  }
}
