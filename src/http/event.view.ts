import type { RecordedEvent } from '../events/store/task.queries.js';

/** An event as the API shows it, in the feed and in a task's history. */
export interface EventView {
  position: number;
  task_id: number;
  version: number;
  type: string;
  data: Record<string, unknown>;
  metadata: Record<string, unknown>;
  recorded_at: string;
}

export function viewEvent(event: RecordedEvent): EventView {
  return {
    position: event.position,
    task_id: event.streamId,
    version: event.version,
    type: event.type,
    data: event.data,
    metadata: event.metadata,
    recorded_at: event.recordedAt.toISOString(),
  };
}
