import type { IdempotencyClaim, Replay } from '../../idempotency/idempotency.js';

/** The facts a task stream records, in the past tense. `data` is what `evolve` needs and no more. */
export type TaskEvent =
  | {
      type: 'TaskCreated';
      data: { title: string; description: string; completed: boolean; owner_id: number; owner: string };
    }
  | { type: 'TaskDetailsChanged'; data: { title?: string; description?: string } }
  | { type: 'TaskCompleted'; data: Record<string, never> }
  | { type: 'TaskReopened'; data: Record<string, never> }
  | { type: 'TaskDeleted'; data: Record<string, never> };

/** An event as stored: its global position, its stream (task id) and version within the stream. */
export type StoredEvent = TaskEvent & {
  position: number;
  streamId: number;
  version: number;
  metadata: EventMetadata;
  recordedAt: Date;
};

export interface EventMetadata {
  actor: string;
  actor_id: number;
  request_id?: string;
}

/** A task as its events leave it. */
export interface TaskState {
  id: number;
  title: string;
  description: string;
  completed: boolean;
  ownerId: number;
  owner: string;
  createdAt: Date;
  updatedAt: Date;
  version: number;
}

/** The editable fields of a task. */
export interface TaskFields {
  title: string;
  description: string;
  completed: boolean;
}

export interface Actor {
  userId: number;
  username: string;
  requestId?: string;
}

/** The version(s) a conditional command accepts (an `If-Match` list may name several). */
export type ExpectedVersion = number | readonly number[];

/** The version(s) a conditional command refuses (an `If-None-Match` list; `'*'`: every one). */
export type ExcludedVersion = readonly number[] | '*';

export type TaskCommand =
  | {
      type: 'CreateTask';
      actor: Actor;
      fields: TaskFields;
      /** Kept with the created task in the create's transaction; a repeat replays that task. */
      idempotency?: IdempotencyClaim;
    }
  | {
      type: 'ChangeTask';
      actor: Actor;
      taskId: number;
      fields: Partial<TaskFields>;
      expectedVersion?: ExpectedVersion;
      excludedVersion?: ExcludedVersion;
    }
  | {
      type: 'DeleteTask';
      actor: Actor;
      taskId: number;
      expectedVersion?: ExpectedVersion;
      excludedVersion?: ExcludedVersion;
    };

export type Rejection =
  | { ok: false; error: 'not_found' }
  | { ok: false; error: 'forbidden' }
  | { ok: false; error: 'version_conflict'; currentVersion: number }
  | { ok: false; error: 'idempotency_mismatch' };

/**
 * What running a command gave: the task after it (null once deleted) and the events appended; or,
 * for a repeated create, the task as the first one created it (or an older record's rendered answer).
 */
export type CommandOutcome =
  | { ok: true; task: TaskState | null; events: StoredEvent[]; replayed?: undefined }
  | { ok: true; replayed: Replay<TaskState>; task?: undefined; events?: undefined }
  | Rejection;
