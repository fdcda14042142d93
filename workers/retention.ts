import { sweepExpiredTokens } from '../src/auth/tokens.js';
import type { Deps } from '../src/deps.js';
import { sweepExpiredClaims } from '../src/idempotency/idempotency.js';
import type { RETENTION_TABLES } from '../src/base/metrics.js';

type Table = (typeof RETENTION_TABLES)[number];

/**
 * One retention sweep: deletes expired tokens and idempotency records past their TTL, in batches
 * of `RETENTION_BATCH_SIZE` rows, each its own statement (no long transaction), until a batch
 * comes back short. Counts what went in `paceline_retention_swept_total{table}`. Stops between
 * batches once `stopping()` says so (a drain does not wait for a large backlog).
 * @returns the rows deleted per table.
 */
export async function sweepRetention(
  deps: Pick<Deps, 'config' | 'db' | 'clock' | 'metrics'>,
  stopping: () => boolean = () => false,
): Promise<Record<Table, number>> {
  const { config, db, metrics } = deps;
  const batch = config.RETENTION_BATCH_SIZE;
  const now = deps.clock.now();
  const sweeps: Record<Table, () => Promise<number>> = {
    tokens: () => sweepExpiredTokens(db, now, batch),
    idempotency_keys: () => sweepExpiredClaims(db, batch),
  };
  const swept = { tokens: 0, idempotency_keys: 0 };
  for (const table of Object.keys(sweeps) as Table[]) {
    for (let gone = batch; gone === batch && !stopping();) {
      gone = await sweeps[table]();
      swept[table] += gone;
      metrics.retentionSwept.inc({ table }, gone);
    }
  }
  return swept;
}
