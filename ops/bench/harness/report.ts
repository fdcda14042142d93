import { execFileSync } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { cpus, loadavg } from 'node:os';
import type { Redis } from 'ioredis';
import { log } from './run.js';
import { redisVersion } from './service.js';

const quietly = (command: string, args: string[] = []): string => {
  try {
    return execFileSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
  } catch (error) {
    return String((error as { stdout?: string }).stdout ?? '');
  }
};

/** The commit measured, and whether the checkout differed from it. */
export function describeCommit(): string {
  const hash = quietly('git', ['rev-parse', '--short', 'HEAD']) || 'unknown';
  return changedFiles().length > 0 ? `${hash} with local changes` : hash;
}

/** Tracked files that differ from the commit (read-only: no index refresh). */
export const changedFiles = (): string[] =>
  quietly('git', ['--no-optional-locks', 'diff', '--name-only', 'HEAD'])
    .split('\n')
    .filter((line) => line !== '');

/** wrk prints its version in its usage text, and exits 1. */
export const wrkVersion = (): string => /^wrk (\S+)/m.exec(quietly('wrk', ['-v']))?.[1] ?? 'unknown';

/** `uptime`'s line: how loaded the shared machine was. */
export const uptime = (): string => quietly('uptime') || 'unknown';

/** The 1, 5 and 15 minute load averages, `digits` decimals each. */
export const loadAverage = (digits = 1): string =>
  loadavg()
    .map((l) => l.toFixed(digits))
    .join(' ');

/** The report's first words: when (UTC, to the minute) and at which commit. */
export const stamp = (): string =>
  `${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC, commit ${describeCommit()}`;

/** The host line most reports carry: CPUs and the load average at the end. */
export const hostLine = (): string =>
  `${cpus().length} CPUs shared by everything, load average ${loadAverage()} at the end`;

/** A whole number with thousands separators (— when not finite). */
export const int = (value: number): string =>
  Number.isFinite(value) ? Math.round(value).toLocaleString('en-US') : '—';

/** Milliseconds with as many decimals as they deserve (— when not finite). */
export const ms = (value: number): string =>
  !Number.isFinite(value) ? '—' : value < 10 ? value.toFixed(2) : value < 100 ? value.toFixed(1) : value.toFixed(0);

/**
 * A Markdown table: `columns` are the headings, a heading ending in `>` right-aligned (the `>` dropped); each row
 * gives a cell per column.
 */
export function markdownTable(columns: string[], rows: (string | number)[][]): string {
  const head = columns.map((c) => c.replace(/>$/, ''));
  const rule = columns.map((c) => (c.endsWith('>') ? '---:' : '---'));
  return [head, rule, ...rows].map((cells) => `| ${cells.join(' | ')} |`).join('\n');
}

/** Prints the report on stdout and writes it to `file` (ops/bench/results/…). */
export async function writeResults(file: string, text: string): Promise<void> {
  process.stdout.write(`\n${text}`);
  await mkdir(dirname(file), { recursive: true });
  await writeFile(file, text);
  log(`written to ${file}`);
}

/** The line over a benchmark's console table: Redis's version (given `admin`), node's, what ran, the load average. */
export const runLine = async (admin: Redis | undefined, what: string): Promise<string> =>
  `${admin ? `redis ${await redisVersion(admin)}, ` : ''}node ${process.version}, ${what}, load average ${loadAverage()}`;
