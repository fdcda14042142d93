import { setTimeout as sleep } from 'node:timers/promises';
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.js';
import { COUNTER_NAMES } from '../events/store/batch-state.js';
import { eventFacts } from '../events/projections/read-model-facts.js';
import type { ReportParams } from './report.input.js';

/** One UTC day of a report: events of each kind recorded that day, and open tasks when it ended. */
export interface ReportDay {
  date: string;
  created: number;
  completed: number;
  reopened: number;
  deleted: number;
  open_at_end: number;
}

type Tally = Pick<ReportDay, 'created' | 'completed' | 'reopened' | 'deleted'>;

export interface ReportResult extends ReportParams {
  /** Open tasks when the range began (end of the day before `from`). */
  open_at_start: number;
  days: ReportDay[];
  totals: Tally;
  /** The log was read up to this position, the last one appended when the job started. */
  as_of_position: number;
  /**
   * When the job started (RFC 3339). Days after its UTC date are not listed: they have not
   * happened yet, and figures for them would only repeat the last known day.
   */
  as_of: string;
}

export interface AggregateOptions {
  /** Events per batch: one short query each, so no statement or snapshot lasts long. */
  batchSize: number;
  /** Pause between batches (0 in production; lets a test interrupt a job midway). */
  pauseMs?: number;
  /** Called after each batch with the position reached and the position it runs to. */
  onBatch?: (position: number, upTo: number) => Promise<void> | void;
}

const DAY_MS = 86_400_000;

/**
 * Aggregates the event log for a report, reading it in position order in keyset batches up to
 * the last position at the start: each batch is grouped by UTC day in PostgreSQL, so memory holds
 * one row per day whatever the log's size. With `owner`, only that owner's tasks count.
 *
 * The read starts at the first position recorded on or after `from` (an index read), not at 0
 * (docs/architecture.md "Bounded work"). The open tasks at the start are then the open tasks at
 * that last position (the `tasks` projection, written in the same transaction as the log, read in
 * the same statement as the position) less what every event read from `from` on changed.
 */
export async function aggregateReport(
  db: Kysely<Database>,
  params: ReportParams,
  options: AggregateOptions,
): Promise<ReportResult> {
  const start = new Date(`${params.from}T00:00:00Z`);
  const { upTo, asOf, openNow, firstAfter } = await readStart(db, start, params.owner);
  const byDay = new Map<string, Tally & { open_delta: number }>();
  let changedSinceFrom = 0;
  for (let after = firstAfter; after < upTo; after += options.batchSize) {
    const batchEnd = Math.min(after + options.batchSize, upTo);
    for (const row of await tallyBatch(db, after, batchEnd, params.owner)) {
      if (row.day < params.from) continue;
      changedSinceFrom += row.open_delta;
      if (row.day <= params.to) byDay.set(row.day, addTallies(byDay.get(row.day), row));
    }
    await options.onBatch?.(batchEnd, upTo);
    if (options.pauseMs && batchEnd < upTo) await sleep(options.pauseMs);
  }
  return summarise(params, openNow - changedSinceFrom, byDay, upTo, asOf);
}

/**
 * In one snapshot: the last position, the time, the open tasks (of `owner`) at that position,
 * and the position before the first event recorded on or after `start` (every event at or before
 * it was recorded before `start`; a few after it may be too, and are read and skipped).
 */
async function readStart(db: Kysely<Database>, start: Date, owner: string | null) {
  const { rows } = await sql<{ up_to: number | null; now: Date; open_now: number; first_after: number | null }>`
    select c.value as up_to, now() as now,
      (select count(*)::int from tasks t
        where not t.completed and ${owner === null ? sql`true` : sql`t.owner = ${owner}`}) as open_now,
      (select min(e.position) - 1 from events e where e.recorded_at >= ${start} and e.position <= c.value) as first_after
    from counters c where c.name = ${COUNTER_NAMES.lastPosition}`.execute(db);
  const row = rows[0];
  const upTo = Number(row?.up_to ?? 0);
  return {
    upTo,
    asOf: row?.now ?? new Date(),
    openNow: row?.open_now ?? 0,
    firstAfter: row?.first_after === null || row?.first_after === undefined ? upTo : Number(row.first_after),
  };
}

async function tallyBatch(db: Kysely<Database>, after: number, upTo: number, owner: string | null) {
  const { rows } = await sql<Tally & { day: string; open_delta: number }>`
    select to_char(recorded_at at time zone 'UTC', 'YYYY-MM-DD') as day,
      count(*) filter (where type = 'TaskCreated')::int as created,
      count(*) filter (where type = 'TaskCompleted')::int as completed,
      count(*) filter (where type = 'TaskReopened')::int as reopened,
      count(*) filter (where type = 'TaskDeleted')::int as deleted,
      sum(open_delta)::int as open_delta
    from (${eventFacts(after, upTo)}) f
    where ${owner === null ? sql`true` : sql`owner = ${owner}`}
    group by 1`.execute(db);
  return rows;
}

/** Adds a batch's tally of a day to the earlier ones (a day can span several batches). */
function addTallies(sum: (Tally & { open_delta: number }) | undefined, row: Tally & { open_delta: number }) {
  if (!sum)
    return {
      created: row.created,
      completed: row.completed,
      reopened: row.reopened,
      deleted: row.deleted,
      open_delta: row.open_delta,
    };
  return {
    created: sum.created + row.created,
    completed: sum.completed + row.completed,
    reopened: sum.reopened + row.reopened,
    deleted: sum.deleted + row.deleted,
    open_delta: sum.open_delta + row.open_delta,
  };
}

function summarise(
  params: ReportParams,
  openAtStart: number,
  tallies: Map<string, Tally & { open_delta: number }>,
  upTo: number,
  asOf: Date,
): ReportResult {
  const days: ReportDay[] = [];
  const totals: Tally = { created: 0, completed: 0, reopened: 0, deleted: 0 };
  let open = openAtStart;
  const last = Math.min(
    Date.parse(`${params.to}T00:00:00Z`),
    Date.parse(`${asOf.toISOString().slice(0, 10)}T00:00:00Z`),
  );
  for (let t = Date.parse(`${params.from}T00:00:00Z`); t <= last; t += DAY_MS) {
    const date = new Date(t).toISOString().slice(0, 10);
    const tally = tallies.get(date) ?? { created: 0, completed: 0, reopened: 0, deleted: 0, open_delta: 0 };
    open += tally.open_delta;
    days.push({
      date,
      created: tally.created,
      completed: tally.completed,
      reopened: tally.reopened,
      deleted: tally.deleted,
      open_at_end: open,
    });
    for (const key of ['created', 'completed', 'reopened', 'deleted'] as const) totals[key] += tally[key];
  }
  return { ...params, open_at_start: openAtStart, days, totals, as_of_position: upTo, as_of: asOf.toISOString() };
}
