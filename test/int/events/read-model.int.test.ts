import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { readFeed } from '../../../src/events/store/feed.js';
import { applyEvents } from '../../../src/events/projections/read-model.js';
import { ReadModelFollower } from '../../../workers/read-model.follower.js';
import { startTestApp, type TestApp } from '../../helpers/app.js';
import { request } from '../../helpers/http.js';

let app: TestApp;
const tokens: Record<string, string> = {};

type Counts = Array<{ owner: string; open: number; completed: number }>;

/** What the counts must be: live tasks per owner, from the tasks projection. */
async function truth(): Promise<Counts> {
  const { rows } = await sql<Counts[number]>`
    select owner, count(*) filter (where not completed)::int as open, count(*) filter (where completed)::int as completed
    from tasks group by owner order by owner`.execute(app.deps.db);
  return rows;
}

const stats = async () => (await request(app.base, 'GET', '/api/tasks/stats/', { token: tokens.alice })).body;

async function converged(): Promise<{ results: Counts; as_of_position: number; last_position: number }> {
  for (let i = 0; i < 200; i += 1) {
    const body = await stats();
    if (body.as_of_position === body.last_position) return body;
    await sleep(50);
  }
  throw new Error('the read model did not catch up');
}

/** A round of writes by every user: creations, completions, a reopening, deletions of open and completed tasks. */
async function writeRound(round: number): Promise<void> {
  await Promise.all(
    Object.entries(tokens).map(async ([name, token]) => {
      const ids: number[] = [];
      for (let i = 0; i < 5; i += 1) {
        const created = await request(app.base, 'POST', '/api/tasks/', {
          token,
          body: { title: `${name} ${round}.${i}`, completed: i === 4 },
        });
        ids.push(created.body.id);
      }
      const patch = (id: number, body: object) => request(app.base, 'PATCH', `/api/tasks/${id}/`, { token, body });
      await patch(ids[0]!, { completed: true });
      await patch(ids[1]!, { completed: true });
      await patch(ids[1]!, { completed: false });
      await patch(ids[2]!, { title: 'renamed' });
      await request(app.base, 'DELETE', `/api/tasks/${ids[3]!}/`, { token });
      await request(app.base, 'DELETE', `/api/tasks/${ids[0]!}/`, { token });
    }),
  );
}

const Follow = suite('the per-owner counts read model');

Follow.before(async () => {
  app = await startTestApp({ READ_MODEL_POLL_MS: '20', READ_MODEL_BATCH: '7' }, 'read-model');
  for (const name of ['alice', 'bob', 'carol']) tokens[name] = await app.login(name);
});
Follow.after(() => app.close());

Follow('a follower stopped while others write catches up on restart and matches the truth', async () => {
  let follower = new ReadModelFollower(app.deps).start();
  await writeRound(1);
  assert.equal((await converged()).results, await truth());
  await follower.close();

  await writeRound(2);
  const behind = await stats();
  assert.ok(behind.as_of_position < behind.last_position, 'stopped: the counts lag the log');
  assert.not.equal(behind.results, await truth());

  // Two followers at once, as with two jobs children: still every event counted once.
  follower = new ReadModelFollower(app.deps).start();
  const second = new ReadModelFollower(app.deps).start();
  await writeRound(3);
  const caughtUp = await converged();
  await Promise.all([follower.close(), second.close()]);
  assert.equal(caughtUp.results, await truth());
  assert.is(caughtUp.results.length, 3);
});

Follow('redelivered events change nothing; a batch past a gap is not applied', async () => {
  const before = await stats();
  const all = await readFeed(app.deps.db, { after: 0, limit: 100_000 });
  assert.equal(await applyEvents(app.deps.db, all), { applied: 0, checkpoint: before.as_of_position });
  assert.equal(await applyEvents(app.deps.db, all.slice(5, 9)), { applied: 0, checkpoint: before.as_of_position });

  await request(app.base, 'POST', '/api/tasks/', { token: tokens.carol, body: { title: 'one more' } });
  await request(app.base, 'POST', '/api/tasks/', { token: tokens.carol, body: { title: 'and another' } });
  const fresh = await readFeed(app.deps.db, { after: before.as_of_position, limit: 10 });
  assert.equal(
    await applyEvents(app.deps.db, fresh.slice(1)),
    { applied: 0, checkpoint: before.as_of_position },
    'a gap: nothing applied',
  );

  // The same delivery raced by three appliers, with an old event mixed in: one effect.
  const outcomes = await Promise.all([0, 1, 2].map(() => applyEvents(app.deps.db, [all[0]!, ...fresh])));
  assert.equal(outcomes.map((o) => o.applied).sort(), [0, 0, 2]);
  const after = await stats();
  assert.is(after.as_of_position, before.as_of_position + 2);
  assert.equal(after.results, await truth());
});

Follow('GET /api/tasks/stats/ answers anyone, narrows by owner, and is not taken for a task id', async () => {
  const anonymous = await request(app.base, 'GET', '/api/tasks/stats/');
  assert.is(anonymous.status, 200);
  const bob = await request(app.base, 'GET', '/api/tasks/stats/?owner=bob');
  assert.equal(
    bob.body.results,
    (await truth()).filter((r) => r.owner === 'bob'),
  );
  const nobody = await request(app.base, 'GET', '/api/tasks/stats/?owner=nobody');
  assert.equal(nobody.body.results, []);
  assert.is((await request(app.base, 'GET', '/api/tasks/stats')).status, 308);
  for (const method of ['POST', 'DELETE']) {
    const refused = await request(app.base, method, '/api/tasks/stats/', { token: tokens.alice });
    assert.is(refused.status, 405, method);
    assert.is(refused.headers.get('allow'), 'GET, HEAD, OPTIONS');
  }
});

Follow.run();
