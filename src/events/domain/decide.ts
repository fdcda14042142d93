import type { ExcludedVersion, ExpectedVersion, Rejection, TaskCommand, TaskEvent, TaskState } from './task.events.js';

/**
 * Decides which events a command produces against the current state of its task (null when the
 * task does not exist). Pure: no I/O, no clock. The order of checks is the order of the HTTP
 * answers: unknown task (404), not the owner (403), stale version (412).
 */
export function decide(command: TaskCommand, state: TaskState | null): { ok: true; events: TaskEvent[] } | Rejection {
  if (command.type === 'CreateTask') {
    const { fields, actor } = command;
    return {
      ok: true,
      events: [{ type: 'TaskCreated', data: { ...fields, owner_id: actor.userId, owner: actor.username } }],
    };
  }
  if (state === null) return { ok: false, error: 'not_found' };
  if (state.ownerId !== command.actor.userId) return { ok: false, error: 'forbidden' };
  if (!accepts(command.expectedVersion, state.version) || excludes(command.excludedVersion, state.version)) {
    return { ok: false, error: 'version_conflict', currentVersion: state.version };
  }
  if (command.type === 'DeleteTask') return { ok: true, events: [{ type: 'TaskDeleted', data: {} }] };
  return { ok: true, events: decideChanges(command.fields, state) };
}

function decideChanges(fields: Partial<TaskState>, state: TaskState): TaskEvent[] {
  const events: TaskEvent[] = [];
  const details: { title?: string; description?: string } = {};
  if (fields.title !== undefined && fields.title !== state.title) details.title = fields.title;
  if (fields.description !== undefined && fields.description !== state.description)
    details.description = fields.description;
  if (Object.keys(details).length > 0) events.push({ type: 'TaskDetailsChanged', data: details });
  if (fields.completed === true && !state.completed) events.push({ type: 'TaskCompleted', data: {} });
  if (fields.completed === false && state.completed) events.push({ type: 'TaskReopened', data: {} });
  return events;
}

function excludes(excluded: ExcludedVersion | undefined, version: number): boolean {
  return excluded === '*' || (excluded?.includes(version) ?? false);
}

function accepts(expected: ExpectedVersion | undefined, version: number): boolean {
  if (expected === undefined) return true;
  return typeof expected === 'number' ? expected === version : expected.includes(version);
}
