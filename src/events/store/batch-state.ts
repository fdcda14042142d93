import type { Transaction } from 'kysely';
import type { Database } from '../../../db/database.js';
import { loadClaims, type IdempotencyRecord } from '../../idempotency/idempotency.js';
import type { TaskCommand, TaskState } from '../domain/task.events.js';
import { rowToTask } from './task.rows.js';

export interface Counters {
  taskCount: number;
  lastTaskId: number;
  lastPosition: number;
}

/** What a batch reads once, under the append lock, before deciding its commands. */
export interface BatchState {
  counters: Readonly<Counters>;
  tasks: Map<number, TaskState | null>;
  /** Records of the batch's keys, their tasks as JSON (as stored). */
  idempotency: Map<string, IdempotencyRecord>;
}

export const COUNTER_NAMES = {
  taskCount: 'tasks.count',
  lastTaskId: 'tasks.last_id',
  lastPosition: 'events.last_position',
} as const;

export async function loadBatchState(
  trx: Transaction<Database>,
  commands: readonly TaskCommand[],
): Promise<BatchState> {
  const taskIds = [...new Set(commands.flatMap((c) => (c.type === 'CreateTask' ? [] : [c.taskId])))];
  const claims = commands.flatMap((c) =>
    c.type === 'CreateTask' && c.idempotency ? [{ userId: c.actor.userId, key: c.idempotency.key }] : [],
  );

  const [counterRows, taskRows, idempotency] = await Promise.all([
    trx.selectFrom('counters').select(['name', 'value']).execute(),
    taskIds.length === 0 ? [] : trx.selectFrom('tasks').selectAll().where('id', 'in', taskIds).execute(),
    loadClaims(trx, claims),
  ]);

  const counterValue = (name: string) => counterRows.find((r) => r.name === name)?.value ?? 0;
  const tasks = new Map<number, TaskState | null>(taskIds.map((id) => [id, null]));
  for (const row of taskRows) tasks.set(row.id, rowToTask(row));
  return {
    counters: {
      taskCount: counterValue(COUNTER_NAMES.taskCount),
      lastTaskId: counterValue(COUNTER_NAMES.lastTaskId),
      lastPosition: counterValue(COUNTER_NAMES.lastPosition),
    },
    tasks,
    idempotency,
  };
}
