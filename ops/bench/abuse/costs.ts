import { readdirSync, readFileSync } from 'node:fs';
import { sql, type Kysely } from 'kysely';
import type { Redis } from 'ioredis';
import type { Database } from '../../../db/database.js';
import { childPids } from '../../../test/helpers/cluster.js';

/** Every counter the rows compare: what the stores and the processes had done, by a moment or between two. */
export interface Counters {
  /** Statements the guarded service's database ran (pg_stat_statements calls, BEGIN and COMMIT included). */
  pgCalls: number;
  /** The same, of the database of the instance that serves the yardstick rows. */
  openPgCalls: number;
  /** Token lookups: calls of the statements that select from `tokens`. */
  tokenLookups: number;
  /** Redis commands processed (INFO commandstats), less the INFO calls that read them. */
  redisCalls: number;
  /** CPU ticks (user + system) of each process tree, by name, primary and children together. */
  cpuTicks: Record<string, number>;
  /** CPU ticks of each web worker of the guarded service, by PID. */
  workerTicks: Record<number, number>;
}

/** The counters by one moment. */
export interface Snapshot extends Counters {
  at: number;
}

/** The counters between two snapshots, and the seconds between them. */
export interface Delta extends Counters {
  seconds: number;
}

/** Linux' USER_HZ: /proc reports CPU time in these. */
export const TICKS_PER_S = 100;

/**
 * Reads the counters through `db` (a connection to the guarded service's database). `trees` names
 * the primaries whose process trees are costed; `worker` is the primary whose children are timed.
 */
export function createCostReader(
  db: Kysely<Database>,
  openDatabase: string,
  redis: Redis,
  trees: Record<string, number>,
  worker: number,
) {
  return async (): Promise<Snapshot> => {
    const [{ rows }, stats] = await Promise.all([
      sql<{ calls: string; open_calls: string; token_lookups: string }>`
        select coalesce(sum(s.calls) filter (where d.datname = current_database()), 0) as calls,
               coalesce(sum(s.calls) filter (where d.datname = ${openDatabase}), 0) as open_calls,
               coalesce(sum(s.calls) filter (where d.datname = current_database()
                 and s.query ~* '^select .* from "tokens"'), 0) as token_lookups
        from pg_stat_statements s join pg_database d on d.oid = s.dbid
        where s.query not like '%pg_stat_statements%'`.execute(db),
      redis.info('commandstats'),
    ]);
    const cpuTicks = Object.fromEntries(
      Object.entries(trees).map(([name, pid]) => [name, [pid, ...childPids(pid)].reduce((n, p) => n + ticks(p), 0)]),
    );
    const workerTicks = Object.fromEntries(childPids(worker).map((pid) => [pid, ticks(pid)]));
    return {
      at: Date.now(),
      pgCalls: Number(rows[0]!.calls),
      openPgCalls: Number(rows[0]!.open_calls),
      tokenLookups: Number(rows[0]!.token_lookups),
      redisCalls: redisCallsOf(stats),
      cpuTicks,
      workerTicks,
    };
  };
}

/** `after` less `before` (the reads themselves are left out of the counts). */
export function delta(before: Snapshot, after: Snapshot): Delta {
  const minus = (a: Record<string, number>, b: Record<string, number>) =>
    Object.fromEntries(Object.keys(a).map((key) => [key, a[key]! - (b[key] ?? a[key]!)]));
  return {
    seconds: (after.at - before.at) / 1000,
    pgCalls: after.pgCalls - before.pgCalls,
    openPgCalls: after.openPgCalls - before.openPgCalls,
    tokenLookups: after.tokenLookups - before.tokenLookups,
    redisCalls: after.redisCalls - before.redisCalls,
    cpuTicks: minus(after.cpuTicks, before.cpuTicks),
    workerTicks: minus(after.workerTicks, before.workerTicks),
  };
}

/**
 * A row's counters less what the quiet window's rates (the service idle but for the good client)
 * would have done in the same time: what the abuse itself cost.
 */
export function lessBackground(row: Delta, quiet: Delta): Delta {
  const scale = row.seconds / quiet.seconds;
  const less = (a: Record<string, number>, b: Record<string, number>) =>
    Object.fromEntries(Object.keys(a).map((key) => [key, a[key]! - (b[key] ?? 0) * scale]));
  return {
    seconds: row.seconds,
    pgCalls: row.pgCalls - quiet.pgCalls * scale,
    openPgCalls: row.openPgCalls - quiet.openPgCalls * scale,
    tokenLookups: row.tokenLookups - quiet.tokenLookups * scale,
    redisCalls: row.redisCalls - quiet.redisCalls * scale,
    cpuTicks: less(row.cpuTicks, quiet.cpuTicks),
    workerTicks: less(row.workerTicks, quiet.workerTicks),
  };
}

function redisCallsOf(commandstats: string): number {
  let calls = 0;
  for (const match of commandstats.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    if (match[1] !== 'info') calls += Number(match[2]);
  }
  return calls;
}

/** utime + stime of a process in ticks (0 once it has exited). */
function ticks(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return 0;
  }
}

/** How many file descriptors a process holds (NaN once it has exited). */
export function openFds(pid: number): number {
  try {
    return readdirSync(`/proc/${pid}/fd`).length;
  } catch {
    return NaN;
  }
}

/** The soft "Max open files" of a process. */
export function fdLimit(pid: number): number {
  try {
    return Number(/^Max open files\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/limits`, 'utf8'))?.[1]);
  } catch {
    return NaN;
  }
}

/** Polls `pid`'s open file descriptors every 200 ms until stopped; resolves with the most seen. */
export function watchFds(pid: number): { stop(): number } {
  let most = openFds(pid);
  const timer = setInterval(() => (most = Math.max(most, openFds(pid))), 200);
  return {
    stop() {
      clearInterval(timer);
      return Math.max(most, openFds(pid));
    },
  };
}
