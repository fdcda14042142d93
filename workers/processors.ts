import type { Deps } from '../src/deps.js';

/** The BullMQ processors a job child runs; `close()` waits for active jobs. */
export async function startProcessors(deps: Deps): Promise<{ close(): Promise<void> }> {
  const running: Array<{ close(): Promise<void> }> = [];
  deps.logger.info({ processors: running.length }, 'job processors started');
  return { close: async () => void (await Promise.all(running.map((p) => p.close()))) };
}
