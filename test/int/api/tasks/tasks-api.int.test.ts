import { sql } from 'kysely';
import { suite } from '../../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from '../../../helpers/app.js';
import { request } from '../../../helpers/http.js';

let app: TestApp;
let token: string;
let L: string; // absolute URL of the collection, as links spell it

const get = (path: string) => request(app.base, 'GET', path);
const ids = (body: { results: Array<{ id: number }> }) => body.results.map((t) => t.id);
const range = (from: number, to: number) =>
  Array.from({ length: Math.abs(to - from) + 1 }, (_, i) => (from <= to ? from + i : from - i));

/** Creates tasks until the collection holds `total` (ids are drawn in commit order, so 1..total). */
async function growTo(total: number): Promise<void> {
  const { body } = await get('/api/tasks/');
  const missing = total - body.count;
  const created = await Promise.all(
    Array.from({ length: missing }, (_, i) =>
      request(app.base, 'POST', '/api/tasks/', { token, body: { title: `Task ${body.count + i + 1}` } }),
    ),
  );
  for (const response of created) assert.is(response.status, 201, response.text);
}

async function storedCount(): Promise<{ rows: number; counter: number }> {
  const { rows } = await sql<{ rows: number; counter: number }>`
    select (select count(*)::int from tasks) as rows, (select value::int from counters where name = 'tasks.count') as counter`.execute(
    app.deps.db,
  );
  return rows[0]!;
}

const Pages = suite('page-number pages as a client reads them');

Pages.before(async () => {
  app = await startTestApp({}, 'tasks-api');
  token = await app.login('alice');
  L = `${app.base}/api/tasks/`;
});
Pages.after(() => app.close());

Pages('0 tasks: page 1 (bare, page=1, page=last) is 200 with count 0; page 2 is 404 Invalid page.', async () => {
  const empty = { count: 0, next: null, previous: null, results: [] };
  for (const path of ['/api/tasks/', '/api/tasks/?page=1', '/api/tasks/?page=last']) {
    const response = await get(path);
    assert.is(response.status, 200, path);
    assert.equal(response.body, empty, path);
  }
  const beyond = await get('/api/tasks/?page=2');
  assert.is(beyond.status, 404);
  assert.equal(beyond.body, { detail: 'Invalid page.' });
});

Pages('1 task: one page, no links, the whole task resource', async () => {
  await growTo(1);
  const { status, body } = await get('/api/tasks/');
  assert.is(status, 200);
  assert.equal({ ...body, results: [] }, { count: 1, next: null, previous: null, results: [] });
  const [task] = body.results;
  assert.equal(Object.keys(task).sort(), [
    'completed',
    'created_at',
    'description',
    'id',
    'owner',
    'title',
    'updated_at',
    'version',
  ]);
  assert.equal(
    {
      id: task.id,
      title: task.title,
      description: task.description,
      completed: task.completed,
      owner: task.owner,
      version: task.version,
    },
    { id: 1, title: 'Task 1', description: '', completed: false, owner: 'alice', version: 1 },
  );
  assert.is(task.created_at, new Date(task.created_at).toISOString());
});

Pages('10 tasks: exactly one full page', async () => {
  await growTo(10);
  const { body } = await get('/api/tasks/');
  assert.equal({ ...body, results: ids(body) }, { count: 10, next: null, previous: null, results: range(1, 10) });
  assert.is((await get('/api/tasks/?page=2')).status, 404);
});

Pages('11 tasks: page 1 links to page 2, whose previous is the bare URL', async () => {
  await growTo(11);
  const first = (await get('/api/tasks/')).body;
  assert.equal(
    { ...first, results: ids(first) },
    { count: 11, next: `${L}?page=2`, previous: null, results: range(1, 10) },
  );
  const second = (await get('/api/tasks/?page=2')).body;
  assert.equal({ ...second, results: ids(second) }, { count: 11, next: null, previous: L, results: [11] });
});

Pages('25 tasks: pages 1..3 as DRF writes them, page=last is page 3', async () => {
  await growTo(25);
  const expect = [
    ['', { count: 25, next: `${L}?page=2`, previous: null, results: range(1, 10) }],
    ['?page=2', { count: 25, next: `${L}?page=3`, previous: L, results: range(11, 20) }],
    ['?page=3', { count: 25, next: null, previous: `${L}?page=2`, results: range(21, 25) }],
    ['?page=last', { count: 25, next: null, previous: `${L}?page=2`, results: range(21, 25) }],
  ] as const;
  for (const [search, page] of expect) {
    const { status, body } = await get(`/api/tasks/${search}`);
    assert.is(status, 200, search);
    assert.equal({ ...body, results: ids(body) }, page, search);
  }
});

