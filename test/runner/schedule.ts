import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { TestFile } from './files.js';

/** Where each file's last duration is kept, so the next run starts the longest files first. */
export const TIMES_FILE = '.data/test-times.json';
/**
 * Seconds per file from a whole run on the 2-core development host, committed so that a clean
 * clone (CI's case) also starts the longest files first; refresh it from TIMES_FILE after a full
 * run when files come or go. A file in neither gets a guess by its kind.
 */
export const SEED_TIMES_FILE = 'test/runner/times.json';

export async function readTimes(): Promise<Record<string, number>> {
  const read = async (file: string) => JSON.parse(await readFile(file, 'utf8')) as Record<string, number>;
  const seed = await read(SEED_TIMES_FILE).catch(() => ({}));
  return { ...seed, ...(await read(TIMES_FILE).catch(() => ({}))) };
}

export async function writeTimes(times: Record<string, number>): Promise<void> {
  await mkdir(dirname(TIMES_FILE), { recursive: true });
  await writeFile(TIMES_FILE, `${JSON.stringify(times, null, 2)}\n`);
}

/**
 * Longest first (by the last run's times, else the seed's), so the long files overlap the many
 * short ones; a file with no time yet is guessed by its kind (cluster files are the longest).
 */
export function longestFirst(files: TestFile[], times: Record<string, number>): TestFile[] {
  const guess = (file: TestFile) => times[file.path] ?? (file.kind === 'cluster' ? 60 : 10);
  return [...files].sort((a, b) => guess(b) - guess(a) || a.path.localeCompare(b.path));
}

/**
 * Runs `files` side by side within `capacity` slots: each file takes `cost(file)` slots, and the
 * next file started is the first in order that fits. Stops starting files once `stopped()`.
 */
export async function runPool<T>(
  files: TestFile[],
  capacity: number,
  cost: (file: TestFile) => number,
  run: (file: TestFile) => Promise<T>,
  stopped: () => boolean,
): Promise<void> {
  const queue = [...files];
  const active = new Set<Promise<void>>();
  let free = capacity;
  while (queue.length > 0 && !stopped()) {
    const index = queue.findIndex((file) => Math.min(cost(file), capacity) <= free);
    if (index === -1) {
      await Promise.race(active);
      continue;
    }
    const [file] = queue.splice(index, 1);
    const slots = Math.min(cost(file!), capacity);
    free -= slots;
    const task: Promise<void> = run(file!).then(() => {
      free += slots;
      active.delete(task);
    });
    active.add(task);
  }
  await Promise.all(active);
}
