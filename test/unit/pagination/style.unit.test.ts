import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { paginate } from '../../../src/pagination/paginate.js';
import { parseQuery } from '../../../src/pagination/query-string.js';
import { selectStyle } from '../../../src/pagination/style.js';
import type { PageSource } from '../../../src/pagination/types.js';

type Task = { id: number; title: string };
const settings = { pageSize: 10, maxPageSize: 100, cursorSecret: 'test-secret' };
const tasks: Task[] = Array.from({ length: 25 }, (_, index) => ({ id: index + 1, title: `Task ${index + 1}` }));
const source: PageSource<Task> = {
  async page(offset, limit) {
    return { count: tasks.length, items: tasks.slice(offset, offset + limit) };
  },
  async seek(key, limit) {
    return tasks.filter((task) => key === null || task.id > key).slice(0, limit);
  },
  keyOf: (task) => task.id,
};

const select = (search: string) => selectStyle(parseQuery(search));
const createClash = (detail: string) => ({ ok: false, status: 400, detail });

const Selection = suite('the query string picks the pagination style');

Selection('nothing, page or page_size → page-number', () => {
  for (const search of ['', '?page=2', '?page_size=5', '?page=2&page_size=5', '?foo=bar']) {
    assert.equal(select(search), { ok: true, style: 'page-number' }, search);
  }
});

Selection('limit and/or offset → limit/offset', () => {
  for (const search of ['?limit=5', '?offset=5', '?limit=5&offset=5', '?offset=', '?foo=bar&limit=1']) {
    assert.equal(select(search), { ok: true, style: 'limit-offset' }, search);
  }
});

Selection('cursor, even empty or without "=", → cursor, also with page_size', () => {
  for (const search of ['?cursor=abc', '?cursor=', '?cursor', '?cursor=&page_size=5']) {
    assert.equal(select(search), { ok: true, style: 'cursor' }, search);
  }
});

const Clashes = suite('mixing styles is a 400 naming the parameters that clash');

Clashes('page or page_size with limit/offset', () => {
  assert.equal(
    select('?page=2&limit=5&offset=5'),
    createClash('Cannot combine "page" with "limit"/"offset": choose one pagination style.'),
  );
  assert.equal(
    select('?page=2&limit=5'),
    createClash('Cannot combine "page" with "limit": choose one pagination style.'),
  );
  assert.equal(
    select('?offset=5&page=2'),
    createClash('Cannot combine "page" with "offset": choose one pagination style.'),
  );
  assert.equal(
    select('?page_size=5&limit=5'),
    createClash('Cannot combine "page_size" with "limit": choose one pagination style.'),
  );
  assert.equal(
    select('?page=1&page_size=5&limit=5&offset=0'),
    createClash('Cannot combine "page"/"page_size" with "limit"/"offset": choose one pagination style.'),
  );
});

Clashes('cursor with page, limit or offset', () => {
  assert.equal(
    select('?cursor=&page=2'),
    createClash('Cannot combine "cursor" with "page": choose one pagination style.'),
  );
  assert.equal(
    select('?cursor=x&limit=5'),
    createClash('Cannot combine "cursor" with "limit": choose one pagination style.'),
  );
  assert.equal(
    select('?offset=1&cursor&page=1&limit=5'),
    createClash('Cannot combine "cursor" with "page"/"limit"/"offset": choose one pagination style.'),
  );
});

Clashes('paginate answers the clash before reading anything', async () => {
  const untouchable: PageSource<Task> = {
    page: () => Promise.reject(new Error('must not read')),
    seek: () => Promise.reject(new Error('must not read')),
    keyOf: (task) => task.id,
  };
  const url = new URL('http://127.0.0.1:18000/api/tasks/?page=2&limit=5&offset=5');
  assert.equal(
    await paginate(untouchable, { url, ordering: 'asc' }, settings),
    createClash('Cannot combine "page" with "limit"/"offset": choose one pagination style.'),
  );
});

Clashes('each style answers with its own envelope', async () => {
  const base = 'http://127.0.0.1:18000/api/tasks/';
  const shapes: Array<[string, string[]]> = [
    ['', ['count', 'next', 'previous', 'results']],
    ['?limit=5', ['count', 'next', 'previous', 'results']],
    ['?cursor=', ['next', 'previous', 'results']],
  ];
  for (const [search, keys] of shapes) {
    const outcome = await paginate(source, { url: new URL(`${base}${search}`), ordering: 'asc' }, settings);
    assert.ok(outcome.ok);
    assert.equal(Object.keys(outcome.body), keys, search);
  }
});

Selection.run();
Clashes.run();
