import { Kysely, PostgresDialect, type CompiledQuery } from 'kysely';
import pg from 'pg';
import { suite } from '../../../helpers/suite.js';
import * as assert from 'uvu/assert';
import type { Database } from '../../../../db/database.js';
import { taskEventsSource, tasksSource } from '../../../../src/events/store/task.queries.js';
import { encodeCursor } from '../../../../src/pagination/cursor-codec.js';
import { startTestApp, type TestApp } from '../../../helpers/app.js';
import { request } from '../../../helpers/http.js';

// The list endpoints over HTTP, against the real PostgreSQL: link arithmetic at the edges for
// limit/offset and cursor, tampered cursors, style clashes, the task history endpoint, the
// opt-out collection, and the cursor page's cost (one index range scan at any depth).

const SECRET = 'test-cursor-secret-0123456789';
let app: TestApp;
let B: string;
let token: string;

const get = (path: string) => request(app.base, 'GET', path);
const ids = (body: { results: Array<{ id: number }> }) => body.results.map((task) => task.id);
const range = (from: number, to: number) =>
  Array.from({ length: Math.abs(to - from) + 1 }, (_, i) => (from <= to ? from + i : from - i));
/** A link as the client got it, fetched through the app under test. */
const follow = (link: string) => get(new URL(link).pathname + new URL(link).search);
const cursorOf = (link: string) => new URL(link).searchParams.get('cursor') as string;

/** Follows `next` from `path` to the end and returns every page's ids. */
async function walk(path: string): Promise<number[][]> {
  const pages: number[][] = [];
  let response = await get(path);
  for (;;) {
    assert.is(response.status, 200, response.text);
    pages.push(ids(response.body));
    if (response.body.next === null) return pages;
    response = await follow(response.body.next);
  }
}

/** Walks forward to the last page, then follows `previous` back to the first; returns the backward pages. */
async function walkBackward(path: string): Promise<number[][]> {
  let response = await get(path);
  while (response.body.next !== null) response = await follow(response.body.next);
  const pages = [ids(response.body)];
  while (response.body.previous !== null) {
    response = await follow(response.body.previous);
    pages.push(ids(response.body));
  }
  return pages;
}

async function expectDetail(path: string, status: number, ...mentions: string[]): Promise<void> {
  const response = await get(path);
  assert.is(response.status, status, `${path}: ${response.text}`);
  for (const word of mentions)
    assert.ok(String(response.body.detail).includes(word), `${path}: ${response.body.detail} names ${word}`);
}

async function expectInvalidCursor(path: string): Promise<void> {
  const response = await get(path);
  assert.is(response.status, 404, `${path}: ${response.text}`);
  assert.equal(response.body, { detail: 'Invalid cursor' });
}

const empty = suite('an empty collection');

empty.before(async () => {
  app = await startTestApp({ THROTTLE_REPORTS: '7/hour' }, 'pagination-http');
  B = `${app.base}/api/tasks/`;
  token = await app.login('pager');
});

empty('limit/offset: count 0, no next, previous only when an offset was asked for', async () => {
  assert.equal((await get('/api/tasks/?limit=5')).body, { count: 0, next: null, previous: null, results: [] });
  const past = await get('/api/tasks/?limit=5&offset=5');
  assert.is(past.status, 200);
  assert.equal(past.body, { count: 0, next: null, previous: `${B}?limit=5`, results: [] });
});

empty('cursor: both orderings answer an empty first page without links', async () => {
  for (const path of ['/api/tasks/?cursor=', '/api/tasks/?cursor=&ordering=-id']) {
    assert.equal((await get(path)).body, { next: null, previous: null, results: [] }, path);
  }
});

empty.run();

const limitOffset = suite('limit/offset over HTTP (25 tasks)');

limitOffset.before(async () => {
  for (let n = 1; n <= 25; n += 1) {
    const created = await request(app.base, 'POST', '/api/tasks/', { token, body: { title: `Task ${n}` } });
    assert.is(created.status, 201);
    assert.is(created.body.id, n);
  }
});

