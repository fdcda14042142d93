import { randomUUID } from 'node:crypto';
import { sql, type Kysely, type Selectable } from 'kysely';
import type { Database, ReportsTable } from '../../db/database.js';
import { decideReplay, takeClaim, type IdempotencyClaim, type Replay } from '../idempotency/idempotency.js';
import type { ReportResult } from './aggregate.js';
import type { ReportParams } from './report.input.js';
import type { PageSource } from '../pagination/types.js';

/** A report as stored (without its list key, `seq`, which PostgreSQL assigns on insert). */
export type ReportRecord = Omit<Selectable<ReportsTable>, 'seq'>;

export type CreateReportOutcome =
  | { ok: true; report: ReportRecord; replayed?: undefined }
  | { ok: true; replayed: Replay<ReportRecord>; report?: undefined }
  | { ok: false; error: 'idempotency_mismatch' };

/**
 * Records a pending report. With an `Idempotency-Key` claim, the key is taken in the same
 * transaction (the table POST /api/tasks/ uses): a repeat within the TTL with the same request
 * gets the report as first recorded (`replayed`) and creates nothing, a different request is a
 * mismatch, and of concurrent repeats exactly one creates (the others wait on the key's row, then
 * replay).
 */
export async function createReport(
  db: Kysely<Database>,
  request: {
    userId: number;
    params: ReportParams;
    idempotency?: IdempotencyClaim;
    now: Date;
  },
): Promise<CreateReportOutcome> {
  const report: ReportRecord = {
    id: randomUUID(),
    user_id: request.userId,
    status: 'pending',
    params: request.params,
    result: null,
    error: null,
    attempts: 0,
    created_at: request.now,
    started_at: null,
    finished_at: null,
  };
  return db.transaction().execute(async (trx) => {
    const keyed = request.idempotency;
    const claim = keyed && { userId: request.userId, key: keyed.key, requestHash: keyed.requestHash };
    // The record keeps the pending report as recorded here, not an HTTP answer, and is taken in
    // this transaction with the report's insert: neither commits without the other. The route
    // renders the first answer and every replay from that report with one function
    // (src/api/reports/reports.routes.ts), so a replay repeats the first answer however far the
    // report has got since.
    const earlier = claim && (await takeClaim(trx, claim, report));
    if (claim && earlier) {
      const replay = decideReplay(earlier, claim, reportFromJson);
      return replay.ok ? { ok: true, replayed: replay.replay } : replay;
    }
    await trx
      .insertInto('reports')
      .values({ ...report, params: JSON.stringify(report.params), result: null })
      .execute();
    return { ok: true, report };
  });
}

/**
 * A report read back from the JSON an idempotency record keeps of it (`JSON.stringify` of a
 * ReportRecord: dates as ISO strings). Throws on anything else.
 */
function reportFromJson(json: unknown): ReportRecord {
  const r = (typeof json === 'object' && json !== null ? json : {}) as Record<string, unknown>;
  const date = (value: unknown) => (typeof value === 'string' ? new Date(value) : null);
  if (typeof r.id !== 'string' || typeof r.user_id !== 'number' || typeof r.created_at !== 'string')
    throw new Error('an idempotency record holds something other than a report');
  return {
    id: r.id,
    user_id: r.user_id,
    status: r.status as ReportRecord['status'],
    params: r.params as ReportRecord['params'],
    result: (r.result ?? null) as ReportRecord['result'],
    error: (r.error ?? null) as ReportRecord['error'],
    attempts: Number(r.attempts),
    created_at: new Date(r.created_at),
    started_at: date(r.started_at),
    finished_at: date(r.finished_at),
  };
}

/** The report `id` if `userId` created it; anyone else gets nothing, as if it did not exist. */
export async function findReport(db: Kysely<Database>, id: string, userId: number): Promise<ReportRecord | undefined> {
  return db.selectFrom('reports').selectAll().where('id', '=', id).where('user_id', '=', userId).executeTakeFirst();
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
export async function recordReportFailure(
  db: Kysely<Database>,
  id: string,
  error: string,
  final: boolean,
): Promise<void> {
  await db
    .updateTable('reports')
    .set({
      status: final ? 'failed' : 'pending',
      error: error.slice(0, 2_000),
      finished_at: final ? sql<Date>`now()` : null,
    })
    .where('id', '=', id)
    .where('status', 'in', ['pending', 'running'])
    .execute();
}

/** Reports not finished and created before `before`, oldest first: candidates for re-enqueueing. */
export async function unfinishedReportIds(db: Kysely<Database>, before: Date, limit = 1_000): Promise<string[]> {
  const rows = await db
    .selectFrom('reports')
    .select('id')
    .where('status', 'in', ['pending', 'running'])
    .where('created_at', '<', before)
    .orderBy('created_at')
    .limit(limit)
    .execute();
  return rows.map((r) => r.id);
}

/** A report with its list key. */
export type ListedReport = Selectable<ReportsTable>;

/** One user's reports as a paginated collection in creation order, keyed by `seq`. */
export function userReportsSource(db: Kysely<Database>, userId: number): PageSource<ListedReport> {
  const own = () => db.selectFrom('reports').where('user_id', '=', userId);
  return {
    keyOf: (report) => report.seq,
    async page(offset, limit, ordering) {
      const [rows, total] = await Promise.all([
        own().selectAll().orderBy('seq', ordering).limit(limit).offset(offset).execute(),
        own()
          .select(sql<number>`count(*)::int`.as('n'))
          .executeTakeFirstOrThrow(),
      ]);
      return { count: total.n, items: rows };
    },
    async seek(key, limit, ordering) {
      let query = own().selectAll().orderBy('seq', ordering).limit(limit);
      if (key !== null) query = query.where('seq', ordering === 'asc' ? '>' : '<', key);
      return query.execute();
    },
  };
}
