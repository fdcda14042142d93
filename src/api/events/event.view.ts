import type { RecordedEvent, StreamFacts } from '../../events/store/task.queries.js';

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

/**
 * How much of an event a reader sees (docs/security.md "Who can see what"):
 * - `owner`, the task's owner: all of it;
 * - `public`, anyone else, anonymous or not: what the task itself shows. Ids of people
 *   (`owner_id`, any `*_id` in the data) and of requests are left out; of the metadata only
 *   `actor` is kept, the name the task shows as its `owner` (only the owner changes a task);
 * - `redacted`, anyone else once the task is deleted (the feed): that the event happened, with
 *   empty `data` and `metadata`.
 */
export type Audience = 'owner' | 'public' | 'redacted';

/** The audience of `viewer` (a user id; undefined: anonymous) for a stream with `facts`. */
export function audienceOf(facts: StreamFacts | undefined, viewer: number | undefined): Audience {
  if (facts && viewer !== undefined && facts.ownerId === viewer) return 'owner';
  return facts?.deleted === false ? 'public' : 'redacted';
}

/** Metadata keys anyone may see. Anything else recorded there (actor_id, request_id, …) only the owner does. */
const PUBLIC_METADATA: readonly string[] = ['actor'];

export function viewEvent(event: RecordedEvent, audience: Audience): EventView {
  return {
    position: event.position,
    task_id: event.streamId,
    version: event.version,
    type: event.type,
    data: audience === 'owner' ? event.data : audience === 'public' ? publicData(event.data) : {},
    metadata:
      audience === 'owner' ? event.metadata : audience === 'public' ? pick(event.metadata, PUBLIC_METADATA) : {},
    recorded_at: event.recordedAt.toISOString(),
  };
}

function publicData(data: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(data).filter(([key]) => !key.endsWith('_id')));
}

function pick(from: Record<string, unknown>, keys: readonly string[]): Record<string, unknown> {
  return Object.fromEntries(keys.filter((key) => Object.hasOwn(from, key)).map((key) => [key, from[key]]));
}
