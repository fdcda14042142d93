import { forkScript } from '../harness/run.js';
import type { FloodResult, FloodRun } from './flood.js';
import type { MixResult, MixRun } from './mix.js';
import { PROBE_TIMEOUT_MS, type Probe, type ProbeKind } from './outcomes.js';

export interface LoadProcess {
  pid: number;
  mix(run: MixRun): Promise<MixResult>;
  flood(run: FloodRun): Promise<FloodResult>;
}

/** Forks load-process.ts: the mix and the flood run there, one at a time. */
export async function startLoadProcess(): Promise<LoadProcess> {
  const child = await forkScript(new URL('./load-process.ts', import.meta.url));
  let nextId = 0;
  const waiting = new Map<number, { resolve(value: unknown): void; reject(error: Error): void }>();
  child.on('message', (message: { id: number; result?: unknown; error?: string }) => {
    const waiter = waiting.get(message.id);
    waiting.delete(message.id);
    if (message.error !== undefined) waiter?.reject(new Error(`load process: ${message.error}`));
    else waiter?.resolve(message.result);
  });
  child.on('exit', (code) => {
    for (const waiter of waiting.values()) waiter.reject(new Error(`the load process exited (code ${code})`));
    waiting.clear();
  });
  const ask = <T>(message: object) =>
    new Promise<T>((resolve, reject) => {
      const id = (nextId += 1);
      waiting.set(id, { resolve: resolve as (value: unknown) => void, reject });
      child.send({ id, ...message });
    });
  return {
    pid: child.pid!,
    mix: (run) => ask<MixResult>({ mix: run }),
    flood: (run) => ask<FloodResult>({ flood: run }),
  };
}

export interface Prober {
  /** Points the probes at `base` (null: none are sent). */
  target(base: string | null): void;
  /** The probes of `kind` sent to `base` between `from` and `to` (epoch ms) whose outcome is known. */
  probes(base: string, kind: ProbeKind, from: number, to: number): Probe[];
  /** Stops probing; resolves once every probe sent has its outcome. */
  drain(): Promise<void>;
}

/** Forks prober.ts: `/healthz` and page 1, each on a new connection, every 250 ms. */
export async function startProber(): Promise<Prober> {
  const child = await forkScript(new URL('./prober.ts', import.meta.url));
  const seen: Probe[] = [];
  let drained: () => void = () => {};
  const done = new Promise<void>((resolve) => (drained = resolve));
  child.on('message', (message: Probe | { drained: true }) => {
    if ('drained' in message) drained();
    else seen.push(message);
  });
  child.on('exit', () => drained());
  return {
    target: (base) => child.connected && child.send({ target: base }),
    probes: (base, kind, from, to) =>
      seen.filter((p) => p.target === base && p.kind === kind && p.sentAt >= from && p.sentAt < to),
    async drain() {
      if (child.connected) child.send({ stop: true });
      await Promise.race([done, new Promise((resolve) => setTimeout(resolve, PROBE_TIMEOUT_MS + 5_000))]);
    },
  };
}
