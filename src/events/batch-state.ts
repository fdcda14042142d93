import type { Transaction } from 'kysely';
import type { Database } from '../../db/database.js';
import type { TaskCommand, TaskState } from './task.events.js';
import { rowToTask } from './task.rows.js';

export interface Counters {
  taskCount: number;
  lastTaskId: number;
  lastPosition: number;
}

export interface IdempotencyRecord {
  requestHash: string;
  status: number;
  body: unknown;
  resourcePath: string | null;
}

/** What a batch reads once, under the append lock, before deciding its commands. */
export interface BatchState {
  counters: Readonly<Counters>;
  tasks: Map<number, TaskState | null>;
  idempotency: Map<string, IdempotencyRecord>;
}

export const COUNTER_NAMES = { taskCount: 'tasks.count', lastTaskId: 'tasks.last_id', lastPosition: 'events.last_position' } as const;

export async function loadBatchState(trx: Transaction<Database>, commands: readonly TaskCommand[], idempotentSince: Date): Promise<BatchState> {
  const taskIds = [...new Set(commands.flatMap((c) => (c.type === 'CreateTask' ? [] : [c.taskId])))];
  const claims = commands.flatMap((c) => (c.type === 'CreateTask' && c.idempotency ? [{ userId: c.actor.userId, key: c.idempotency.key }] : []));

  const [counterRows, taskRows, claimRows] = await Promise.all([
    trx.selectFrom('counters').select(['name', 'value']).execute(),
    taskIds.length === 0 ? [] : trx.selectFrom('tasks').selectAll().where('id', 'in', taskIds).execute(),
    claims.length === 0
      ? []
      : trx
          .selectFrom('idempotency_keys')
          .selectAll()
          .where('created_at', '>', idempotentSince)
          .where((eb) => eb.or(claims.map((c) => eb.and([eb('user_id', '=', c.userId), eb('key', '=', c.key)]))))
          .execute(),
  ]);

  const counterValue = (name: string) => counterRows.find((r) => r.name === name)?.value ?? 0;
  const tasks = new Map<number, TaskState | null>(taskIds.map((id) => [id, null]));
  for (const row of taskRows) tasks.set(row.id, rowToTask(row));
  const idempotency = new Map<string, IdempotencyRecord>();
  for (const row of claimRows) {
    idempotency.set(`${row.user_id}:${row.key}`, { requestHash: row.request_hash, status: row.status, body: row.body, resourcePath: row.resource_path });
  }
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
