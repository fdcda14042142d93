import type { Deps } from '../src/deps.js';
import { startProcessors } from './processors.js';

/**
 * What a job child runs: the BullMQ processors. `close()` lets active jobs finish (BullMQ's
 * graceful close).
 */
export async function startJobs(deps: Deps): Promise<{ close(): Promise<void> }> {
  return startProcessors(deps);
}
