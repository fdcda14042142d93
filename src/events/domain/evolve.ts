import type { TaskEvent, TaskState } from './task.events.js';

/**
 * Applies one event to a task's state. Pure; the live append path and `npm run rebuild` both use
 * it, which is why a rebuilt projection equals the live one.
 */
export function evolve(
  state: TaskState | null,
  event: TaskEvent,
  at: { streamId: number; version: number; recordedAt: Date },
): TaskState | null {
  if (event.type === 'TaskCreated') {
    const { title, description, completed, owner_id, owner } = event.data;
    return {
      id: at.streamId,
      title,
      description,
      completed,
      ownerId: owner_id,
      owner,
      createdAt: at.recordedAt,
      updatedAt: at.recordedAt,
      version: at.version,
    };
  }
  if (state === null) return null;
  const touched = { ...state, updatedAt: at.recordedAt, version: at.version };
  switch (event.type) {
    case 'TaskDetailsChanged':
      return { ...touched, ...event.data };
    case 'TaskCompleted':
      return { ...touched, completed: true };
    case 'TaskReopened':
      return { ...touched, completed: false };
    case 'TaskDeleted':
      return null;
  }
}
