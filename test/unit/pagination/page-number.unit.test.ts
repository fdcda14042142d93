import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { paginate } from '../../../src/pagination/paginate.js';
import type { Ordering, PageSource, PaginateOutcome } from '../../../src/pagination/types.js';

type Task = { id: number; title: string };
const B = 'http://127.0.0.1:18000';
const L = `${B}/api/tasks/`;
const settings = { pageSize: 10, maxPageSize: 100, cursorSecret: 'test-secret' };

function createTasks(count: number): Task[] {
  return Array.from({ length: count }, (_, index) => ({ id: index + 1, title: `Task ${index + 1}` }));
}

function createSource(tasks: Task[]): PageSource<Task> & { pageCalls: number } {
  const sorted = (ordering: Ordering) => [...tasks].sort((a, b) => (ordering === 'asc' ? a.id - b.id : b.id - a.id));
  return {
    pageCalls: 0,
    async page(offset, limit, ordering) {
      this.pageCalls += 1;
      return { count: tasks.length, items: sorted(ordering).slice(offset, offset + limit) };
    },
    async seek() {
      throw new Error('page-number pagination must not seek');
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

async function get(search: string, count = 25, ordering: Ordering = 'asc', base = L): Promise<PaginateOutcome<Task>> {
  return paginate(createSource(createTasks(count)), { url: new URL(`${base}${search}`), ordering }, settings);
}

function createBody(count: number, next: string | null, previous: string | null, results: Task[]) {
  return { ok: true, body: { count, next, previous, results } };
}

const Table = suite('page-number answers match the recorded DRF table');

Table('no page parameter is page 1', async () => {
  assert.equal(await get(''), createBody(25, `${L}?page=2`, null, createRange(1, 10)));
});

Table('page 2 links back to the bare URL', async () => {
  assert.equal(await get('?page=2'), createBody(25, `${L}?page=3`, L, createRange(11, 20)));
});

Table('page 3 and page=last are the last page', async () => {
  const last = createBody(25, null, `${L}?page=2`, createRange(21, 25));
  assert.equal(await get('?page=3'), last);
  assert.equal(await get('?page=last'), last);
});

Table('pages beyond the last, below 1 or not integers are 404 Invalid page.', async () => {
  for (const search of [
    '?page=4',
    '?page=0',
    '?page=-1',
    '?page=abc',
    '?page=LAST',
    '?page=',
    '?page',
    '?page=1.0',
    `?page=${'9'.repeat(30)}`,
  ]) {
    assert.equal(await get(search), { ok: false, status: 404, detail: 'Invalid page.' }, search);
  }
});

Table('02, +2, " 2" and a repeated page (last wins) are page 2', async () => {
  const page2 = createBody(25, `${L}?page=3`, L, createRange(11, 20));
  for (const search of ['?page=02', '?page=%2B2', '?page=+2', '?page=%202', '?page=1&page=2']) {
    assert.equal(await get(search), page2, search);
  }
});

Table('other parameters are kept, keys sorted, repeated values in order', async () => {
  assert.equal(
    await get('?page=2&foo=bar'),
    createBody(25, `${L}?foo=bar&page=3`, `${L}?foo=bar`, createRange(11, 20)),
  );
  const mixed = await get('?zeta=1&page=2&alpha=y&alpha=x');
  assert.equal(
    mixed,
    createBody(25, `${L}?alpha=y&alpha=x&page=3&zeta=1`, `${L}?alpha=y&alpha=x&zeta=1`, createRange(11, 20)),
  );
});

Table('following previous of page 2 and next of page 1 gives page 1 and page 2', async () => {
  const page1 = await get('');
  const page2 = await get('?page=2');
  assert.ok(page1.ok && page2.ok);
  const back = await paginate(
    createSource(createTasks(25)),
    { url: new URL(page2.body.previous ?? ''), ordering: 'asc' },
    settings,
  );
  const forth = await paginate(
    createSource(createTasks(25)),
    { url: new URL(page1.body.next ?? ''), ordering: 'asc' },
    settings,
  );
  assert.equal(back, page1);
  assert.equal(forth, page2);
});

Table('page_size is honoured (DRF ignores it; docs/architecture.md "Pagination" asks for it)', async () => {
  assert.equal(await get('?page_size=5'), createBody(25, `${L}?page=2&page_size=5`, null, createRange(1, 5)));
});

Table('links use the scheme, host and port of the request URL', async () => {
  const other = await get('?page=2', 25, 'asc', 'http://example.com:8080/api/tasks/');
  assert.equal(
    other,
    createBody(
      25,
      'http://example.com:8080/api/tasks/?page=3',
      'http://example.com:8080/api/tasks/',
      createRange(11, 20),
    ),
  );
  const secure = await get('?page=2', 25, 'asc', 'https://127.0.0.1:18000/api/tasks/');
  assert.ok(secure.ok);
  assert.is(secure.body.next, 'https://127.0.0.1:18000/api/tasks/?page=3');
  const api = await get('?page=2', 25, 'asc', 'http://api.example.com/api/tasks/');
  assert.ok(api.ok);
  assert.is(api.body.next, 'http://api.example.com/api/tasks/?page=3');
});

Table('150 tasks: last page is 15, page 16 is 404', async () => {
  const last = createBody(150, null, `${L}?page=14`, createRange(141, 150));
  assert.equal(await get('?page=last', 150), last);
  assert.equal(await get('?page=15', 150), last);
  assert.equal(await get('?page=16', 150), { ok: false, status: 404, detail: 'Invalid page.' });
});

Table('0 tasks: page 1 and last are empty 200s, page 2 is 404', async () => {
  for (const search of ['', '?page=1', '?page=last'])
    assert.equal(await get(search, 0), createBody(0, null, null, []), search);
  assert.equal(await get('?page=2', 0), { ok: false, status: 404, detail: 'Invalid page.' });
});

const Sizes = suite('page-number pages cover every item once');

Sizes('for 0, 1, 10, 11, 25 and 150 items in both orderings', async () => {
  for (const count of [0, 1, 10, 11, 25, 150]) {
    for (const ordering of ['asc', 'desc'] as const) {
      const tasks = createTasks(count);
      const expected = ordering === 'asc' ? tasks : [...tasks].reverse();
      const seen: Task[] = [];
      const pages: string[] = [];
      let next: string | null = L;
      while (next !== null) {
        pages.push(next);
        const outcome: PaginateOutcome<Task> = await paginate(
          createSource(tasks),
          { url: new URL(next), ordering },
          settings,
        );
        assert.ok(outcome.ok && 'count' in outcome.body);
        assert.is(outcome.body.count, count);
        seen.push(...outcome.body.results);
        const previousUrl = pages.length === 1 ? null : pages.length === 2 ? L : `${L}?page=${pages.length - 1}`;
        assert.is(outcome.body.previous, previousUrl);
        next = outcome.body.next;
      }
      assert.equal(seen, expected, `${count} ${ordering}`);
      assert.is(pages.length, Math.max(1, Math.ceil(count / 10)));
    }
  }
});

Sizes('page_size is clamped to the maximum and kept as given in links', async () => {
  const outcome = await get('?page_size=1000', 150);
  assert.equal(outcome, createBody(150, `${L}?page=2&page_size=1000`, null, createRange(1, 100)));
  assert.equal(
    await get('?page=2&page_size=100', 150),
    createBody(150, null, `${L}?page_size=100`, createRange(101, 150)),
  );
});

Sizes('descending order pages from the highest key', async () => {
  assert.equal(await get('?page=last', 25, 'desc'), createBody(25, null, `${L}?page=2`, createRange(5, 1)));
});

Sizes('page=last costs one read when it is page 1, two otherwise', async () => {
  for (const [count, reads] of [
    [7, 1],
    [25, 2],
  ] as const) {
    const source = createSource(createTasks(count));
    await paginate(source, { url: new URL(`${L}?page=last`), ordering: 'asc' }, settings);
    assert.is(source.pageCalls, reads);
  }
});

Sizes('page=last re-reads when the count shrinks between reads', async () => {
  const tasks = createTasks(25);
  const source = createSource(tasks);
  const page = source.page.bind(source);
  source.page = async (offset, limit, ordering) => {
    const result = await page(offset, limit, ordering);
    if (source.pageCalls === 1) tasks.splice(15);
    return result;
  };
  assert.equal(
    await paginate(source, { url: new URL(`${L}?page=last`), ordering: 'asc' }, settings),
    createBody(15, null, L, createRange(11, 15)),
  );
});

const Refusals = suite('malformed page_size is a 400 naming it');

Refusals('non-integers, 0, negatives and blanks', async () => {
  for (const value of ['0', '-1', 'abc', '', '1.5', '%2B']) {
    assert.equal(
      await get(`?page_size=${value}`),
      { ok: false, status: 400, detail: 'Invalid "page_size": expected an integer of at least 1.' },
      value,
    );
  }
});

Refusals('page_size is checked before page', async () => {
  assert.equal(await get('?page=abc&page_size=0'), {
    ok: false,
    status: 400,
    detail: 'Invalid "page_size": expected an integer of at least 1.',
  });
});

Table.run();
Sizes.run();
Refusals.run();
