import { randomUUID } from 'node:crypto';
import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database } from '../../db/database.js';
import { IDEMPOTENCY_TTL_MS } from '../events/append-batch.js';
import type { IdempotencyClaim } from '../events/task.events.js';
import type { ReportResult } from './aggregate.js';
import type { ReportParams } from './report.input.js';
import { reportPath, viewReport, type ReportResource } from './report.view.js';

export type CreateReportOutcome =
  | { ok: true; report: ReportResource; replayed?: undefined }
  | { ok: true; replayed: { status: number; body: unknown; resourcePath: string | null }; report?: undefined }
  | { ok: false; error: 'idempotency_mismatch' };

/** The answer a fresh report request gets: 202 with the pending report. */
export const REPORT_ACCEPTED = 202;

/**
 * Records a pending report. With an `Idempotency-Key` claim, the key is taken in the same
 * transaction (in the table POST /api/tasks/ uses): a repeat within 24 h with the same request
 * replays the original answer and creates nothing, a different request is a mismatch, and of
 * concurrent repeats exactly one creates (the others wait on the key's row, then replay).
 */
export async function createReport(
  db: Kysely<Database>,
  request: { userId: number; params: ReportParams; idempotency?: IdempotencyClaim; now: Date },
): Promise<CreateReportOutcome> {
  const row = { id: randomUUID(), user_id: request.userId, status: 'pending' as const, params: request.params, result: null, error: null, attempts: 0, created_at: request.now, started_at: null, finished_at: null };
  const report = viewReport(row);
  return db.transaction().execute(async (trx) => {
    if (request.idempotency) {
      const earlier = await claimKey(trx, request.userId, request.idempotency, report);
      if (earlier) {
        if (earlier.request_hash !== request.idempotency.requestHash) return { ok: false, error: 'idempotency_mismatch' };
        return { ok: true, replayed: { status: earlier.status, body: earlier.body, resourcePath: earlier.resource_path } };
      }
    }
    await trx.insertInto('reports').values({ ...row, params: JSON.stringify(row.params) }).execute();
    return { ok: true, report };
  });
}

/** Takes the key (or an expired one) and returns nothing, or returns the live record that holds it. */
async function claimKey(trx: Transaction<Database>, userId: number, claim: IdempotencyClaim, report: ReportResource) {
  const taken = await trx
    .insertInto('idempotency_keys')
    .values({ user_id: userId, key: claim.key, request_hash: claim.requestHash, status: REPORT_ACCEPTED, body: JSON.stringify(report), resource_path: reportPath(report.id), created_at: sql<Date>`now()` })
    .onConflict((oc) =>
      oc
        .columns(['user_id', 'key'])
        .doUpdateSet((eb) => ({ request_hash: eb.ref('excluded.request_hash'), status: eb.ref('excluded.status'), body: eb.ref('excluded.body'), resource_path: eb.ref('excluded.resource_path'), created_at: eb.ref('excluded.created_at') }))
        .where('idempotency_keys.created_at', '<=', sql<Date>`now() - ${`${IDEMPOTENCY_TTL_MS} milliseconds`}::interval`),
    )
    .returning('key')
    .executeTakeFirst();
  if (taken) return undefined;
  return trx.selectFrom('idempotency_keys').select(['request_hash', 'status', 'body', 'resource_path']).where('user_id', '=', userId).where('key', '=', claim.key).executeTakeFirstOrThrow();
}

/** The report `id` if `userId` created it; anyone else gets nothing, as if it did not exist. */
export async function findReport(db: Kysely<Database>, id: string, userId: number): Promise<ReportResource | undefined> {
  const row = await db.selectFrom('reports').selectAll().where('id', '=', id).where('user_id', '=', userId).executeTakeFirst();
  return row ? viewReport(row) : undefined;
}

/** Marks an attempt started and returns the report's parameters; nothing when it is already finished (or unknown). */
export async function startReport(db: Kysely<Database>, id: string): Promise<ReportParams | undefined> {
  const row = await db
    .updateTable('reports')
    .set((eb) => ({ status: 'running', started_at: sql<Date>`now()`, attempts: eb('attempts', '+', 1) }))
    .where('id', '=', id)
    .where('status', 'in', ['pending', 'running'])
    .returning('params')
    .executeTakeFirst();
  return row?.params;
}

/** Stores the result; a report already done keeps its first result. */
export async function completeReport(db: Kysely<Database>, id: string, result: ReportResult): Promise<boolean> {
  const done = await db
    .updateTable('reports')
    .set({ status: 'done', result: JSON.stringify(result), error: null, finished_at: sql<Date>`now()` })
    .where('id', '=', id)
    .where('status', '<>', 'done')
    .executeTakeFirst();
  return done.numUpdatedRows > 0n;
}

/** Records a failed attempt: `failed` when no attempt is left, otherwise back to `pending` for the retry. */
export async function recordReportFailure(db: Kysely<Database>, id: string, error: string, final: boolean): Promise<void> {
  await db
    .updateTable('reports')
    .set({ status: final ? 'failed' : 'pending', error: error.slice(0, 2_000), finished_at: final ? sql<Date>`now()` : null })
    .where('id', '=', id)
    .where('status', 'in', ['pending', 'running'])
    .execute();
}

/** Reports not finished and created before `before`, oldest first: candidates for re-enqueueing. */
export async function unfinishedReportIds(db: Kysely<Database>, before: Date, limit = 1_000): Promise<string[]> {
  const rows = await db.selectFrom('reports').select('id').where('status', 'in', ['pending', 'running']).where('created_at', '<', before).orderBy('created_at').limit(limit).execute();
  return rows.map((r) => r.id);
}
