import { sql } from 'kysely';
import { suite } from '../../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { historyPageQuery } from '../../../../src/events/store/task.queries.js';
import { startTestApp, type TestApp } from '../../../helpers/app.js';
import { request } from '../../../helpers/http.js';

// docs/architecture.md "Pagination": a task's history in page-number and limit/offset style is a
// version range (versions are gapless), read by key like the task list: the same answers as the
// cursor walk, and a deep page reads its own rows, not every event before it nor a count(*).

const VERSIONS = 120;

const History = suite<{ app: TestApp; id: number; all: number[] }>('history pages seek by version');

History.before(async (ctx) => {
  ctx.app = await startTestApp({}, 'history-pages');
  const token = await ctx.app.login('hana');
  const created = await request(ctx.app.base, 'POST', '/api/tasks/', { token, body: { title: 'v1' } });
  ctx.id = created.body.id;
  for (let v = 2; v <= VERSIONS; v++)
    await request(ctx.app.base, 'PATCH', `/api/tasks/${ctx.id}/`, { token, body: { title: `v${v}` } });
  ctx.all = Array.from({ length: VERSIONS }, (_, i) => i + 1);
});
History.after(({ app }) => app.close());

const versions = (body: { results: Array<{ version: number }> }) => body.results.map((e) => e.version);

History('every page in both orderings and both styles holds the versions its place says', async ({ app, id, all }) => {
  for (const ordering of ['version', '-version']) {
    const expected = ordering === 'version' ? all : [...all].reverse();
    for (const size of [7, 50]) {
      for (let page = 1; (page - 1) * size < VERSIONS; page++) {
        const path = `/api/tasks/${id}/events/?page=${page}&page_size=${size}&ordering=${ordering}`;
        const answer = await request(app.base, 'GET', path);
        assert.is(answer.status, 200, `${path}: ${answer.text}`);
        assert.is(answer.body.count, VERSIONS, path);
        assert.equal(versions(answer.body), expected.slice((page - 1) * size, page * size), path);
      }
    }
    for (const [offset, limit] of [
      [0, 1],
      [13, 9],
      [115, 10],
      [119, 5],
      [120, 5],
      [500, 5],
    ] as const) {
      const path = `/api/tasks/${id}/events/?limit=${limit}&offset=${offset}&ordering=${ordering}`;
      const answer = await request(app.base, 'GET', path);
      assert.is(answer.body.count, VERSIONS, path);
      assert.equal(versions(answer.body), expected.slice(offset, offset + limit), path);
    }
  }
  const unknown = await request(app.base, 'GET', `/api/tasks/987654/events/?limit=5&offset=0`);
  assert.is(unknown.status, 404);
});

History('a deep page reads its own rows: no scan of the versions before it, no count(*)', async ({ app, id }) => {
  for (const ordering of ['asc', 'desc'] as const) {
    const { rows } = await sql<{
      'QUERY PLAN': unknown;
    }>`explain (analyze, format json) ${historyPageQuery(id, 110, 5, ordering)}`.execute(app.deps.db);
    const plan = JSON.stringify(rows[0]!['QUERY PLAN']);
    assert.not.match(plan, /"Node Type":"(Aggregate|Seq Scan)"/, `${ordering}: no count, no sequential scan`);
    const read = [...plan.matchAll(/"Relation Name":"events"[^{}]*?"Actual Rows":(\d+)/g)].map((m) => Number(m[1]));
    assert.ok(read.length > 0, plan);
    assert.ok(Math.max(...read) <= 5, `${ordering}: rows read from events per scan ${read.join(', ')}`);
  }
});

History.run();
