import type { Kysely } from 'kysely';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import type { Database } from '../../../db/database.js';
import { ByteLru } from '../../../src/read-cache/lru.js';
import { startTestApp, type TestApp } from '../../helpers/app.js';
import { request } from '../../helpers/http.js';

let app: TestApp;
let token: string;
let realDb: Kysely<Database>;
let dbCalls = 0;

/** Counts every use of the app's database handle, so a test can see that PostgreSQL was not asked. */
function countDatabaseUse(): void {
  realDb = app.deps.db;
  app.deps.db = new Proxy(realDb, {
    get(target, property) {
      dbCalls += 1;
      const value = Reflect.get(target, property);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

const Conditional = suite('conditional GET on lists');

Conditional.before(async () => {
  app = await startTestApp({}, 'read-cache');
  token = await app.login('alice');
  for (let i = 0; i < 3; i += 1)
    await request(app.base, 'POST', '/api/tasks/', { token, body: { title: `task ${i}` } });
  countDatabaseUse();
});
Conditional.after(async () => {
  app.deps.db = realDb;
  await app.close();
});

Conditional('a list carries a strong ETag and Cache-Control: no-cache', async () => {
  const page = await request(app.base, 'GET', '/api/tasks/');
  assert.is(page.status, 200);
  assert.match(page.headers.get('etag') ?? '', /^"L\d+\.[A-Za-z0-9_-]{16}"$/);
  assert.is(page.headers.get('cache-control'), 'no-cache');
  assert.is(page.headers.get('content-type'), 'application/json; charset=utf-8');
  assert.is(page.body.count, 3);
});

Conditional('If-None-Match of an unchanged list is 304 without touching PostgreSQL', async () => {
  for (const path of [
    '/api/tasks/',
    '/api/tasks/?page_size=2&page=2',
    '/api/tasks/?cursor=',
    '/api/tasks/?limit=1&offset=1',
    '/api/tasks/1/events/',
  ]) {
    const first = await request(app.base, 'GET', path);
    assert.is(first.status, 200, path);
    const etag = first.headers.get('etag')!;
    const before = dbCalls;
    const again = await request(app.base, 'GET', path, { headers: { 'If-None-Match': etag } });
    assert.is(again.status, 304, path);
    assert.is(again.text, '');
    assert.is(again.headers.get('etag'), etag);
    assert.is(dbCalls, before, `${path}: PostgreSQL was asked`);
  }
});

Conditional('an unchanged list is answered from memory; right after a write it is 200 with a new ETag', async () => {
  const untouched = dbCalls;
  const first = await request(app.base, 'GET', '/api/tasks/?ordering=-id');
  assert.ok(dbCalls > untouched, 'a first read goes to PostgreSQL');
  const before = dbCalls;
  const cached = await request(app.base, 'GET', '/api/tasks/?ordering=-id');
  assert.is(dbCalls, before, 'a current answer is served without PostgreSQL');
  assert.is(cached.text, first.text);
  const created = await request(app.base, 'POST', '/api/tasks/', { token, body: { title: 'fresh' } });
  assert.is(created.status, 201);
  const after = await request(app.base, 'GET', '/api/tasks/?ordering=-id', {
    headers: { 'If-None-Match': first.headers.get('etag')! },
  });
  assert.is(after.status, 200);
  assert.is.not(after.headers.get('etag'), first.headers.get('etag'));
  assert.is(after.body.results[0].id, created.body.id);
  assert.is(after.body.count, first.body.count + 1);
});

Conditional('a tag for another URL or a head not yet published is not taken as current', async () => {
  const page = await request(app.base, 'GET', '/api/tasks/?page_size=3');
  const tag = page.headers.get('etag')!;
  const other = await request(app.base, 'GET', '/api/tasks/?page_size=4', { headers: { 'If-None-Match': tag } });
  assert.is(other.status, 200);
  const older = tag.replace(/^"L(\d+)\./, (_, head: string) => `"L${Number(head) - 1}.`);
  const stale = await request(app.base, 'GET', '/api/tasks/?page_size=3', { headers: { 'If-None-Match': older } });
  assert.is(stale.status, 200, 'a tag read before the last write is not current');
});

Conditional('a single task: cached, and its new version right after a change', async () => {
  const id = (await request(app.base, 'GET', '/api/tasks/?ordering=-id')).body.results[0].id;
  const first = await request(app.base, 'GET', `/api/tasks/${id}/`);
  assert.is(first.headers.get('etag'), `"${id}-1"`);
  const notModified = await request(app.base, 'GET', `/api/tasks/${id}/`, {
    headers: { 'If-None-Match': `"${id}-1"` },
  });
  assert.is(notModified.status, 304);
  await request(app.base, 'PATCH', `/api/tasks/${id}/`, { token, body: { title: 'changed' } });
  const changed = await request(app.base, 'GET', `/api/tasks/${id}/`, { headers: { 'If-None-Match': `"${id}-1"` } });
  assert.is(changed.status, 200);
  assert.is(changed.body.title, 'changed');
  assert.is(changed.headers.get('etag'), `"${id}-2"`);
});

const Tokens = suite('bearer tokens remembered per worker');

Tokens.before(async () => {
  app = await startTestApp({}, 'read-cache-tokens');
  token = await app.login('bob');
  countDatabaseUse();
});
Tokens.after(async () => {
  app.deps.db = realDb;
  await app.close();
});

Tokens('an authenticated read of a kept page needs no PostgreSQL once the token is remembered', async () => {
  await request(app.base, 'GET', '/api/tasks/', { token });
  await request(app.base, 'GET', '/api/tasks/', { token });
  const before = dbCalls;
  const page = await request(app.base, 'GET', '/api/tasks/', { token });
  assert.is(page.status, 200);
  assert.is(dbCalls, before);
});

Tokens('a logout is seen by the very next request', async () => {
  const other = await request(app.base, 'POST', '/api/auth/token/', {
    body: { username: 'bob', password: 'bob-pass-123' },
  });
  const second = other.body.token as string;
  assert.is((await request(app.base, 'GET', '/api/tasks/', { token: second })).status, 200);
  assert.is((await request(app.base, 'DELETE', '/api/auth/token/', { token: second })).status, 204);
  const after = await request(app.base, 'GET', '/api/tasks/', { token: second });
  assert.is(after.status, 401);
  assert.equal(after.body, { detail: 'Invalid token.' });
  assert.is((await request(app.base, 'GET', '/api/tasks/', { token })).status, 200, 'the other token still works');
});

Tokens('a token revoked elsewhere (another host: the row gone, the epoch rotated) is refused at once', async () => {
  assert.is((await request(app.base, 'GET', '/api/tasks/', { token })).status, 200);
  await realDb.deleteFrom('tokens').execute();
  await app.deps.redis.set(`${app.redisPrefix}{read}:tokens`, 'rotated-by-another-host');
  const after = await request(app.base, 'GET', '/api/tasks/', { token });
  assert.is(after.status, 401);
});

const Memory = suite('the read cache is bounded by bytes');

Memory('the least recently used entries go first, and the total stays within the budget', () => {
  const lru = new ByteLru<{ bytes: number; name: string }>(1_000);
  for (let i = 0; i < 10; i += 1) lru.set(`k${i}`, { bytes: 200, name: `v${i}` });
  assert.is(lru.size, 5);
  assert.ok(lru.bytes <= 1_000);
  assert.is(lru.get('k4'), undefined);
  assert.is(lru.get('k5')?.name, 'v5');
  lru.set('k10', { bytes: 200, name: 'v10' });
  assert.is(lru.get('k5')?.name, 'v5', 'a recent hit is kept');
  assert.is(lru.get('k6'), undefined, 'the oldest untouched entry went');
  lru.set('huge', { bytes: 5_000, name: 'too big' });
  assert.is(lru.get('huge'), undefined);
  assert.is(lru.size, 5);
});

const Off = suite('READ_CACHE_BYTES=0');

Off('with the cache off, lists are read from PostgreSQL every time and still carry a tag', async () => {
  const plain = await startTestApp({ READ_CACHE_BYTES: '0' }, 'read-cache-off');
  try {
    const first = await request(plain.base, 'GET', '/api/tasks/');
    assert.is(first.status, 200);
    const again = await request(plain.base, 'GET', '/api/tasks/', {
      headers: { 'If-None-Match': first.headers.get('etag')! },
    });
    assert.is(again.status, 304, 'a matching tag is still 304 (read from PostgreSQL)');
    assert.is(plain.deps.readCache, undefined);
  } finally {
    await plain.close();
  }
});

Conditional.run();
Tokens.run();
Memory.run();
Off.run();
