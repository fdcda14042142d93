import type { Kysely } from 'kysely';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { connectDatabase } from '../../../db/connect.js';
import type { Database } from '../../../db/database.js';
import { appendBatch } from '../../../src/events/store/append-batch.js';
import type { TaskCommand } from '../../../src/events/domain/task.events.js';
import { startTestApp, type TestApp } from '../../helpers/app.js';
import { request } from '../../helpers/http.js';

let app: TestApp;
let token: string;

interface FeedBody {
  next: string;
  results: Array<{
    position: number;
    task_id: number;
    version: number;
    type: string;
    data: Record<string, unknown>;
    recorded_at: string;
  }>;
}

const feed = (path: string) => request<FeedBody>(app.base, 'GET', path, { token });

/**
 * Appends on its own pool, as another process would: `rounds` transactions of a few commands
 * each (creations, then changes and deletions of its own tasks), racing the other writers for the
 * append lock.
 */
async function write(db: Kysely<Database>, userId: number, rounds: number): Promise<void> {
  const actor = { userId, username: 'alice' };
  const mine: number[] = [];
  for (let round = 0; round < rounds; round += 1) {
    const commands: TaskCommand[] = [
      { type: 'CreateTask', actor, fields: { title: `t${round}`, description: '', completed: round % 3 === 0 } },
      { type: 'CreateTask', actor, fields: { title: `u${round}`, description: '', completed: false } },
    ];
    if (mine.length > 0)
      commands.push({
        type: 'ChangeTask',
        actor,
        taskId: mine[round % mine.length]!,
        fields: { completed: round % 2 === 0, title: `v${round}` },
      });
    if (mine.length > 4 && round % 5 === 0) commands.push({ type: 'DeleteTask', actor, taskId: mine.shift()! });
    for (const outcome of await appendBatch(db, commands))
      if (outcome.ok && outcome.task && outcome.events[0]?.type === 'TaskCreated') mine.push(outcome.task.id);
  }
}

const Follow = suite('following the feed while others write');

Follow.before(async () => {
  app = await startTestApp({ MAX_PAGE_SIZE: '50' }, 'feed');
  token = await app.login('alice');
});
Follow.after(() => app.close());

Follow(
  'a consumer that follows next from 0 sees every event once, in order, with no gap, while 4 writers race',
  async () => {
    const userId = (
      await app.deps.db.selectFrom('users').select('id').where('username', '=', 'alice').executeTakeFirstOrThrow()
    ).id;
    const pools = Array.from({ length: 4 }, () => connectDatabase(app.databaseUrl, 2, 'feed-writer'));
    let writing = true;
    const writers = Promise.all(pools.map((db) => write(db, userId, 60))).finally(() => (writing = false));

    const seen: number[] = [];
    let url = `${app.base}/api/events/?after=0&limit=7`;
    let emptyPolls = 0;
    for (let polls = 0; polls < 5_000 && (writing || emptyPolls < 2); polls += 1) {
      const page = await feed(url);
      assert.is(page.status, 200, page.text);
      assert.ok(page.body.next, 'next is always present');
      for (const event of page.body.results) {
        assert.is(
          event.position,
          (seen.at(-1) ?? 0) + 1,
          `event after ${seen.at(-1) ?? 0} must be the next position (no gap, no repeat)`,
        );
        seen.push(event.position);
      }
      emptyPolls = page.body.results.length === 0 && !writing ? emptyPolls + 1 : 0;
      url = page.body.next;
    }
    await writers;
    await Promise.all(pools.map((db) => db.destroy()));

    const stored = await app.deps.db.selectFrom('events').select('position').orderBy('position').execute();
    assert.ok(stored.length > 600, `expected a busy log, got ${stored.length} events`);
    assert.equal(
      seen,
      stored.map((e) => e.position),
      'the consumer saw exactly the stored log',
    );
    const counter = await app.deps.db
      .selectFrom('counters')
      .select('value')
      .where('name', '=', 'events.last_position')
      .executeTakeFirstOrThrow();
    assert.is(counter.value, stored.length);
  },
);

Follow('at the end, next points at the same position so a consumer can keep polling', async () => {
  const total = (
    await app.deps.db
      .selectFrom('events')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow()
  ).n;
  const end = await feed(`/api/events/?after=${total}&limit=5`);
  assert.is(end.status, 200);
  assert.equal(end.body.results, []);
  assert.is(end.body.next, `${app.base}/api/events/?after=${total}&limit=5`);

  const created = await request(app.base, 'POST', '/api/tasks/', { token, body: { title: 'After the end' } });
  const more = await feed(end.body.next);
  assert.is(more.body.results.length, 1);
  const event = more.body.results[0]!;
  assert.is(event.position, total + 1);
  assert.is(event.task_id, created.body.id);
  assert.is(event.version, 1);
  assert.is(event.type, 'TaskCreated');
  assert.is(event.data.title, 'After the end');
  assert.is(event.data.owner, 'alice');
  assert.is(more.body.next, `${app.base}/api/events/?after=${total + 1}&limit=5`);
});

const Params = suite('feed parameters and access');

Params.before(async () => {
  app = await startTestApp({ MAX_PAGE_SIZE: '50' }, 'feed-params');
  token = await app.login('alice');
  for (let i = 0; i < 3; i += 1) await request(app.base, 'POST', '/api/tasks/', { token, body: { title: `t${i}` } });
});
Params.after(() => app.close());

Params('defaults: after=0 and the page size; other query parameters are kept in next', async () => {
  const page = await feed('/api/events/?foo=bar');
  assert.equal(
    page.body.results.map((e) => e.position),
    [1, 2, 3],
  );
  assert.is(page.body.next, `${app.base}/api/events/?after=3&foo=bar&limit=10`);
});

Params('limit is clamped to MAX_PAGE_SIZE', async () => {
  const page = await feed('/api/events/?limit=1000');
  assert.is(new URL(page.body.next).searchParams.get('limit'), '50');
});

Params('a malformed after or limit is a 400 that names it', async () => {
  for (const [query, name] of [
    ['after=-1', 'after'],
    ['after=abc', 'after'],
    ['after=1.5', 'after'],
    ['limit=0', 'limit'],
    ['limit=x', 'limit'],
  ] as const) {
    const response = await feed(`/api/events/?${query}`);
    assert.is(response.status, 400, query);
    assert.ok((response.body as unknown as { detail: string }).detail.includes(`"${name}"`), response.text);
  }
});

Params('the feed is for authenticated clients', async () => {
  const anonymous = await request(app.base, 'GET', '/api/events/');
  assert.is(anonymous.status, 401);
  assert.is(anonymous.body.detail, 'Authentication credentials were not provided.');
});

Follow.run();
Params.run();