limitOffset('links carry the effective limit and sort their keys, as DRF builds them', async () => {
  const cases: Array<[string, string | null, string | null, number[]]> = [
    ['?limit=10', `${B}?limit=10&offset=10`, null, range(1, 10)],
    ['?limit=5&offset=5', `${B}?limit=5&offset=10`, `${B}?limit=5`, range(6, 10)],
    ['?offset=10', `${B}?limit=10&offset=20`, `${B}?limit=10`, range(11, 20)],
    ['?limit=10&offset=3', `${B}?limit=10&offset=13`, `${B}?limit=10`, range(4, 13)],
    ['?offset=5&foo=bar&limit=5', `${B}?foo=bar&limit=5&offset=10`, `${B}?foo=bar&limit=5`, range(6, 10)],
    ['?limit=10&offset=20', null, `${B}?limit=10&offset=10`, range(21, 25)],
    ['?limit=25', null, null, range(1, 25)],
    ['?limit=1000', null, null, range(1, 25)],
    ['?ordering=-id&limit=10', `${B}?limit=10&offset=10&ordering=-id`, null, range(25, 16)],
    ['?ordering=-id&limit=10&offset=20', null, `${B}?limit=10&offset=10&ordering=-id`, range(5, 1)],
  ];
  for (const [query, next, previous, expected] of cases) {
    const response = await get(`/api/tasks/${query}`);
    assert.is(response.status, 200, query);
    assert.equal(
      { ...response.body, results: ids(response.body) },
      { count: 25, next, previous, results: expected },
      query,
    );
  }
});

limitOffset('an offset at or past the end is a 200 with empty results and a previous', async () => {
  assert.equal((await get('/api/tasks/?offset=25')).body, {
    count: 25,
    next: null,
    previous: `${B}?limit=10&offset=15`,
    results: [],
  });
  assert.equal((await get('/api/tasks/?offset=30')).body, {
    count: 25,
    next: null,
    previous: `${B}?limit=10&offset=20`,
    results: [],
  });
});

limitOffset('following next, then previous, walks every task once, in either ordering', async () => {
  assert.equal(await walk('/api/tasks/?limit=7'), [range(1, 7), range(8, 14), range(15, 21), range(22, 25)]);
  assert.equal(await walk('/api/tasks/?limit=5&ordering=-id'), [
    range(25, 21),
    range(20, 16),
    range(15, 11),
    range(10, 6),
    range(5, 1),
  ]);
  assert.equal(await walkBackward('/api/tasks/?limit=10'), [range(21, 25), range(11, 20), range(1, 10)]);
  assert.equal(await walkBackward('/api/tasks/?limit=10&ordering=-id'), [range(5, 1), range(15, 6), range(25, 16)]);
});

limitOffset('malformed limit, offset or page_size → 400 naming the parameter', async () => {
  for (const query of ['limit=abc', 'limit=0', 'limit=-1', 'limit=1.5', 'limit='])
    await expectDetail(`/api/tasks/?${query}`, 400, '"limit"');
  for (const query of ['offset=abc', 'offset=-5', 'offset=1.5', 'offset='])
    await expectDetail(`/api/tasks/?${query}`, 400, '"offset"');
  for (const query of ['page_size=x', 'cursor=&page_size=0'])
    await expectDetail(`/api/tasks/?${query}`, 400, '"page_size"');
});

limitOffset.run();

const cursor = suite('cursor over HTTP (25 tasks)');

cursor('ascending: forward to the end, then back to the start, with identical pages', async () => {
  const first = await get('/api/tasks/?cursor=');
  assert.is(first.body.count, undefined, 'no count in a cursor envelope');
  assert.equal([ids(first.body), first.body.previous], [range(1, 10), null]);
  assert.match(cursorOf(first.body.next), /^[A-Za-z0-9_-]+$/);
  const second = await follow(first.body.next);
  const third = await follow(second.body.next);
  assert.equal([ids(second.body), ids(third.body), third.body.next], [range(11, 20), range(21, 25), null]);
  assert.equal((await follow(third.body.previous)).body, second.body, 'previous of the last page = page 2');
  assert.equal((await follow(second.body.previous)).body, first.body, 'previous of page 2 = page 1');
});

