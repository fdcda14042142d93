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
