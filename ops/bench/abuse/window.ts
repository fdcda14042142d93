import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../../db/database.js';
import type { BurstResult } from '../../../test/helpers/burst.js';
import { childPids, cpuSeconds, openFds, redisCommands, treeCpuSeconds } from '../harness/service.js';
import type { GoodClient, GoodMode, Latencies } from './good-client.js';
import { statusList, type RowResult } from './report.js';

/** Every counter the rows compare: what the stores and the processes had done, by a moment or between two. */
interface Counters {
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
type Snapshot = Counters & { at: number };
type Delta = Counters & { seconds: number };

/**
 * Reads the counters through `db` (a connection to the guarded service's database): the process trees of `trees`'
 * primaries are costed by name, and the children of the guarded one timed each.
 */
export function createCostReader(
  db: Kysely<Database>,
  openDatabase: string,
  redis: Redis,
  trees: { guarded: { primary: number } } & Record<string, { primary: number }>,
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
      cpu: Object.fromEntries(Object.entries(trees).map(([name, { primary }]) => [name, treeCpuSeconds(primary)])),
      workerCpu: Object.fromEntries(childPids(trees.guarded.primary).map((pid) => [pid, cpuSeconds(pid)])),
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
function watchFds(pid: number): { stop(): number } {
  let most = openFds(pid);
  const timer = setInterval(() => (most = Math.max(most, openFds(pid))), 200);
  return {
    stop() {
      clearInterval(timer);
      return Math.max(most, openFds(pid));
    },
  };
}

/** Everything a row needs: the targets, the good client, the counters. */
export interface Bench {
  guarded: { base: string; metricsPort: number; primary: number };
  open: { base: string; primary: number };
  bare: { base: string; primary: number };
  good: GoodClient;
  read(): Promise<Snapshot>;
  rounds: number;
  seconds: number;
}

/** One measured stretch of time: what ran in it, its counters, and the primary's most FDs. */
export interface Window<T> {
  value: T;
  from: number;
  to: number;
  delta: Delta;
  fdsBefore: number;
  fdsMax: number;
}

/** What was in flight when the abuse ended belongs to its window. */
const SETTLE_MS = 300;
const QUIET_MS = 4_000;

/** Runs `work` between two reads of the counters, watching the guarded primary's FDs meanwhile. */
export async function measure<T>(bench: Bench, work: () => Promise<T>): Promise<Window<T>> {
  const fdsBefore = watchFds(bench.guarded.primary).stop();
  const watch = watchFds(bench.guarded.primary);
  const before = await bench.read();
  const from = Date.now();
  const value = await work();
  const to = Date.now();
  const fdsMax = watch.stop();
  await sleep(SETTLE_MS);
  const after = await bench.read();
  return { value, from, to, delta: delta(before, after), fdsBefore, fdsMax };
}

/** The good client alone in `mode` for QUIET_MS: its latencies and the service's background rates. */
export async function quiet(bench: Bench, mode: GoodMode): Promise<Window<Latencies>> {
  bench.good.setMode(mode);
  await sleep(500); // the first answers in a new mode pay for new connections and warm caches
  const window = await measure(bench, () => sleep(QUIET_MS));
  return { ...window, value: bench.good.latencies(mode, window.from, window.to) };
}

/** Per abusive request, less the quiet window's background: PG statements, Redis commands, CPU µs. */
export function perRequest(
  window: Window<unknown>,
  background: Window<unknown>,
  tree: string,
  requests: number,
): { pg: number; redis: number; cpuUs: number } {
  const d = lessBackground(window.delta, background.delta);
  const per = (value: number) => (requests === 0 ? NaN : Math.max(0, value) / requests);
  return {
    pg: tree === 'guarded' ? per(d.pgCalls) : tree === 'open' ? per(d.openPgCalls) : 0,
    redis: tree === 'bare' ? 0 : per(d.redisCalls),
    cpuUs: per(d.cpu[tree] ?? 0) * 1e6,
  };
}

/** An abuse: the quiet window before it, its own window, and the good client's answers (in `mode`) during it. */
export interface Abused<T> {
  background: Window<Latencies>;
  window: Window<T>;
  good: Latencies;
}

/** Runs the abuse `run` with the good client beside it in `mode`, after a quiet window in the same mode. */
export async function abuse<T>(bench: Bench, mode: GoodMode, run: () => Promise<T>): Promise<Abused<T>> {
  const background = await quiet(bench, mode);
  const window = await measure(bench, run);
  return { background, window, good: bench.good.latencies(mode, window.from, window.to) };
}

/** A burst's row: its answers, the good client's, the costs per request and the primary's FDs; no goal yet. */
export function rowOf(
  name: string,
  request: string,
  { background, window, good }: Abused<BurstResult>,
  mode: GoodMode,
): RowResult {
  return {
    name,
    request,
    requests: window.value.requests,
    reqPerS: window.value.reqPerS,
    statuses: statusList(window.value.statuses),
    good: { mode, quiet: background.value, during: good },
    ...perRequest(window, background, 'guarded', window.value.requests),
    fds: { before: window.fdsBefore, max: window.fdsMax },
    goal: '',
    facts: [],
  };
}