cursor('descending: forward to the end, then back to the start', async () => {
  const first = await get('/api/tasks/?cursor=&ordering=-id');
  const second = await follow(first.body.next);
  const third = await follow(second.body.next);
  assert.equal([ids(first.body), ids(second.body), ids(third.body)], [range(25, 16), range(15, 6), range(5, 1)]);
  assert.equal([first.body.previous, third.body.next], [null, null]);
  assert.ok(first.body.next.startsWith(`${B}?cursor=`) && first.body.next.endsWith('&ordering=-id'), first.body.next);
  assert.equal((await follow(third.body.previous)).body, second.body);
  assert.equal((await follow(second.body.previous)).body, first.body);
});

cursor('page_size: an exact multiple ends without a dangling next; one page holds everything', async () => {
  assert.equal(await walk('/api/tasks/?cursor=&page_size=5'), [
    range(1, 5),
    range(6, 10),
    range(11, 15),
    range(16, 20),
    range(21, 25),
  ]);
  assert.equal(await walk('/api/tasks/?cursor=&page_size=5&ordering=-id'), [
    range(25, 21),
    range(20, 16),
    range(15, 11),
    range(10, 6),
    range(5, 1),
  ]);
  assert.equal((await get('/api/tasks/?cursor=&page_size=25')).body.next, null);
  const whole = await get('/api/tasks/?cursor=&page_size=30&ordering=-id');
  assert.equal([ids(whole.body), whole.body.next, whole.body.previous], [range(25, 1), null, null]);
  const backward = await walkBackward('/api/tasks/?cursor=&page_size=7');
  assert.equal(backward, [range(22, 25), range(15, 21), range(8, 14), range(1, 7)]);
});

cursor('tampered, truncated, foreign or garbage cursors → 404 Invalid cursor', async () => {
  const page = await get('/api/tasks/?cursor=');
  const good = cursorOf(page.body.next);
  assert.equal(ids((await get(`/api/tasks/?cursor=${good}`)).body), range(11, 20), 'the untouched cursor works');
  const bytes = Buffer.from(good, 'base64url');
  const flip = (at: number) => {
    const copy = Buffer.from(bytes);
    copy[at] = copy[at]! ^ 0x01;
    return copy.toString('base64url');
  };
  const movedId = Buffer.from(bytes);
  movedId.writeBigInt64BE(movedId.readBigInt64BE(2) + 1n, 2); // the id inside, old signature kept
  const descending = cursorOf((await get('/api/tasks/?cursor=&ordering=-id')).body.next);
  const mint = (secret: string) =>
    encodeCursor(
      { key: 10, direction: 'forward' },
      { list: '/api/tasks/', ordering: 'asc', orderingParam: 'id' },
      secret,
    );
  assert.equal(
    ids((await get(`/api/tasks/?cursor=${mint(SECRET)}`)).body),
    range(11, 20),
    'signed with CURSOR_SECRET: accepted',
  );
  const otherSecret = mint('another-secret-0123456789');
  for (const tampered of [
    flip(1),
    flip(9),
    flip(bytes.length - 1),
    movedId.toString('base64url'),
    good.slice(0, -2),
    `${good}A`,
    'garbage',
    'cD0xMA%3D%3D',
    otherSecret,
  ]) {
    await expectInvalidCursor(`/api/tasks/?cursor=${tampered}`);
  }
  await expectInvalidCursor(`/api/tasks/?cursor=${descending}&ordering=id`);
  await expectInvalidCursor(`/api/tasks/?cursor=${descending}`);
  await expectInvalidCursor(`/api/tasks/?cursor=${good}&ordering=-id`);
  await expectInvalidCursor(`/api/tasks/1/events/?cursor=${good}`);
});

