import { sql, type Kysely } from 'kysely';
import type { Redis } from 'ioredis';
import type { Database } from '../../../db/database.js';
import { childPids, cpuSeconds, openFds, redisCommands, treeCpuSeconds } from '../harness/service.js';

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
  /** CPU seconds (user + system) of each process tree, by name, primary and children together. */
  cpu: Record<string, number>;
  /** CPU seconds of each web worker of the guarded service, by PID. */
  workerCpu: Record<number, number>;
}

/** The counters by one moment (`at`), or between two (`seconds`). */
export type Snapshot = Counters & { at: number };
export type Delta = Counters & { seconds: number };

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
    const [{ rows }, { commands }] = await Promise.all([
      sql<{ calls: string; open_calls: string; token_lookups: string }>`
        select coalesce(sum(s.calls) filter (where d.datname = current_database()), 0) as calls,
               coalesce(sum(s.calls) filter (where d.datname = ${openDatabase}), 0) as open_calls,
               coalesce(sum(s.calls) filter (where d.datname = current_database()
                 and s.query ~* '^select .* from "tokens"'), 0) as token_lookups
        from pg_stat_statements s join pg_database d on d.oid = s.dbid
        where s.query not like '%pg_stat_statements%'`.execute(db),
      redisCommands(redis),
    ]);
    return {
      at: Date.now(),
      pgCalls: Number(rows[0]!.calls),
      openPgCalls: Number(rows[0]!.open_calls),
      tokenLookups: Number(rows[0]!.token_lookups),
      redisCalls: commands,
      cpu: Object.fromEntries(Object.entries(trees).map(([name, pid]) => [name, treeCpuSeconds(pid)])),
      workerCpu: Object.fromEntries(childPids(worker).map((pid) => [pid, cpuSeconds(pid)])),
    };
  };
}

/** `a` and `b` combined counter by counter (and process by process) by `f`; `b`'s may be missing. */
function combine(a: Counters, b: Counters, f: (x: number, y: number | undefined) => number): Counters {
  const each = (x: Record<string, number>, y: Record<string, number>) =>
    Object.fromEntries(Object.entries(x).map(([key, value]) => [key, f(value, y[key])]));
  return {
    pgCalls: f(a.pgCalls, b.pgCalls),
    openPgCalls: f(a.openPgCalls, b.openPgCalls),
    tokenLookups: f(a.tokenLookups, b.tokenLookups),
    redisCalls: f(a.redisCalls, b.redisCalls),
    cpu: each(a.cpu, b.cpu),
    workerCpu: each(a.workerCpu, b.workerCpu),
  };
}

/** `after` less `before` (the reads themselves are left out of the counts; a process new since counts 0). */
export const delta = (before: Snapshot, after: Snapshot): Delta => ({
  seconds: (after.at - before.at) / 1000,
  ...combine(after, before, (x, y) => x - (y ?? x)),
});

/**
 * A row's counters less what the quiet window's rates (the service idle but for the good client)
 * would have done in the same time: what the abuse itself cost.
 */
export const lessBackground = (row: Delta, quiet: Delta): Delta => ({
  seconds: row.seconds,
  ...combine(row, quiet, (x, y) => x - (y ?? 0) * (row.seconds / quiet.seconds)),
});

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