Pages('following next from page 1 visits every task exactly once, and previous leads back', async () => {
  const seen: number[] = [];
  const visited: string[] = [];
  for (let url: string | null = L; url !== null;) {
    const response = await fetch(url);
    assert.is(response.status, 200, url);
    const body = (await response.json()) as { next: string | null; results: Array<{ id: number }> };
    seen.push(...ids(body));
    visited.push(url);
    url = body.next;
  }
  assert.equal(seen, range(1, 25));
  assert.equal(visited, [L, `${L}?page=2`, `${L}?page=3`]);
  const previousOfTwo = (await get('/api/tasks/?page=2')).body.previous;
  assert.ok(!new URL(previousOfTwo).searchParams.has('page'), previousOfTwo);
  assert.equal(ids((await (await fetch(previousOfTwo)).json()) as { results: Array<{ id: number }> }), range(1, 10));
});

Pages('other query parameters survive in both links (keys sorted, repeats kept)', async () => {
  const { body } = await get('/api/tasks/?zeta=1&page=2&alpha=y&alpha=x');
  assert.is(body.next, `${L}?alpha=y&alpha=x&page=3&zeta=1`);
  assert.is(body.previous, `${L}?alpha=y&alpha=x&zeta=1`);
  const plain = (await get('/api/tasks/?page=2&foo=bar')).body;
  assert.is(plain.next, `${L}?foo=bar&page=3`);
  assert.is(plain.previous, `${L}?foo=bar`);
});

Pages('beyond the last page, page 0, negative and non-numeric pages are 404 Invalid page.', async () => {
  for (const page of ['4', '0', '-1', 'abc', 'LAST', '', '1.0', '99999999999999999999']) {
    const { status, body } = await get(`/api/tasks/?page=${page}`);
    assert.is(status, 404, `page=${page}`);
    assert.equal(body, { detail: 'Invalid page.' }, `page=${page}`);
  }
});

Pages('ordering=-id serves newest first and keeps itself in the links', async () => {
  const first = (await get('/api/tasks/?ordering=-id')).body;
  assert.equal(
    { ...first, results: ids(first) },
    { count: 25, next: `${L}?ordering=-id&page=2`, previous: null, results: range(25, 16) },
  );
  const last = (await get('/api/tasks/?ordering=-id&page=last')).body;
  assert.equal(ids(last), range(5, 1));
  assert.is(last.previous, `${L}?ordering=-id&page=2`);
  const bad = await get('/api/tasks/?ordering=title');
  assert.is(bad.status, 400);
  assert.match(bad.body.detail, 'ordering');
});

Pages('page_size chooses the page size up to 100; above is clamped, malformed is 400 naming it', async () => {
  await growTo(105);
  const five = (await get('/api/tasks/?page_size=5&page=2')).body;
  assert.equal(
    { ...five, results: ids(five) },
    { count: 105, next: `${L}?page=3&page_size=5`, previous: `${L}?page_size=5`, results: range(6, 10) },
  );
  const hundred = (await get('/api/tasks/?page_size=100')).body;
  assert.equal(ids(hundred), range(1, 100));
  assert.is(hundred.next, `${L}?page=2&page_size=100`);
  const clamped = (await get('/api/tasks/?page_size=1000&page=2')).body;
  assert.equal(ids(clamped), range(101, 105));
  for (const size of ['0', 'abc', '-3']) {
    const bad = await get(`/api/tasks/?page_size=${size}`);
    assert.is(bad.status, 400, size);
    assert.match(bad.body.detail, 'page_size');
  }
});

Pages('count is the true number after creates and deletes (the counter the append keeps)', async () => {
  for (const id of [3, 50, 105]) {
    const response = await request(app.base, 'DELETE', `/api/tasks/${id}/`, { token });
    assert.is(response.status, 204);
  }
  await growTo(110);
  const stored = await storedCount();
  assert.equal(stored, { rows: 110, counter: 110 });
  const { body } = await get('/api/tasks/?page=last');
  assert.is(body.count, 110);
  assert.is(ids(body).at(-1), 113);
  assert.not.ok(ids((await get('/api/tasks/')).body).includes(3));
});

const Resource = suite('one task: create, read, conditional requests, delete');
let alice: string;

Resource.before(async () => {
  app = await startTestApp({}, 'tasks-api-resource');
  alice = await app.login('alice');
});
Resource.after(() => app.close());

const eventCount = async () =>
  Number((await sql<{ n: string }>`select count(*) as n from events`.execute(app.deps.db)).rows[0]!.n);

