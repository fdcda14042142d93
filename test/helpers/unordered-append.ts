import { setTimeout as sleep } from 'node:timers/promises';
import { sql, type Expression, type Kysely } from 'kysely';
import type { Database } from '../../db/database.js';
import { decide } from '../../src/events/decide.js';
import { evolve } from '../../src/events/evolve.js';
import type { CommandBus } from '../../src/events/group-commit.js';
import type { CommandOutcome, TaskCommand, TaskState } from '../../src/events/task.events.js';
import { taskToRow } from '../../src/events/task.rows.js';

/**
 * The append path Paceline deliberately does NOT use, kept only for tests and benchmarks: the
 * task id comes from a plain PostgreSQL sequence, drawn at the start of the transaction, and
 * each command commits on its own with no global lock. Ids are therefore handed out in one order
 * and committed in another, so a reader can see id N+1 before id N exists; event positions come
 * from a second sequence at insert time and stop matching id order. It writes the same event
 * and projection rows as the product, but no shared counter row (that row would be a global
 * lock in disguise), and without a delay it is a single statement: the fastest honest baseline
 * for "plain unordered inserts". Supports `CreateTask` only.
 */

export const TASK_ID_SEQUENCE = 'unordered_task_id';
export const POSITION_SEQUENCE = 'unordered_event_position';

/** Creates the two sequences the variant draws from (idempotent). */
export async function createUnorderedSequences(db: Kysely<Database>): Promise<void> {
  await sql`create sequence if not exists ${sql.id(TASK_ID_SEQUENCE)}`.execute(db);
  await sql`create sequence if not exists ${sql.id(POSITION_SEQUENCE)}`.execute(db);
}

export interface UnorderedOptions {
  /** Milliseconds to wait between drawing the id and writing; 0 for none. Default 0. */
  delayMs?: () => number;
}

/** A `CommandBus` over the unordered append: one transaction per command, ids from `nextval`. */
export function createUnorderedBus(db: Kysely<Database>, options: UnorderedOptions = {}): CommandBus {
  const delayMs = options.delayMs ?? (() => 0);
  const inFlight = new Set<Promise<CommandOutcome>>();
  let closed = false;
  return {
    execute(command) {
      if (closed) return Promise.reject(new Error('command bus is closed'));
      const running = appendUnordered(db, command, delayMs());
      inFlight.add(running);
      void running.finally(() => inFlight.delete(running)).catch(() => {});
      return running;
    },
    async close() {
      closed = true;
      await Promise.allSettled([...inFlight]);
    },
  };
}

async function appendUnordered(db: Kysely<Database>, command: TaskCommand, delayMs: number): Promise<CommandOutcome> {
  if (command.type !== 'CreateTask') throw new Error(`the unordered variant supports CreateTask only, not ${command.type}`);
  const decision = decide(command, null);
  if (!decision.ok) return decision;
  const event = decision.events[0]!;
  const metadata = { actor: command.actor.username, actor_id: command.actor.userId };
  const write = async (executor: Kysely<Database>, id: Expression<number>) => {
    const now = new Date();
    const task = evolve(null, event, { streamId: 0, version: 1, recordedAt: now }) as TaskState;
    const written = await executor
      .with('created', (qb) => qb.insertInto('tasks').values({ ...taskToRow(task), id }).returning(['id']))
      .insertInto('events')
      .columns(['position', 'stream_id', 'version', 'type', 'data', 'metadata', 'recorded_at'])
      .expression((eb) =>
        eb.selectFrom('created').select([
          sql<number>`nextval(${POSITION_SEQUENCE}::regclass)`.as('position'),
          'created.id',
          sql.lit(1).as('version'),
          sql<string>`${event.type}::text`.as('type'),
          sql<string>`${JSON.stringify(event.data)}::jsonb`.as('data'),
          sql<string>`${JSON.stringify(metadata)}::jsonb`.as('metadata'),
          sql<Date>`${now}::timestamptz`.as('recorded_at'),
        ]),
      )
      .returning(['position', 'stream_id'])
      .executeTakeFirstOrThrow();
    const at = { streamId: written.stream_id, version: 1, recordedAt: now };
    return { ok: true as const, task: { ...task, id: written.stream_id }, events: [{ ...event, ...at, position: written.position, metadata }] };
  };
  // Without a delay: one statement, one round trip, its own transaction: the cheapest honest insert.
  if (delayMs <= 0) return write(db, sql<number>`nextval(${TASK_ID_SEQUENCE}::regclass)`);
  return db.transaction().execute(async (trx) => {
    const drawn = await sql<{ id: number }>`select nextval(${TASK_ID_SEQUENCE}::regclass)::int as id`.execute(trx);
    await sleep(delayMs);
    return write(trx, sql<number>`${drawn.rows[0]!.id}::bigint`);
  });
}
