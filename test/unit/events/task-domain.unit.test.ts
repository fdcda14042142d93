import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { decide } from '../../../src/events/domain/decide.js';
import { evolve } from '../../../src/events/domain/evolve.js';
import type { Actor, TaskCommand, TaskEvent, TaskState } from '../../../src/events/domain/task.events.js';
import { AppError } from '../../../src/base/errors.js';
import { parseTaskInput } from '../../../src/api/tasks/task.input.js';

const alice: Actor = { userId: 1, username: 'alice' };
const bob: Actor = { userId: 2, username: 'bob' };
const t0 = new Date('2026-01-01T00:00:00Z');
const t1 = new Date('2026-01-01T00:01:00Z');

/** Given a task alice created (version 1), open. */
function givenTask(overrides: Partial<TaskState> = {}): TaskState {
  return {
    id: 7,
    title: 'Write tests',
    description: '',
    completed: false,
    ownerId: 1,
    owner: 'alice',
    createdAt: t0,
    updatedAt: t0,
    version: 1,
    ...overrides,
  };
}

const change = (
  fields: TaskCommand & { type: 'ChangeTask' } extends { fields: infer F } ? F : never,
  actor = alice,
  expectedVersion?: number,
): TaskCommand => ({
  type: 'ChangeTask',
  actor,
  taskId: 7,
  fields,
  expectedVersion,
});

/** Folds events the way the store does: version n+1 for the n-th event after `state`. */
function fold(state: TaskState | null, events: TaskEvent[], at = t1): TaskState | null {
  return events.reduce<TaskState | null>(
    (s, e) => evolve(s, e, { streamId: 7, version: (s?.version ?? 0) + 1, recordedAt: at }),
    state,
  );
}

const Decide = suite('decide: which events a command produces');

Decide('given no task, when alice creates one, then TaskCreated carries the fields and the owner', () => {
  const outcome = decide(
    { type: 'CreateTask', actor: alice, fields: { title: 'A', description: 'd', completed: false } },
    null,
  );
  assert.equal(outcome, {
    ok: true,
    events: [
      { type: 'TaskCreated', data: { title: 'A', description: 'd', completed: false, owner_id: 1, owner: 'alice' } },
    ],
  });
});

Decide('given no task, when a change or delete arrives, then it is not_found', () => {
  assert.equal(decide(change({ title: 'x' }), null), { ok: false, error: 'not_found' });
  assert.equal(decide({ type: 'DeleteTask', actor: alice, taskId: 7 }, null), { ok: false, error: 'not_found' });
});

Decide("given alice's task, when bob changes or deletes it, then it is forbidden (before any version check)", () => {
  assert.equal(decide(change({ title: 'x' }, bob, 99), givenTask()), { ok: false, error: 'forbidden' });
  assert.equal(decide({ type: 'DeleteTask', actor: bob, taskId: 7 }, givenTask()), { ok: false, error: 'forbidden' });
});

Decide('given version 3, when a command expects version 2, then it is a version conflict naming 3', () => {
  const task = givenTask({ version: 3 });
  assert.equal(decide(change({ title: 'x' }, alice, 2), task), {
    ok: false,
    error: 'version_conflict',
    currentVersion: 3,
  });
  assert.equal(decide({ type: 'DeleteTask', actor: alice, taskId: 7, expectedVersion: 2 }, task), {
    ok: false,
    error: 'version_conflict',
    currentVersion: 3,
  });
});

Decide('given version 3, when a command expects version 3 (or none), then it proceeds', () => {
  const task = givenTask({ version: 3 });
  assert.equal(decide(change({ title: 'New' }, alice, 3), task), {
    ok: true,
    events: [{ type: 'TaskDetailsChanged', data: { title: 'New' } }],
  });
  assert.equal(decide({ type: 'DeleteTask', actor: alice, taskId: 7 }, task), {
    ok: true,
    events: [{ type: 'TaskDeleted', data: {} }],
  });
});

Decide(
  'given an open task, when title, description and completed change at once, then one details event and TaskCompleted',
  () => {
    const outcome = decide(change({ title: 'T2', description: 'D2', completed: true }), givenTask());
    assert.equal(outcome, {
      ok: true,
      events: [
        { type: 'TaskDetailsChanged', data: { title: 'T2', description: 'D2' } },
        { type: 'TaskCompleted', data: {} },
      ],
    });
  },
);

Decide('given a completed task, when completed=false arrives, then TaskReopened', () => {
  assert.equal(decide(change({ completed: false }), givenTask({ completed: true })), {
    ok: true,
    events: [{ type: 'TaskReopened', data: {} }],
  });
});

Decide('given a task, when the same values arrive again, then no events (nothing to record)', () => {
  const task = givenTask({ description: 'same', completed: true });
  assert.equal(decide(change({ title: 'Write tests', description: 'same', completed: true }), task), {
    ok: true,
    events: [],
  });
  assert.equal(decide(change({}), task), { ok: true, events: [] });
});

const Evolve = suite('evolve: what a task looks like after its events');

Evolve('TaskCreated gives version 1 with the owner and equal created/updated times', () => {
  const created: TaskEvent = {
    type: 'TaskCreated',
    data: { title: 'A', description: '', completed: false, owner_id: 2, owner: 'bob' },
  };
  assert.equal(evolve(null, created, { streamId: 5, version: 1, recordedAt: t0 }), {
    id: 5,
    title: 'A',
    description: '',
    completed: false,
    ownerId: 2,
    owner: 'bob',
    createdAt: t0,
    updatedAt: t0,
    version: 1,
  });
});

