import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { paginate } from '../../../src/pagination/paginate.js';
import type { Ordering, PageSource, PaginateOutcome } from '../../../src/pagination/types.js';

type Task = { id: number; title: string };
const L = 'http://127.0.0.1:18000/api/tasks-lo/';
const settings = { pageSize: 10, maxPageSize: 100, cursorSecret: 'test-secret' };

function createTasks(count: number): Task[] {
  return Array.from({ length: count }, (_, index) => ({ id: index + 1, title: `Task ${index + 1}` }));
}

function createSource(tasks: Task[]): PageSource<Task> {
  const sorted = (ordering: Ordering) => [...tasks].sort((a, b) => (ordering === 'asc' ? a.id - b.id : b.id - a.id));
  return {
    async page(offset, limit, ordering) {
      return { count: tasks.length, items: sorted(ordering).slice(offset, offset + limit) };
    },
    async seek() {
      throw new Error('limit/offset pagination must not seek');
    },
    keyOf: (task) => task.id,
  };
}

function createRange(from: number, to: number): Task[] {
  const step = from <= to ? 1 : -1;
  return Array.from({ length: Math.abs(to - from) + 1 }, (_, i) => ({
    id: from + i * step,
    title: `Task ${from + i * step}`,
  }));
}

async function get(search: string, count = 25, ordering: Ordering = 'asc'): Promise<PaginateOutcome<Task>> {
  return paginate(createSource(createTasks(count)), { url: new URL(`${L}${search}`), ordering }, settings);
}

function createBody(count: number, next: string | null, previous: string | null, results: Task[]) {
  return { ok: true, body: { count, next, previous, results } };
}

const Table = suite('limit/offset answers match the recorded DRF table');

Table('the default limit is written into links (DRF row "no params", reached here with offset=0)', async () => {
  const first = createBody(25, `${L}?limit=10&offset=10`, null, createRange(1, 10));
  assert.equal(await get('?offset=0'), first);
  assert.equal(await get('?limit=10'), first);
});

Table('limit=5&offset=5 links back to offset 0 without writing it', async () => {
  assert.equal(
    await get('?limit=5&offset=5'),
    createBody(25, `${L}?limit=5&offset=10`, `${L}?limit=5`, createRange(6, 10)),
  );
});

Table('limit=5&offset=0 has no previous', async () => {
  assert.equal(await get('?limit=5&offset=0'), createBody(25, `${L}?limit=5&offset=5`, null, createRange(1, 5)));
});

Table('offset=10 alone', async () => {
  assert.equal(
    await get('?offset=10'),
    createBody(25, `${L}?limit=10&offset=20`, `${L}?limit=10`, createRange(11, 20)),
  );
});

Table('limit=1000 is capped to 100, in links too', async () => {
  assert.equal(await get('?limit=1000'), createBody(25, null, null, createRange(1, 25)));
  assert.equal(await get('?limit=1000', 150), createBody(150, `${L}?limit=100&offset=100`, null, createRange(1, 100)));
  assert.equal(await get('?limit=101&offset=100', 150), createBody(150, null, `${L}?limit=100`, createRange(101, 150)));
});

Table('an offset at or beyond the count is an empty 200 stepping back one limit', async () => {
  assert.equal(await get('?offset=30'), createBody(25, null, `${L}?limit=10&offset=20`, []));
  assert.equal(await get('?offset=25'), createBody(25, null, `${L}?limit=10&offset=15`, []));
});

Table('the last page and a page at an odd offset', async () => {
  assert.equal(await get('?limit=10&offset=20'), createBody(25, null, `${L}?limit=10&offset=10`, createRange(21, 25)));
  assert.equal(
    await get('?limit=10&offset=3'),
    createBody(25, `${L}?limit=10&offset=13`, `${L}?limit=10`, createRange(4, 13)),
  );
});

Table('other parameters are kept, keys sorted', async () => {
  assert.equal(
    await get('?offset=5&foo=bar&limit=5'),
    createBody(25, `${L}?foo=bar&limit=5&offset=10`, `${L}?foo=bar&limit=5`, createRange(6, 10)),
  );
});

Table('0 tasks with limit=5&offset=5', async () => {
  assert.equal(await get('?limit=5&offset=5', 0), createBody(0, null, `${L}?limit=5`, []));
});

Table(
  'page with limit is refused (DRF ignores page; docs/architecture.md "Pagination" refuses mixed styles)',
  async () => {
    const refusal = {
      ok: false,
      status: 400,
      detail: 'Cannot combine "page" with "limit"/"offset": choose one pagination style.',
    };
    assert.equal(await get('?limit=10&offset=0&page=2'), refusal);
  },
);

const Refusals = suite('malformed limit and offset are 400s naming the parameter (DRF falls back silently)');

Refusals('limit must be an integer of at least 1', async () => {
  for (const value of ['-1', '0', 'abc', '', '2.5', '1e2']) {
    assert.equal(
      await get(`?limit=${value}`),
      { ok: false, status: 400, detail: 'Invalid "limit": expected an integer of at least 1.' },
      value,
    );
  }
});

Refusals('offset must be an integer from 0 to 2^53-1', async () => {
  const detail = 'Invalid "offset": expected an integer from 0 to 9007199254740991.';
  for (const value of ['-5', 'abc', '', '1.0', '9007199254740992']) {
    assert.equal(await get(`?offset=${value}`), { ok: false, status: 400, detail }, value);
  }
});

Refusals('Python-style integers are accepted; the last repeated value wins', async () => {
  assert.equal(
    await get('?limit=%2B05&offset=%205'),
    createBody(25, `${L}?limit=5&offset=10`, `${L}?limit=5`, createRange(6, 10)),
  );
  assert.equal(
    await get('?limit=3&limit=5&offset=5'),
    createBody(25, `${L}?limit=5&offset=10`, `${L}?limit=5`, createRange(6, 10)),
  );
  assert.equal(
    await get(`?limit=${'9'.repeat(40)}`, 150),
    createBody(150, `${L}?limit=100&offset=100`, null, createRange(1, 100)),
  );
});

const Walks = suite('limit/offset links walk the collection');

Walks('following next visits every item once for 0, 1, 10, 11, 25 and 150 items in both orderings', async () => {
  for (const count of [0, 1, 10, 11, 25, 150]) {
    for (const ordering of ['asc', 'desc'] as const) {
      const tasks = createTasks(count);
      const seen: Task[] = [];
      const visited: string[] = [];
      let next: string | null = `${L}?limit=7`;
      while (next !== null) {
        visited.push(next);
        const outcome: PaginateOutcome<Task> = await paginate(
          createSource(tasks),
          { url: new URL(next), ordering },
          settings,
        );
        assert.ok(outcome.ok);
        seen.push(...outcome.body.results);
        next = outcome.body.next;
      }
      assert.equal(seen, ordering === 'asc' ? tasks : [...tasks].reverse(), `${count} ${ordering}`);
      let previous: string | null = visited[visited.length - 1] ?? null;
      for (let index = visited.length - 1; index >= 0; index -= 1) {
        assert.is(previous, index === 0 ? `${L}?limit=7` : `${L}?limit=7&offset=${index * 7}`);
        const outcome = await paginate(createSource(tasks), { url: new URL(previous ?? ''), ordering }, settings);
        assert.ok(outcome.ok);
        previous = outcome.body.previous;
      }
      assert.is(previous, null);
    }
  }
});

Table.run();
Refusals.run();
Walks.run();
