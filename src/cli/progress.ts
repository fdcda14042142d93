import type { Kysely } from 'kysely';
import type { Database } from '../../db/database.js';
import { rebuildProjections, type RebuildSummary } from '../events/projections/rebuild.js';

/** Where progress goes: a terminal gets a live bar, anything else only the summary line. */
export type ProgressStream = Pick<NodeJS.WriteStream, 'write'> & { isTTY?: boolean; columns?: number };

/** `npm run rebuild`: rebuilds every projection, with a progress bar on a terminal and a summary line at the end. */
export async function rebuildWithProgress(
  db: Kysely<Database>,
  progress: ProgressStream,
  batchSize?: number,
): Promise<RebuildSummary> {
  const result = await rebuildProjections(db, { batchSize, onProgress: drawBar(progress) });
  progress.write(
    `rebuilt from ${result.events} events in ${result.seconds.toFixed(1)} s: tasks ${result.tasks} live (last id ` +
      `${result.lastTaskId}), ` +
      `owner_task_counts ${result.owners} owners, checkpoint ${result.events}\n`,
  );
  return result;
}

/**
 * A one-line bar redrawn in place on a terminal, at most every 100 ms; silent elsewhere. Its
 * clock starts at the first report (none done yet, the total known).
 */
export function drawBar(stream: ProgressStream): (done: number, total: number) => void {
  let began = Date.now();
  let drawnAt = 0;
  return (done, total) => {
    if (!stream.isTTY || total === 0) return;
    const now = Date.now();
    if (done === 0) return void (began = now);
    if (now - drawnAt < 100 && done < total) return;
    drawnAt = now;
    const width = Math.max(10, Math.min(40, (stream.columns ?? 80) - 50));
    const filled = Math.round((done / total) * width);
    const rate = done / Math.max((now - began) / 1000, 0.001);
    stream.write(
      `\r[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${Math.floor((done / total) * 100)}% ${done}/${total} ` +
        `events ${Math.round(rate)}/s`,
    );
    if (done >= total) stream.write('\n');
  };
}
