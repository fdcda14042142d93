import { setTimeout as sleep } from 'node:timers/promises';
import { interleave, runWrk, type Slice } from '../harness/send.js';
import { treeCpuSeconds } from '../harness/service.js';
import { loadOfRow, ROWS, type Row, type Runtime, type Targets } from './processes.js';

/** One wrk run, with the CPU the processes that answered it used per request. */
export interface Run {
  wrk: Slice;
  cpuUsPerRequest: number;
}

/** One row in one round: the old runtime's run and the new one's, measured back to back. */
export interface Pair {
  old: Run;
  new: Run;
}

/**
 * A row is warm on a runtime once its processes have used this much CPU under the row's load: a fixed time warms less
 * on a busier host. On a loaded 2-core host, page 1's first runs cost about 1 ms of CPU per request on either line;
 * after 3.5 CPU-seconds node 24 was at 210 µs and node 20 at 475, and both reached their steady 130-150 µs after 9.
 */
export const WARMUP_CPU_S = 10;
/** The most one-second warm-up runs per row and runtime, whatever the CPU. */
export const WARMUP_MAX_RUNS = 30;

export interface Plan {
  runtimes: [old: Runtime, ours: Runtime];
  targets: Map<Runtime, Targets>;
  seconds: number;
  rounds: number;
}

/** Loads `row` on `runtime` in one-second runs until its processes have used WARMUP_CPU_S; returns how many runs. */
async function warmUp(row: Row, runtime: Runtime, plan: Plan): Promise<number> {
  const targets = plan.targets.get(runtime)!;
  const tree = targets.trees[row.server];
  const start = treeCpuSeconds(tree.primary);
  let runs = 0;
  while (runs < WARMUP_MAX_RUNS && treeCpuSeconds(tree.primary) - start < WARMUP_CPU_S) {
    await runWrk(loadOfRow(row, targets), 1);
    runs += 1;
  }
  return runs;
}

/** One measured run of `row` on `runtime`, logged as it ends. */
async function runRow(row: Row, runtime: Runtime, plan: Plan, label: string): Promise<Run> {
  const targets = plan.targets.get(runtime)!;
  const tree = targets.trees[row.server];
  const before = treeCpuSeconds(tree.primary);
  const wrk = await runWrk(loadOfRow(row, targets), plan.seconds);
  await sleep(300); // what was in flight when wrk stopped finishes, and is counted, before the next run
  const cpuUsPerRequest = ((treeCpuSeconds(tree.primary) - before) / wrk.requests) * 1e6;
  process.stderr.write(
    `${label}  ${row.name.padEnd(42)} node ${runtime.line}  ${Math.round(wrk.reqPerS).toString().padStart(6)} req/s  ` +
      `p99 ${wrk.p99Ms.toFixed(1)} ms  ${cpuUsPerRequest.toFixed(0)} µs CPU/req  non-2xx ${wrk.non2xx}\n`,
  );
  return { wrk, cpuUsPerRequest };
}

/**
 * Warms every row on both runtimes, then runs every row on both back to back in each round; the runtime that goes
 * first alternates by round (old then new, new then old, ...) and the rows rotate, so neither a runtime nor a row
 * gains from the host's drift. Returns the warm-up runs per row and runtime too.
 */
export async function measure(plan: Plan): Promise<{ pairs: Map<Row, Pair[]>; warmUpRuns: number[] }> {
  const [old, ours] = plan.runtimes;
  const warmUpRuns: number[] = [];
  for (const row of ROWS) {
    for (const runtime of plan.runtimes) {
      const runs = await warmUp(row, runtime, plan);
      warmUpRuns.push(runs);
      process.stderr.write(`warm-up    ${row.name.padEnd(42)} node ${runtime.line}  ${runs} s\n`);
    }
  }
  const pairs = await interleave(ROWS, plan.rounds, async (row, round): Promise<Pair> => {
    const [first, second] = round % 2 === 0 ? [old, ours] : [ours, old];
    const label = `round ${round + 1}/${plan.rounds}`;
    const [a, b] = [await runRow(row, first, plan, label), await runRow(row, second, plan, label)];
    return first === old ? { old: a, new: b } : { old: b, new: a };
  });
  return { pairs, warmUpRuns };
}
