import type { Selectable } from 'kysely';
import type { TasksTable } from '../../../db/database.js';
import type { TaskState } from '../domain/task.events.js';

export function rowToTask(row: Selectable<TasksTable>): TaskState {
  return {
    id: row.id,
    title: row.title,
    description: row.description,
    completed: row.completed,
    ownerId: row.owner_id,
    owner: row.owner,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    version: row.version,
  };
}

/**
 * A task read back from the JSON an idempotency record keeps of it (`JSON.stringify` of a
 * TaskState: dates as ISO strings, which keep their milliseconds). Throws on anything else.
 */
export function taskFromJson(json: unknown): TaskState {
  const t = (typeof json === 'object' && json !== null ? json : {}) as Record<string, unknown>;
  const { id, title, description, completed, ownerId, owner, createdAt, updatedAt, version } = t;
  if (
    typeof id !== 'number' ||
    typeof title !== 'string' ||
    typeof description !== 'string' ||
    typeof completed !== 'boolean' ||
    typeof ownerId !== 'number' ||
    typeof owner !== 'string' ||
    typeof createdAt !== 'string' ||
    typeof updatedAt !== 'string' ||
    typeof version !== 'number'
  )
    throw new Error('an idempotency record holds something other than a task');
  return {
    id,
    title,
    description,
    completed,
    ownerId,
    owner,
    createdAt: new Date(createdAt),
    updatedAt: new Date(updatedAt),
    version,
  };
}

export function taskToRow(task: TaskState): Selectable<TasksTable> {
  return {
    id: task.id,
    title: task.title,
    description: task.description,
    completed: task.completed,
    owner_id: task.ownerId,
    owner: task.owner,
    created_at: task.createdAt,
    updated_at: task.updatedAt,
    version: task.version,
  };
}