Evolve('details, complete and reopen bump the version and updated_at, never created_at or owner', () => {
  const after = fold(givenTask(), [
    { type: 'TaskDetailsChanged', data: { description: 'more' } },
    { type: 'TaskCompleted', data: {} },
  ]);
  assert.equal(after, givenTask({ description: 'more', completed: true, version: 3, updatedAt: t1 }));
  assert.equal(
    fold(after, [{ type: 'TaskReopened', data: {} }]),
    givenTask({ description: 'more', completed: false, version: 4, updatedAt: t1 }),
  );
});

Evolve('a partial details event changes only the fields it names', () => {
  const after = fold(givenTask({ description: 'keep' }), [
    { type: 'TaskDetailsChanged', data: { title: 'Only title' } },
  ]);
  assert.is(after?.title, 'Only title');
  assert.is(after?.description, 'keep');
});

Evolve('TaskDeleted leaves nothing, and later events on nothing stay nothing', () => {
  assert.is(fold(givenTask(), [{ type: 'TaskDeleted', data: {} }]), null);
  assert.is(evolve(null, { type: 'TaskCompleted', data: {} }, { streamId: 7, version: 3, recordedAt: t1 }), null);
});

Evolve('decide then evolve: the decided events applied give the requested state', () => {
  const task = givenTask();
  const wanted = { title: 'Renamed', description: 'why', completed: true };
  const decision = decide(change(wanted, alice, 1), task);
  assert.ok(decision.ok);
  const after = fold(task, decision.ok ? decision.events : []);
  assert.equal({ title: after?.title, description: after?.description, completed: after?.completed }, wanted);
  assert.is(after?.version, 1 + (decision.ok ? decision.events.length : 0));
});

const Validate = suite('task input: DRF field rules and texts');

function rejection(body: unknown, partial = false): unknown {
  try {
    parseTaskInput(body, partial);
  } catch (error) {
    assert.instance(error, AppError);
    assert.is((error as AppError).status, 400);
    return (error as AppError).body;
  }
  assert.unreachable(`accepted ${JSON.stringify(body)}`);
}

Validate('given a create without title, then "This field is required."', () => {
  assert.equal(rejection({}), { title: ['This field is required.'] });
  assert.equal(rejection({ description: 'x' }), { title: ['This field is required.'] });
});

Validate('given blank, whitespace-only or null titles, then blank / null texts', () => {
  assert.equal(rejection({ title: '' }), { title: ['This field may not be blank.'] });
  assert.equal(rejection({ title: '   ' }), { title: ['This field may not be blank.'] });
  assert.equal(rejection({ title: null }), { title: ['This field may not be null.'] });
});

Validate('given 200 characters the title is accepted; 201 is refused with the limit', () => {
  assert.is(parseTaskInput({ title: 'x'.repeat(200) }, false).title, 'x'.repeat(200));
  assert.is(parseTaskInput({ title: '😀'.repeat(200) }, false).title, '😀'.repeat(200));
  assert.equal(rejection({ title: 'x'.repeat(201) }), {
    title: ['Ensure this field has no more than 200 characters.'],
  });
});

Validate('given a number title, then it is coerced to a string; objects and booleans are not strings', () => {
  assert.is(parseTaskInput({ title: 123 }, false).title, '123');
  assert.equal(rejection({ title: { a: 1 } }), { title: ['Not a valid string.'] });
  assert.equal(rejection({ title: true }), { title: ['Not a valid string.'] });
});

Validate('given a title with a NUL character, then DRF refuses it ("Null characters are not allowed.")', () => {
  assert.equal(rejection({ title: 'a\u0000b' }), { title: ['Null characters are not allowed.'] });
  assert.equal(rejection({ title: 'ok', description: '\u0000' }), {
    description: ['Null characters are not allowed.'],
  });
});

Validate('given id and unknown fields, then they are ignored and defaults fill the rest', () => {
  assert.equal(parseTaskInput({ id: 999, title: ' Trim me ', extra: 1 }, false), {
    title: 'Trim me',
    description: '',
    completed: false,
  });
});

Validate('given a list or a string body, then non_field_errors says what it got', () => {
  assert.equal(rejection([]), { non_field_errors: ['Invalid data. Expected a dictionary, but got list.'] });
  assert.equal(rejection('x'), { non_field_errors: ['Invalid data. Expected a dictionary, but got str.'] });
  assert.equal(rejection(null), { non_field_errors: ['No data provided'] }, 'as DRF answers a JSON null');
});

Validate('given a partial update, then only the given fields come back and nothing is required', () => {
  assert.equal(parseTaskInput({}, true), {});
  assert.equal(parseTaskInput({ completed: 'true' }, true), { completed: true });
  assert.equal(rejection({ completed: 'maybe' }, true), { completed: ['Must be a valid boolean.'] });
  assert.equal(rejection({ title: '' }, true), { title: ['This field may not be blank.'] });
});

Validate('given several bad fields, then every one is reported at once', () => {
  assert.equal(rejection({ title: '', completed: 'x', description: null }), {
    title: ['This field may not be blank.'],
    description: ['This field may not be null.'],
    completed: ['Must be a valid boolean.'],
  });
});

Decide.run();
Evolve.run();
Validate.run();
