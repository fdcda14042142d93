import type { Worker } from 'node:cluster';
import type autocannon from 'autocannon';
import type { Redis } from 'ioredis';
import { interleave, runAutocannon, type Slice } from './send.js';
import { withCosts } from './service.js';
import { spread, sumOf } from './stats.js';
import { forkWorkers } from './workers.js';

/** The node:cluster workers serving each variant, and the seconds each is loaded before the rounds. */
export const WORKERS = 2;
export const WARMUP_S = 2;

/** A server under measure: its workers and the autocannon load it takes. */
export type Target<V = string> = { variant: V; workers: Worker[]; load: autocannon.Options };

/**
 * Forks WORKERS workers for each variant (told `{ variant, ...setup }`) and warms each with its `load` for WARMUP_S:
 * once all are up, or (`each`) right after its fork.
 */
export async function startVariants<V>(
  variants: readonly V[],
  setup: object,
  load: (variant: V, base: string) => autocannon.Options,
  warm: 'all' | 'each' = 'all',
): Promise<Target<V>[]> {
  const targets: Target<V>[] = [];
  for (const variant of variants) {
    const { workers, base } = await forkWorkers(WORKERS, { variant, ...setup });
    targets.push({ variant, workers, load: load(variant, base) });
    if (warm === 'each') await runAutocannon(targets.at(-1)!.load, WARMUP_S);
  }
  if (warm === 'all') for (const target of targets) await runAutocannon(target.load, WARMUP_S);
  return targets;
}

/**
 * Loads each target for `sliceS` in each of `rounds` interleaved rounds (send.ts `interleave`), with what each slice
 * cost (withCosts): Redis's counters through `admin`, the target's workers' CPU unless `workersCpu` is false, and
 * `settleMs` waited after the slice (the requests still in flight when autocannon stopped belong to it).
 */
export function measureVariants<T extends Target<unknown>>(
  targets: T[],
  rounds: number,
  sliceS: number,
  options: { admin?: Redis; settleMs?: number; order?: 'rotate' | 'alternate'; workersCpu?: boolean } = {},
) {
  const { admin, settleMs = 0, order = 'rotate', workersCpu = true } = options;
  const measure = (target: T) =>
    withCosts(admin, workersCpu ? target.workers : [], () => runAutocannon(target.load, sliceS), settleMs);
  return interleave(targets, rounds, measure, order);
}

/** `slices`' rate (`pick` per second) and its ratio to `baseline`'s: overall, and the range of the rounds' ratios. */
export function rates(slices: Slice[], baseline: Slice[], pick: (slice: Slice) => number) {
  const rate = (list: Slice[]) => sumOf(list, pick) / sumOf(list, (slice) => slice.seconds);
  return {
    reqPerS: Math.round(rate(slices)),
    ratio: Number((rate(slices) / rate(baseline)).toFixed(3)),
    roundRatios: spread(slices.map((slice, round) => rate([slice]) / rate([baseline[round]!]))),
  };
}
