import { sql, type RawBuilder } from 'kysely';

/**
 * What one event means for task counts: the task's owner and how it moves the owner's open and
 * completed live tasks (+1, 0 or −1 each). Created: +1 open, or +1 completed when created done;
 * Completed: open → completed; Reopened: completed → open; Deleted: −1 from whichever the task
 * was in; DetailsChanged: nothing. `decide` emits Completed/Reopened only on a real change, so the
 * deltas never need the state before the event, except for a deletion.
 */
export interface EventFact {
  position: number;
  type: string;
  recorded_at: Date;
  owner: string;
  open_delta: number;
  completed_delta: number;
}

/**
 * The facts of the events with `after` < position ≤ `upTo`, as a SQL subquery with the columns of
 * `EventFact`. The owner is in a TaskCreated event, and otherwise comes from its stream's first
 * event (version 1); for a deletion, the task's completion comes from the latest event of its
 * stream that set it. Both are correlated index lookups on (stream_id, version), written so that
 * they stay per-row lookups: as a join, the planner would rather scan the whole log per batch.
 */
export function eventFacts(after: number, upTo: number): RawBuilder<EventFact> {
  return sql<EventFact>`
    select e.position, e.type, e.recorded_at,
      case when e.type = 'TaskCreated' then e.data->>'owner'
        else (select o.data->>'owner' from events o where o.stream_id = e.stream_id and o.version = 1) end as owner,
      case e.type
        when 'TaskCreated' then case when (e.data->>'completed')::boolean then 0 else 1 end
        when 'TaskCompleted' then -1
        when 'TaskReopened' then 1
        when 'TaskDeleted' then case when d.was_completed then 0 else -1 end
        else 0 end as open_delta,
      case e.type
        when 'TaskCreated' then case when (e.data->>'completed')::boolean then 1 else 0 end
        when 'TaskCompleted' then 1
        when 'TaskReopened' then -1
        when 'TaskDeleted' then case when d.was_completed then -1 else 0 end
        else 0 end as completed_delta
    from events e
    left join lateral (
      select case p.type when 'TaskCompleted' then true when 'TaskReopened' then false
             else coalesce((p.data->>'completed')::boolean, false) end as was_completed
      from events p
      where e.type = 'TaskDeleted' and p.stream_id = e.stream_id and p.version < e.version
        and p.type in ('TaskCreated', 'TaskCompleted', 'TaskReopened')
      order by p.version desc
      limit 1
    ) d on true
    where e.position > ${after} and e.position <= ${upTo}`;
}
