import { forkScript } from '../harness/run.js';
import { quantile } from '../harness/stats.js';
import type { GoodClientSettings, GoodMode, Sample } from './good-client.js';

/** The good client's answers in one window, as a row reports them. */
export interface Latencies {
  n: number;
  p50Ms: number;
  p99Ms: number;
  /** Answers other than 2xx (0: no answer within 10 s), by status. */
  failures: Record<number, number>;
}

export interface GoodClient {
  setMode(mode: GoodMode): void;
  /** The answers to requests sent between `from` and `to` (epoch ms) in `mode`. */
  latencies(mode: GoodMode, from: number, to: number): Latencies;
}

/** Forks ops/bench/abuse/good-client.ts with `settings`; it stops when the benchmark ends. */
export async function startGoodClient(settings: GoodClientSettings): Promise<GoodClient> {
  const child = await forkScript(new URL('./good-client.ts', import.meta.url), [JSON.stringify(settings)]);
  const samples: Sample[] = [];
  child.on('message', (sample: Sample) => samples.push(sample));
  return {
    setMode: (mode) => child.connected && child.send({ mode }),
    latencies(mode, from, to) {
      const picked = samples.filter((s) => s.mode === mode && s.sentAt >= from && s.sentAt < to);
      const sorted = picked.map((s) => s.ms).sort((a, b) => a - b);
      const failures: Record<number, number> = {};
      for (const s of picked) if (s.status < 200 || s.status > 299) failures[s.status] = (failures[s.status] ?? 0) + 1;
      return { n: picked.length, p50Ms: quantile(sorted, 0.5), p99Ms: quantile(sorted, 0.99), failures };
    },
  };
}