cursor('mixing styles → 400 naming the clash', async () => {
  await expectDetail('/api/tasks/?cursor=&page=2', 400, '"cursor"', '"page"');
  await expectDetail('/api/tasks/?cursor=&offset=5', 400, '"cursor"', '"offset"');
  await expectDetail('/api/tasks/?cursor=&limit=5&offset=5', 400, '"cursor"', '"limit"', '"offset"');
  await expectDetail('/api/tasks/?limit=5&page=2', 400, '"page"', '"limit"');
  await expectDetail('/api/tasks/?page_size=5&offset=5', 400, '"page_size"', '"offset"');
  assert.equal(
    ids((await get('/api/tasks/?page=2&page_size=5')).body),
    range(6, 10),
    'page_size belongs to page-number too',
  );
});

cursor.run();

const history = suite('the same pagination on /api/tasks/{id}/events/');

history.before(async () => {
  for (let n = 1; n <= 11; n += 1) {
    const changed = await request(app.base, 'PATCH', '/api/tasks/1/', { token, body: { description: `change ${n}` } });
    assert.is(changed.status, 200);
  }
});

history('cursor and limit/offset walk the 12 versions of task 1', async () => {
  const versions = (body: { results: Array<{ version: number }> }) => body.results.map((event) => event.version);
  const first = await get('/api/tasks/1/events/?cursor=&page_size=5');
  const second = await follow(first.body.next);
  const third = await follow(second.body.next);
  assert.equal(
    [versions(first.body), versions(second.body), versions(third.body), third.body.next],
    [range(1, 5), range(6, 10), [11, 12], null],
  );
  assert.equal((await follow(third.body.previous)).body, second.body);
  assert.equal(versions((await get('/api/tasks/1/events/?cursor=&ordering=-version')).body), range(12, 3));
  const tail = await get('/api/tasks/1/events/?limit=5&offset=10');
  assert.equal(
    { ...tail.body, results: versions(tail.body) },
    { count: 12, next: null, previous: `${app.base}/api/tasks/1/events/?limit=5&offset=5`, results: [11, 12] },
  );
  assert.ok(first.body.results.every((event: { task_id: number }) => event.task_id === 1));
  await expectDetail('/api/tasks/1/events/?cursor=&page=2', 400, '"cursor"', '"page"');
  await expectInvalidCursor(`/api/tasks/1/events/?cursor=${cursorOf(first.body.next).slice(1)}`);
  const other = await request(app.base, 'POST', '/api/tasks/', { token, body: { title: 'another history' } });
  await expectInvalidCursor(`/api/tasks/${other.body.id}/events/?cursor=${cursorOf(first.body.next)}`);
  await expectDetail('/api/tasks/1/events/?limit=x', 400, '"limit"');
});

history.run();

const optOut = suite('GET /api/rate-limits/ opts out of pagination');

optOut('a plain array of {scope, rate, keyed_by, …} from the live configuration', async () => {
  const response = await get('/api/rate-limits/?page=2&cursor=');
  assert.is(response.status, 200);
  assert.ok(Array.isArray(response.body), response.text);
  const rows = response.body as Array<{ scope: string; rate: string; keyed_by: string }>;
  assert.equal(
    rows.map(({ scope, rate, keyed_by }) => ({ scope, rate, keyed_by })),
    [
      { scope: 'anon', rate: '100000/min', keyed_by: 'ip' },
      { scope: 'user', rate: '100000/min', keyed_by: 'user' },
      { scope: 'token-obtain', rate: '100000/min', keyed_by: 'ip' },
      { scope: 'reports', rate: '7/hour', keyed_by: 'user' },
      { scope: 'login', rate: '100000/min', keyed_by: 'username' },
      { scope: 'docs', rate: '600/min', keyed_by: 'ip' },
    ],
  );
});

optOut.run();

const cost = suite('a cursor page costs one index range scan at any depth');
const DEEP_ROWS = 20_000;
let explained: { db: Kysely<Database>; queries: CompiledQuery[]; client: pg.Client };

