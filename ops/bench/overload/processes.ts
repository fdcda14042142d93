import { forkScript } from '../harness/run.js';
import type { FloodResult, FloodRun } from './flood.js';
import type { MixResult, MixRun } from './mix.js';

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
