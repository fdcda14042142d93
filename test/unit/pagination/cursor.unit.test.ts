import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { paginate } from '../../../src/pagination/paginate.js';
import type { Ordering, PageSource, PaginateOutcome } from '../../../src/pagination/types.js';

type Task = { id: number; title: string };
type Body = { next: string | null; previous: string | null; results: Task[] };
const L = 'http://127.0.0.1:18000/api/tasks-cursor/';
const settings = { pageSize: 10, maxPageSize: 100, cursorSecret: 'test-secret' };
const CURSOR_LINK = /^http:\/\/127\.0\.0\.1:18000\/api\/tasks-cursor\/\?cursor=[A-Za-z0-9_-]+$/;

function createTasks(count: number): Task[] {
  return Array.from({ length: count }, (_, index) => ({ id: index + 1, title: `Task ${index + 1}` }));
}

function createSource(tasks: Task[]): PageSource<Task> & { seeks: Array<[number | null, number, Ordering]> } {
  const sorted = (ordering: Ordering) => [...tasks].sort((a, b) => (ordering === 'asc' ? a.id - b.id : b.id - a.id));
  return {
    seeks: [],
    async page() {
      throw new Error('cursor pagination must not count');
    },
    async seek(key, limit, ordering) {
      this.seeks.push([key, limit, ordering]);
      const after = (task: Task) => key === null || (ordering === 'asc' ? task.id > key : task.id < key);
      return sorted(ordering).filter(after).slice(0, limit);
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

async function open(source: PageSource<Task>, url: string | null, ordering: Ordering = 'asc'): Promise<Body> {
  assert.type(url, 'string');
  const outcome = await paginate(
    source,
    { url: new URL(url ?? ''), ordering, orderingParam: ordering === 'asc' ? 'id' : '-id' },
    settings,
  );
  if (!outcome.ok) throw new Error(`unexpected ${outcome.status} ${outcome.detail}`);
  assert.equal(Object.keys(outcome.body), ['next', 'previous', 'results']);
  return outcome.body as Body;
}

async function refuse(search: string): Promise<PaginateOutcome<Task>> {
  return paginate(
    createSource(createTasks(25)),
    { url: new URL(`${L}${search}`), ordering: 'asc', orderingParam: 'id' },
    settings,
  );
}

const Table = suite('cursor answers follow the recorded DRF walk (tokens differ: ours are signed)');

Table('first page, next, next, then previous twice retrace the same pages', async () => {
  const source = createSource(createTasks(25));
  const first = await open(source, `${L}?cursor=`);
  assert.equal(first.results, createRange(1, 10));
  assert.is(first.previous, null);
  assert.match(first.next ?? '', CURSOR_LINK);
  const second = await open(source, first.next);
  assert.equal(second.results, createRange(11, 20));
  assert.match(second.next ?? '', CURSOR_LINK);
  assert.match(second.previous ?? '', CURSOR_LINK);
  const third = await open(source, second.next);
  assert.equal(third, { next: null, previous: third.previous, results: createRange(21, 25) });
  assert.match(third.previous ?? '', CURSOR_LINK);
  assert.equal(await open(source, third.previous), second);
  assert.equal(await open(source, second.previous), first);
});

Table('each page is one seek of page size + 1 in the walk direction', async () => {
  const source = createSource(createTasks(25));
  const first = await open(source, `${L}?cursor=`);
  const second = await open(source, first.next);
  await open(source, second.previous);
  assert.equal(source.seeks, [
    [null, 11, 'asc'],
    [10, 11, 'asc'],
    [11, 11, 'desc'],
  ]);
});

Table('bad cursors are 404 Invalid cursor, without a period', async () => {
  for (const search of [
    '?cursor=garbage',
    '?cursor=bz1hYmM%3D',
    '?cursor=cD0xMA%3D%3D',
    '?cursor=%20',
    '?cursor=a.b',
  ]) {
    assert.equal(await refuse(search), { ok: false, status: 404, detail: 'Invalid cursor' }, search);
  }
});

Table('an empty cursor is the first page, and other parameters are kept in links', async () => {
  const source = createSource(createTasks(25));
  const page = await open(source, `${L}?zeta=1&cursor=&alpha=y&alpha=x`);
  assert.equal(page.results, createRange(1, 10));
  assert.match(page.next ?? '', /\/\?alpha=y&alpha=x&cursor=[A-Za-z0-9_-]+&zeta=1$/);
  const second = await open(source, page.next);
  assert.match(second.previous ?? '', /\/\?alpha=y&alpha=x&cursor=[A-Za-z0-9_-]+&zeta=1$/);
});

Table('cursor with page is refused (DRF ignores page)', async () => {
  assert.equal(await refuse('?cursor=&page=2'), {
    ok: false,
    status: 400,
    detail: 'Cannot combine "cursor" with "page": choose one pagination style.',
  });
});

Table('0 tasks', async () => {
  assert.equal(await open(createSource([]), `${L}?cursor=`), { next: null, previous: null, results: [] });
});

const Walks = suite('cursor walks visit every item once, both ways, in both orderings');

Walks('0, 1, 10, 11, 25 and 150 items', async () => {
  for (const count of [0, 1, 10, 11, 25, 150]) {
    for (const ordering of ['asc', 'desc'] as const) {
      const tasks = createTasks(count);
      const source = createSource(tasks);
      const pages: Body[] = [];
      let url: string | null = `${L}?cursor=`;
      while (url !== null) {
        const page = await open(source, url, ordering);
        pages.push(page);
        url = page.next;
      }
      const label = `${count} ${ordering}`;
      assert.equal(
        pages.flatMap((page) => page.results),
        ordering === 'asc' ? tasks : [...tasks].reverse(),
        label,
      );
      assert.is(pages.length, Math.max(1, Math.ceil(count / 10)), label);
      for (let index = pages.length - 1; index > 0; index -= 1) {
        assert.equal(await open(source, pages[index]?.previous ?? null, ordering), pages[index - 1], label);
      }
    }
  }
});

Walks('page_size is honoured, clamped, and malformed page_size is a 400', async () => {
  const source = createSource(createTasks(150));
  const five = await open(source, `${L}?cursor=&page_size=5`);
  assert.equal(five.results, createRange(1, 5));
  assert.match(five.next ?? '', /\?cursor=[A-Za-z0-9_-]+&page_size=5$/);
  assert.equal((await open(source, five.next)).results, createRange(6, 10));
  assert.equal((await open(source, `${L}?cursor=&page_size=1000`)).results, createRange(1, 100));
  assert.equal(await refuse('?cursor=&page_size=0'), {
    ok: false,
    status: 400,
    detail: 'Invalid "page_size": expected an integer of at least 1.',
  });
});

const Gaps = suite('cursor pages stay linked when rows vanish between requests');

Gaps('a forward page that comes back empty links back to the page ending at its key', async () => {
  for (const ordering of ['asc', 'desc'] as const) {
    const tasks = createTasks(11);
    const source = createSource(tasks);
    const first = await open(source, `${L}?cursor=`, ordering);
    tasks.splice(ordering === 'asc' ? 10 : 0, 1);
    const empty = await open(source, first.next, ordering);
    assert.equal(empty.results, []);
    assert.is(empty.next, null);
    assert.equal(await open(source, empty.previous, ordering), first, ordering);
  }
});

Gaps('a backward page that comes back empty links forward to the page starting at its key', async () => {
  for (const ordering of ['asc', 'desc'] as const) {
    const tasks = createTasks(20);
    const source = createSource(tasks);
    const second = await open(source, (await open(source, `${L}?cursor=`, ordering)).next, ordering);
    tasks.splice(ordering === 'asc' ? 0 : 10, 10);
    const empty = await open(source, second.previous, ordering);
    assert.equal(empty, { next: empty.next, previous: null, results: [] });
    assert.equal((await open(source, empty.next, ordering)).results, second.results, ordering);
  }
});

Gaps('ascending walks see every row that existed at the start once, plus rows added behind them', async () => {
  const tasks = createTasks(25);
  const source = createSource(tasks);
  const seen: number[] = [];
  let url: string | null = `${L}?cursor=`;
  while (url !== null) {
    const page = await open(source, url);
    seen.push(...page.results.map((task) => task.id));
    if (tasks.length < 40) tasks.push(...createTasks(tasks.length + 3).slice(tasks.length));
    url = page.next;
  }
  // Rows added after the walk reached the end are not seen; everything before is, once, in order.
  assert.equal(
    seen,
    Array.from({ length: seen.length }, (_, index) => index + 1),
  );
  assert.ok(seen.length > 25);
});

Table.run();
Walks.run();
Gaps.run();