cost.before(async () => {
  const client = new pg.Client({ connectionString: app.databaseUrl });
  await client.connect();
  await client.query(
    `insert into tasks (id, title, owner_id, owner, created_at, updated_at, version)
    select n, 'Deep ' || n, 1, 'pager', now(), now(), 1 from generate_series(1000, 1000 + $1::int) n`,
    [DEEP_ROWS],
  );
  await client.query(
    `insert into events (position, stream_id, version, type, data, metadata)
    select 1000000 + n, 999999, n, 'TaskDetailsChanged', '{}', '{}' from generate_series(1, $1::int) n`,
    [DEEP_ROWS],
  );
  await client.query('analyze tasks; analyze events');
  const queries: CompiledQuery[] = [];
  const pool = new pg.Pool({ connectionString: app.databaseUrl, max: 1 });
  const db = new Kysely<Database>({
    dialect: new PostgresDialect({ pool }),
    log: (event) => void queries.push(event.query),
  });
  explained = { db, queries, client };
});

cost.after(async () => {
  await explained.db.destroy();
  await explained.client.end();
  await app.close();
});

/** EXPLAIN ANALYZE of the last query the source ran: the rows each plan node produced. */
async function planOfLastQuery(): Promise<Array<{ node: string; index?: string; rows: number }>> {
  const query = explained.queries.at(-1)!;
  const { rows } = await explained.client.query(`explain (analyze, format json) ${query.sql}`, [...query.parameters]);
  const nodes: Array<{ node: string; index?: string; rows: number }> = [];
  const visit = (plan: Record<string, any>) => {
    nodes.push({ node: plan['Node Type'], index: plan['Index Name'], rows: plan['Actual Rows'] });
    for (const child of plan.Plans ?? []) visit(child);
  };
  visit(rows[0]['QUERY PLAN'][0].Plan);
  return nodes;
}

cost('shallow and deep cursor pages read page_size+1 rows by the primary key, in both orderings', async () => {
  const source = tasksSource(explained.db);
  for (const [key, ordering] of [
    [null, 'asc'],
    [20, 'asc'],
    [1000 + DEEP_ROWS - 50, 'asc'],
    [null, 'desc'],
    [1050, 'desc'],
    [10, 'desc'],
  ] as const) {
    await source.seek(key, 8, ordering);
    const plan = await planOfLastQuery();
    const scans = plan.filter((n) => n.node !== 'Limit');
    assert.equal(
      scans.map((n) => [n.node, n.index]),
      [['Index Scan', 'tasks_pkey']],
      `${key} ${ordering}: ${JSON.stringify(plan)}`,
    );
    assert.ok(scans[0]!.rows <= 8, `${key} ${ordering}: ${scans[0]!.rows} rows read`);
  }
});

cost('a task history page reads page_size+1 events by (stream, version) at any depth', async () => {
  const source = taskEventsSource(explained.db, 999999);
  for (const [key, ordering] of [
    [null, 'asc'],
    [DEEP_ROWS - 50, 'asc'],
    [50, 'desc'],
  ] as const) {
    await source.seek(key, 8, ordering);
    const scans = (await planOfLastQuery()).filter((n) => n.node !== 'Limit');
    assert.equal(
      scans.map((n) => [n.node, n.index]),
      [['Index Scan', 'events_stream_version_key']],
      `${key} ${ordering}`,
    );
    assert.ok(scans[0]!.rows <= 8, `${key} ${ordering}: ${scans[0]!.rows} rows read`);
  }
});

cost('the same measurement sees an OFFSET page read every skipped row', async () => {
  await explained.db
    .selectFrom('tasks')
    .selectAll()
    .orderBy('id')
    .offset(DEEP_ROWS - 50)
    .limit(8)
    .execute();
  const plan = await planOfLastQuery();
  assert.ok(
    plan.some((n) => n.rows >= DEEP_ROWS - 50),
    JSON.stringify(plan),
  );
});

cost.run();
