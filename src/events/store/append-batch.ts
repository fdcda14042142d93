import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database } from '../../../db/database.js';
import { claimId, decideReplay } from '../../idempotency/idempotency.js';
import { decide } from '../domain/decide.js';
import { evolve } from '../domain/evolve.js';
import { loadBatchState, type BatchState } from './batch-state.js';
import { writeBatch, type BatchWrites } from './batch-writes.js';
import { taskFromJson } from './task.rows.js';
import type { CommandOutcome, StoredEvent, TaskCommand, TaskState } from '../domain/task.events.js';

/** Names the global append lock among PostgreSQL advisory locks. */
export const APPEND_LOCK = 7_310_002;

/**
 * Told the batch's new head position after its writes and before its commit, still under the
 * lock; a throw rolls the batch back (docs/architecture.md, "Read cache").
 */
export type BeforeCommit = (head: number) => Promise<void>;

/** Whether `appendBatch` failed because the append lock was not granted within its `lockWaitMs`. */
export function isLockWaitOver(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === '55P03';
}

/**
 * Runs a batch of commands in ONE transaction that holds the global append lock until commit.
 * Task ids and event positions are drawn from counters under that lock, so commit order = id
 * order = position order, with no gaps. Commands are decided one after another against the
 * state the earlier ones left, so one command's rejection affects only itself. A batch that
 * appended events calls `beforeCommit` with its last position.
 */
export async function appendBatch(
  db: Kysely<Database>,
  commands: readonly TaskCommand[],
  beforeCommit?: BeforeCommit,
  lockWaitMs?: number,
): Promise<CommandOutcome[]> {
  return db.transaction().execute(async (trx) => {
    // Not granted within lockWaitMs: PostgreSQL fails the statement with 55P03 and nothing is written.
    if (lockWaitMs !== undefined)
      await sql`select set_config('lock_timeout', ${`${Math.max(1, Math.ceil(lockWaitMs))}ms`}, true)`.execute(trx);
    const { rows } = await sql<{
      now: Date;
    }>`select pg_advisory_xact_lock(${APPEND_LOCK}), clock_timestamp() as now`.execute(trx);
    const now = rows[0]!.now;
    const state = await loadBatchState(trx, commands);
    const writes: BatchWrites = {
      events: [],
      tasks: new Map(),
      created: [],
      idempotency: [],
      counters: { ...state.counters },
    };
    const outcomes = commands.map((command) => runCommand(command, state, writes, now));
    await writeBatch(trx as Transaction<Database>, writes, state.counters);
    if (beforeCommit && writes.counters.lastPosition !== state.counters.lastPosition)
      await beforeCommit(writes.counters.lastPosition);
    return outcomes;
  });
}

function runCommand(command: TaskCommand, state: BatchState, writes: BatchWrites, now: Date): CommandOutcome {
  const keyed = command.type === 'CreateTask' ? command.idempotency : undefined;
  const claim = keyed && { userId: command.actor.userId, key: keyed.key, requestHash: keyed.requestHash };
  const earlier = claim && state.idempotency.get(claimId(claim));
  if (claim && earlier) {
    const replay = decideReplay(earlier, claim, taskFromJson);
    return replay.ok ? { ok: true, replayed: replay.replay } : replay;
  }
  const streamId = command.type === 'CreateTask' ? writes.counters.lastTaskId + 1 : command.taskId;
  const current = command.type === 'CreateTask' ? null : (state.tasks.get(streamId) ?? null);
  const decision = decide(command, current);
  if (!decision.ok) return decision;

  let task: TaskState | null = current;
  const events: StoredEvent[] = [];
  for (const event of decision.events) {
    const at = { streamId, version: (task?.version ?? 0) + 1, recordedAt: now };
    task = evolve(task, event, at);
    writes.counters.lastPosition += 1;
    events.push({ ...event, ...at, position: writes.counters.lastPosition, metadata: metadataOf(command) });
  }
  if (events.length === 0) return { ok: true, task, events };

  writes.events.push(...events);
  writes.tasks.set(streamId, task);
  state.tasks.set(streamId, task);
  if (command.type === 'CreateTask') {
    writes.counters.lastTaskId = streamId;
    writes.created.push(streamId);
    writes.counters.taskCount += 1;
  }
  if (task === null) writes.counters.taskCount -= 1;
  if (claim && task) {
    // The record keeps the task as this command created it, not an HTTP answer: the store knows
    // no HTTP, and the route cannot render the answer before this point (the id and the time are
    // decided here, under the lock). writeBatch writes the record in this transaction with the
    // task's events, so neither commits without the other. The route renders the first answer
    // and every replay from this state with one function, so a replay repeats the first answer's
    // bytes however the task changed since. A later command of this batch with the key replays
    // it too, from the task as the record will read back (JSON).
    state.idempotency.set(claimId(claim), {
      requestHash: claim.requestHash,
      created: JSON.parse(JSON.stringify(task)),
    });
    writes.idempotency.push({ ...claim, resource: task });
  }
  return { ok: true, task, events };
}

function metadataOf(command: TaskCommand) {
  const { actor } = command;
  return { actor: actor.username, actor_id: actor.userId, ...(actor.requestId ? { request_id: actor.requestId } : {}) };
}

/**
 * The head position, read under the append lock and handed to `publish` before the lock is let
 * go: no batch can be between its own publication and its commit meanwhile, so the head given is
 * at or above every position a client was told of.
 */
export async function republishHead(db: Kysely<Database>, publish: (head: number) => Promise<void>): Promise<void> {
  await db.transaction().execute(async (trx) => {
    await sql`select pg_advisory_xact_lock(${APPEND_LOCK})`.execute(trx);
    // A statement of its own: its snapshot is taken after the lock is held.
    const { rows } = await sql<{
      head: string | number;
    }>`select value as head from counters where name = 'events.last_position'`.execute(trx);
    await publish(Number(rows[0]?.head ?? 0));
  });
}
