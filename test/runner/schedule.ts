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

/** A file's wall time (the shortest seen) and, when measured, the CPU its process tree used, in seconds. */
export interface FileTime {
  seconds: number;
  cpu?: number;
}

export type Times = Record<string, FileTime>;

export async function readTimes(): Promise<Times> {
  const read = async (file: string): Promise<Times> => {
    const entries = Object.entries(JSON.parse(await readFile(file, 'utf8')) as Record<string, number | FileTime>);
    // Runs before the CPU was measured kept seconds alone.
    return Object.fromEntries(
      entries.map(([path, time]) => [path, typeof time === 'number' ? { seconds: time } : time]),
    );
  };
  const seed = await read(SEED_TIMES_FILE).catch(() => ({}));
  return { ...seed, ...(await read(TIMES_FILE).catch(() => ({}))) };
}

/**
 * This run's times folded into the earlier ones: the CPU as measured now, the seconds the
 * shortest seen. A file slowed by its neighbours then does not look lighter than it is (its load
 * is its CPU over its seconds), which would crowd the next run further.
 */
export function foldTimes(earlier: Times, run: Times): Times {
  const folded = { ...earlier };
  const tenths = (seconds: number) => Math.round(seconds * 10) / 10;
  for (const [path, time] of Object.entries(run)) {
    const shortest = tenths(Math.min(time.seconds, earlier[path]?.seconds ?? Infinity));
    folded[path] = { seconds: shortest, ...(time.cpu === undefined ? {} : { cpu: tenths(time.cpu) }) };
  }
  return folded;
}

export async function writeTimes(times: Times): Promise<void> {
  await mkdir(dirname(TIMES_FILE), { recursive: true });
  await writeFile(TIMES_FILE, `${JSON.stringify(times, null, 2)}\n`);
}

/**
 * Longest first (by the last run's times, else the seed's), so the long files overlap the many
 * short ones; a file with no time yet is guessed by its kind (cluster files are the longest). A
 * file's length is its wall seconds, or its CPU seconds when more: on a full machine a file gets
 * about a core at most, so one that is quick alone but busy (two clusters starting) takes at least
 * its CPU seconds. Files that run alone (`// Load: all`) go before all others: they start while
 * nothing else runs, rather than making the others drain in the middle of the run.
 */
export function longestFirst(files: TestFile[], times: Times): TestFile[] {
  const length = (time: FileTime) => Math.max(time.seconds, time.cpu ?? 0);
  const guess = (file: TestFile) => {
    const time = times[file.path];
    return time === undefined ? (file.kind === 'cluster' ? 60 : 10) : length(time);
  };
  const alone = (file: TestFile) => (file.load === Infinity ? 1 : 0);
  return [...files].sort((a, b) => alone(b) - alone(a) || guess(b) - guess(a) || a.path.localeCompare(b.path));
}

/** The least and most cores a file is expected to keep busy (the shared stores' work is not counted in it). */
const LOAD_RANGE = [0.25, 2] as const;
/** A file never measured: a cluster file starts several processes; an int file is one. */
const GUESSED_LOAD = { unit: 0.5, int: 0.5, cluster: 1 } as const;

/**
 * The cores a file is expected to keep busy while it runs: its CPU seconds over its wall seconds
 * by the recorded times, else a guess by its kind; at least what its `// Load:` header keeps
 * (`all`: every core).
 */
export function loadOf(file: TestFile, times: Times): number {
  const time = times[file.path];
  const measured = time?.cpu !== undefined && time.seconds > 0 ? time.cpu / time.seconds : undefined;
  const expected = Math.min(LOAD_RANGE[1], Math.max(LOAD_RANGE[0], measured ?? GUESSED_LOAD[file.kind]));
  return Math.max(expected, file.load ?? 0);
}

/**
 * Runs `files` side by side, in order: at most `jobs` at once, started while their `cost`s add up to
 * less than `capacity`. A file starts when some capacity is left even if its cost is more than what
 * is left (the cores are shared a while longer), so that a busy file is not passed over by lighter
 * ones again and again until it runs alone at the end. A file that keeps CPU for itself by its
 * header (`// Load:`) starts only once its whole cost fits in the machine's `cores`, and while one
 * runs the others may fill only those cores, not `capacity`; a file costing more than `cores` runs
 * alone; lighter files after it may start meanwhile. Stops starting files once `stopped()`.
 */
export async function runPool<T>(
  files: TestFile[],
  limits: { jobs: number; capacity: number; cores?: number },
  cost: (file: TestFile) => number,
  run: (file: TestFile) => Promise<T>,
  stopped: () => boolean,
): Promise<void> {
  const queue = [...files];
  const active = new Set<Promise<void>>();
  const cores = limits.cores ?? limits.capacity;
  let used = 0;
  let keeping = 0;
  const fits = (file: TestFile) =>
    active.size === 0 ||
    (active.size < limits.jobs &&
      (file.load === undefined
        ? used < (keeping > 0 ? cores : limits.capacity)
        : used + Math.min(cost(file), cores) <= cores));
  while (queue.length > 0 && !stopped()) {
    const index = queue.findIndex(fits);
    if (index === -1) {
      await Promise.race(active);
      continue;
    }
    const [file] = queue.splice(index, 1);
    const taken = Math.min(cost(file!), cores);
    const keeps = file!.load === undefined ? 0 : 1;
    used += taken;
    keeping += keeps;
    const task: Promise<void> = run(file!).then(() => {
      used -= taken;
      keeping -= keeps;
      active.delete(task);
    });
    active.add(task);
  }
  await Promise.all(active);
}