Resource('POST answers 201 with the task, an absolute Location and an ETag', async () => {
  const response = await request(app.base, 'POST', '/api/tasks/', {
    token: alice,
    body: { title: '  Buy milk ', description: 'two litres' },
  });
  assert.is(response.status, 201);
  assert.is(response.headers.get('location'), `${app.base}/api/tasks/1/`);
  assert.is(response.headers.get('etag'), '"1-1"');
  assert.match(response.headers.get('content-type') ?? '', 'application/json');
  const { created_at, updated_at, ...rest } = response.body;
  assert.equal(rest, {
    id: 1,
    title: 'Buy milk',
    description: 'two litres',
    completed: false,
    owner: 'alice',
    version: 1,
  });
  assert.is(created_at, updated_at);
  const detail = await request(app.base, 'GET', '/api/tasks/1/');
  assert.equal(detail.body, response.body);
});

Resource('GET detail carries the ETag; If-None-Match with it is 304 without a body, another tag is 200', async () => {
  const first = await request(app.base, 'GET', '/api/tasks/1/');
  assert.is(first.status, 200);
  const etag = first.headers.get('etag')!;
  assert.is(etag, '"1-1"');
  const cached = await request(app.base, 'GET', '/api/tasks/1/', { headers: { 'If-None-Match': etag } });
  assert.is(cached.status, 304);
  assert.is(cached.text, '');
  assert.is(cached.headers.get('etag'), etag);
  const stale = await request(app.base, 'GET', '/api/tasks/1/', { headers: { 'If-None-Match': '"1-0"' } });
  assert.is(stale.status, 200);
});

Resource('PATCH with the current If-Match changes the task and bumps version and ETag', async () => {
  const response = await request(app.base, 'PATCH', '/api/tasks/1/', {
    token: alice,
    body: { completed: true },
    headers: { 'If-Match': '"1-1"' },
  });
  assert.is(response.status, 200, response.text);
  assert.equal([response.body.completed, response.body.version, response.body.title], [true, 2, 'Buy milk']);
  assert.is(response.headers.get('etag'), '"1-2"');
  assert.ok(response.body.updated_at > response.body.created_at);
});

Resource('PATCH and PUT with a stale If-Match are 412 and append nothing', async () => {
  const before = await eventCount();
  for (const method of ['PATCH', 'PUT']) {
    const response = await request(app.base, method, '/api/tasks/1/', {
      token: alice,
      body: { title: 'Too late' },
      headers: { 'If-Match': '"1-1"' },
    });
    assert.is(response.status, 412, method);
    assert.equal(response.body, {
      detail: 'Precondition failed: the task\'s current ETag is "1-2", which If-Match does not name.',
    });
  }
  const other = await request(app.base, 'PATCH', '/api/tasks/1/', {
    token: alice,
    body: { title: 'Wrong task' },
    headers: { 'If-Match': '"9-2"' },
  });
  assert.is(other.status, 412);
  assert.is(await eventCount(), before);
  assert.is((await request(app.base, 'GET', '/api/tasks/1/')).body.title, 'Buy milk');
});

Resource('PUT replaces: omitted fields return to their defaults', async () => {
  const response = await request(app.base, 'PUT', '/api/tasks/1/', {
    token: alice,
    body: { title: 'Buy oat milk' },
    headers: { 'If-Match': '"1-2"' },
  });
  assert.is(response.status, 200, response.text);
  assert.equal([response.body.title, response.body.description, response.body.completed], ['Buy oat milk', '', false]);
  const { rows } = await sql<{ type: string }>`select type from events where stream_id = 1 order by version`.execute(
    app.deps.db,
  );
  assert.equal(
    rows.map((r) => r.type),
    ['TaskCreated', 'TaskCompleted', 'TaskDetailsChanged', 'TaskReopened'],
  );
  assert.is(response.body.version, 4);
});

Resource('a PATCH that changes nothing appends nothing and keeps the version', async () => {
  const before = await eventCount();
  const response = await request(app.base, 'PATCH', '/api/tasks/1/', { token: alice, body: { title: 'Buy oat milk' } });
  assert.is(response.status, 200);
  assert.is(response.body.version, 4);
  assert.is(await eventCount(), before);
});

Resource('DELETE answers 204 with no body; the task is then 404 and gone from the list', async () => {
  const stale = await request(app.base, 'DELETE', '/api/tasks/1/', { token: alice, headers: { 'If-Match': '"1-3"' } });
  assert.is(stale.status, 412);
  const response = await request(app.base, 'DELETE', '/api/tasks/1/', {
    token: alice,
    headers: { 'If-Match': '"1-4"' },
  });
  assert.is(response.status, 204);
  assert.is(response.text, '');
  const gone = await request(app.base, 'GET', '/api/tasks/1/');
  assert.is(gone.status, 404);
  assert.equal(gone.body, { detail: 'Not found.' });
  assert.equal((await request(app.base, 'GET', '/api/tasks/')).body, {
    count: 0,
    next: null,
    previous: null,
    results: [],
  });
  assert.is((await request(app.base, 'DELETE', '/api/tasks/1/', { token: alice })).status, 404);
});

Pages.run();
Resource.run();
