/**
 * Seeds a large, consistent event history in a few statements (generate_series), for benchmarks
 * and tests that need many events fast: `tasks` TaskCreated events (positions 1..tasks), then a
 * TaskCompleted for every even task (positions tasks+1..tasks+tasks/2), spread evenly over
 * `spanMs` from `start` in position order, with the tasks projection, the counters and the
 * per-owner counts read model (checkpoint at the end) to match. Runs on an empty log.
 */
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.js';
import type { ReportDay } from '../../src/reports/aggregate.js';

export interface SeedOptions {
  tasks: number;
  owner: { id: number; username: string };
  start: Date;
  spanMs: number;
}

/** When the event at `position` was recorded. */
export function seededAt(options: SeedOptions, position: number): Date {
  const total = options.tasks + Math.floor(options.tasks / 2);
  return new Date(options.start.getTime() + Math.floor(((position - 1) * options.spanMs) / total));
}

export async function seedCompletedHistory(db: Kysely<Database>, options: SeedOptions): Promise<number> {
  const { tasks, owner, start, spanMs } = options;
  const completed = Math.floor(tasks / 2);
  const total = tasks + completed;
  const at = (position: unknown) =>
    sql`${start}::timestamptz + (((${position}::bigint - 1) * ${spanMs}::bigint) / ${total}::bigint) * interval '1 millisecond'`;
  await db.transaction().execute(async (trx) => {
    await sql`
      insert into events (position, stream_id, version, type, data, metadata, recorded_at)
      select i, i, 1, 'TaskCreated',
        jsonb_build_object('title', 'Task ' || i, 'description', '', 'completed', false, 'owner_id', ${owner.id}::bigint, 'owner', ${owner.username}::text),
        jsonb_build_object('actor', ${owner.username}::text, 'actor_id', ${owner.id}::bigint), ${at(sql`i`)}
      from generate_series(1, ${tasks}::bigint) i`.execute(trx);
    await sql`
      insert into events (position, stream_id, version, type, data, metadata, recorded_at)
      select ${tasks}::bigint + j, 2 * j, 2, 'TaskCompleted', '{}'::jsonb,
        jsonb_build_object('actor', ${owner.username}::text, 'actor_id', ${owner.id}::bigint), ${at(sql`${tasks}::bigint + j`)}
      from generate_series(1, ${completed}::bigint) j`.execute(trx);
    await sql`
      insert into tasks (id, title, description, completed, owner_id, owner, created_at, updated_at, version)
      select e.stream_id, e.data->>'title', '', c.position is not null, ${owner.id}::bigint, ${owner.username}::text,
        e.recorded_at, coalesce(c.recorded_at, e.recorded_at), case when c.position is null then 1 else 2 end
      from events e left join events c on c.stream_id = e.stream_id and c.version = 2
      where e.version = 1`.execute(trx);
    for (const [name, value] of [
      ['tasks.count', tasks],
      ['tasks.last_id', tasks],
      ['events.last_position', total],
    ] as const) {
      await trx.updateTable('counters').set({ value }).where('name', '=', name).execute();
    }
    await trx
      .insertInto('owner_task_counts')
      .values({ owner: owner.username, open: tasks - completed, completed })
      .execute();
    await trx
      .updateTable('projection_checkpoints')
      .set({ position: total })
      .where('name', '=', 'owner_task_counts')
      .execute();
  });
  return total;
}

/** The days a report from `from` to `to` must show over a seeded history, computed event by event. */
export function expectedDays(
  options: SeedOptions,
  from: string,
  to: string,
): { openAtStart: number; days: ReportDay[] } {
  const days = new Map<string, ReportDay>();
  for (let t = Date.parse(`${from}T00:00:00Z`); t <= Date.parse(`${to}T00:00:00Z`); t += 86_400_000) {
    const date = new Date(t).toISOString().slice(0, 10);
    days.set(date, { date, created: 0, completed: 0, reopened: 0, deleted: 0, open_at_end: 0 });
  }
  const completedCount = Math.floor(options.tasks / 2);
  let openAtStart = 0;
  for (let position = 1; position <= options.tasks + completedCount; position += 1) {
    const date = seededAt(options, position).toISOString().slice(0, 10);
    const created = position <= options.tasks;
    if (date < from) openAtStart += created ? 1 : -1;
    const day = days.get(date);
    if (day && created) day.created += 1;
    if (day && !created) day.completed += 1;
  }
  let open = openAtStart;
  for (const day of days.values()) day.open_at_end = open += day.created - day.completed;
  return { openAtStart, days: [...days.values()] };
}
