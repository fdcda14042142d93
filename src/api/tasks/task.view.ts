import type { TaskState } from '../../events/domain/task.events.js';

/** The task as the API shows it. */
export interface TaskResource {
  id: number;
  title: string;
  description: string;
  completed: boolean;
  owner: string;
  created_at: string;
  updated_at: string;
  version: number;
}

export function viewTask(task: TaskState): TaskResource {
  return {
    id: task.id,
    title: task.title,
    description: task.description,
    completed: task.completed,
    owner: task.owner,
    created_at: task.createdAt.toISOString(),
    updated_at: task.updatedAt.toISOString(),
    version: task.version,
  };
}

/** The path of a task's detail resource. */
export function taskPath(id: number): string {
  return `/api/tasks/${id}/`;
}
