import { setTimeout as sleep } from 'node:timers/promises';
import { sql, type Kysely } from 'kysely';
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
 * lock in disguise), which makes it the fastest honest baseline for "plain unordered inserts".
 * Supports `CreateTask` only.
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
  return db.transaction().execute(async (trx) => {
    const drawn = await sql<{ id: number; now: Date }>`select nextval(${TASK_ID_SEQUENCE}::regclass)::int as id, clock_timestamp() as now`.execute(trx);
    const { id, now } = drawn.rows[0]!;
    if (delayMs > 0) await sleep(delayMs);
    const decision = decide(command, null);
    if (!decision.ok) return decision;
    const event = decision.events[0]!;
    const at = { streamId: id, version: 1, recordedAt: now };
    const task = evolve(null, event, at) as TaskState;
    const metadata = { actor: command.actor.username, actor_id: command.actor.userId };
    const inserted = await trx
      .insertInto('events')
      .values({
        position: sql<number>`nextval(${POSITION_SEQUENCE}::regclass)`,
        stream_id: id,
        version: 1,
        type: event.type,
        data: JSON.stringify(event.data),
        metadata: JSON.stringify(metadata),
        recorded_at: now,
      })
      .returning('position')
      .executeTakeFirstOrThrow();
    await trx.insertInto('tasks').values(taskToRow(task)).execute();
    return { ok: true, task, events: [{ ...event, ...at, position: inserted.position, metadata }] };
  });
}
