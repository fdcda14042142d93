import { setTimeout as sleep } from 'node:timers/promises';
import type { BurstResult } from '../../../test/helpers/burst.js';
import { delta, lessBackground, watchFds, type Delta, type Snapshot } from './costs.js';
import type { GoodClient, GoodMode, Latencies } from './good-client.js';
import { statusList, type RowResult } from './report.js';

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
export const QUIET_MS = 4_000;

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
