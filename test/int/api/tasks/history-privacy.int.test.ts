import { createHash } from 'node:crypto';
import type { Kysely } from 'kysely';
import { suite } from '../../../helpers/suite.js';
import * as assert from 'uvu/assert';
import type { Database } from '../../../../db/database.js';
import { startTestApp, type TestApp } from '../../../helpers/app.js';
import { request, type TestResponse } from '../../../helpers/http.js';

// docs/security.md "Who can see what": a task's history shows ids of people and requests to the task's
// owner alone, a deleted task's history is the owner's alone (404 to anyone else, as an unknown
// task), the feed follows the same rule, and the per-worker read cache never hands one viewer's
// answer (or its ETag) to another.

interface EventBody {
  position: number;
  task_id: number;
  version: number;
  type: string;
  data: Record<string, unknown>;
  metadata: Record<string, unknown>;
}

let app: TestApp;
let alice: string;
let bob: string;
let live: number;
let gone: number;
let bobs: number;
let realDb: Kysely<Database>;
let dbCalls = 0;

const PRIVATE = /actor_id|owner_id|request_id/;

const get = (path: string, token?: string, headers: Record<string, string> = {}) =>
  request(app.base, 'GET', path, { token, headers });

async function write(method: string, path: string, token: string, body?: unknown): Promise<TestResponse> {
  const response = await request(app.base, method, path, { token, body });
  if (response.status >= 300) throw new Error(`${method} ${path}: ${response.status} ${response.text}`);
  return response;
}

/** Counts every use of the app's database handle, so a test can see an answer came from the cache. */
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

const History = suite("who sees a task's history");

History.before(async () => {
  app = await startTestApp({}, 'history-privacy');
  [alice, bob] = await Promise.all([app.login('alice'), app.login('bob')]);
  live = (await write('POST', '/api/tasks/', alice, { title: 'Quarterly plan', description: 'numbers' })).body.id;
  await write('PATCH', `/api/tasks/${live}/`, alice, { title: 'Quarterly plan v2' });
  gone = (await write('POST', '/api/tasks/', alice, { title: 'Secret surprise party', description: 'for bob' })).body
    .id;
  await write('PATCH', `/api/tasks/${gone}/`, alice, { description: 'for bob, on friday' });
  await write('DELETE', `/api/tasks/${gone}/`, alice);
  bobs = (await write('POST', '/api/tasks/', bob, { title: "bob's own" })).body.id;
  countDatabaseUse();
});
History.after(async () => {
  if (realDb) app.deps.db = realDb;
  await app?.close();
});

History('anonymous clients and other users see a live history without ids of people or requests', async () => {
  const anonymous = await get(`/api/tasks/${live}/events/`);
  assert.is(anonymous.status, 200, anonymous.text);
  assert.not.match(anonymous.text, PRIVATE);
  const events = anonymous.body.results as EventBody[];
  assert.equal(
    events.map((event) => [event.version, event.type, event.data, event.metadata]),
    [
      [
        1,
        'TaskCreated',
        { title: 'Quarterly plan', description: 'numbers', completed: false, owner: 'alice' },
        { actor: 'alice' },
      ],
      [2, 'TaskDetailsChanged', { title: 'Quarterly plan v2' }, { actor: 'alice' }],
    ],
  );
  const other = await get(`/api/tasks/${live}/events/`, bob);
  assert.is(other.status, 200);
  assert.equal(other.body, anonymous.body, 'another user sees what an anonymous client sees');
});

History('the owner sees the whole history: who, and which request', async () => {
  const owner = await get(`/api/tasks/${live}/events/`, alice);
  assert.is(owner.status, 200);
  const [created, changed] = owner.body.results as EventBody[];
  const aliceId = created!.data.owner_id;
  assert.type(aliceId, 'number');
  assert.equal(Object.keys(created!.metadata).sort(), ['actor', 'actor_id', 'request_id']);
  assert.is(created!.metadata.actor_id, aliceId);
  assert.type(changed!.metadata.request_id, 'string');
});

History("a deleted task's history is the owner's: anyone else gets the 404 of a task that never was", async () => {
  const unknown = await get('/api/tasks/987654/events/');
  assert.equal([unknown.status, unknown.body], [404, { detail: 'Not found.' }]);
  for (const [who, token] of [
    ['anonymous', undefined],
    ['another user', bob],
  ] as const) {
    const refused = await get(`/api/tasks/${gone}/events/`, token);
    assert.equal([refused.status, refused.text], [unknown.status, unknown.text], who);
    assert.not.match(refused.text, /Secret|friday/, who);
    assert.is(refused.headers.get('etag'), null, who);
  }
  const owner = await get(`/api/tasks/${gone}/events/`, alice);
  assert.is(owner.status, 200, owner.text);
  assert.equal(
    (owner.body.results as EventBody[]).map((event) => event.type),
    ['TaskCreated', 'TaskDetailsChanged', 'TaskDeleted'],
  );
  assert.is((owner.body.results as EventBody[])[0]!.data.title, 'Secret surprise party');
});

History(
  "the read cache keeps each viewer's answer apart: an owner's is never served to anyone else, nor the other way round",
  async () => {
    for (const [label, first, then] of [
      ['owner first', alice, undefined],
      ['anonymous first', undefined, alice],
      ['another user first', bob, alice],
    ] as const) {
      const path = `/api/tasks/${live}/events/?page_size=${label.length}`;
      const a = await get(path, first);
      const before = dbCalls;
      const again = await get(path, first);
      assert.is(dbCalls, before, `${label}: the repeat is served from the cache`);
      assert.is(again.text, a.text);
      const b = await get(path, then);
      assert.is(b.status, 200);
      const full = (response: TestResponse) => PRIVATE.test(response.text);
      assert.is(full(a), first === alice, `${label}: first answer`);
      assert.is(full(b), then === alice, `${label}: second answer`);
      assert.is.not(b.headers.get('etag'), a.headers.get('etag'), `${label}: the tags differ`);
      // The other's tag is not taken as current: 200 with this viewer's own answer.
      const crossed = await get(path, then, { 'If-None-Match': a.headers.get('etag')! });
      assert.equal([crossed.status, crossed.text], [200, b.text], `${label}: the first viewer's ETag`);
      const own = await get(path, then, { 'If-None-Match': b.headers.get('etag')! });
      assert.is(own.status, 304, `${label}: the viewer's own ETag`);
    }
    // A deleted task's history, kept for its owner, is still 404 to others.
    const path = `/api/tasks/${gone}/events/?ordering=-version`;
    assert.is((await get(path, alice)).status, 200);
    const before = dbCalls;
    assert.is((await get(path, alice)).status, 200);
    assert.is(dbCalls, before, "the owner's answer is kept");
    assert.is((await get(path)).status, 404);
    assert.is((await get(path, bob)).status, 404);
  },
);

History('a made-up list tag never gets 304: a deleted task stays 404, a live one is answered in full', async () => {
  // The tag once was `"L<head>.<sha1 of the URL>"`: anyone could write one for a head far ahead.
  const path = `/api/tasks/${gone}/events/`;
  const key = `${app.deps.config.PAGE_SIZE}/${app.deps.config.MAX_PAGE_SIZE} ${app.base}${path} for anonymous`;
  const digest = createHash('sha1').update(key).digest('base64url').slice(0, 16);
  for (const [who, token] of [
    ['anonymous', undefined],
    ['another user', bob],
  ] as const) {
    const forged = await get(path, token, { 'If-None-Match': `"L999999999.${digest}"` });
    assert.equal([forged.status, forged.body], [404, { detail: 'Not found.' }], who);
  }
  // A real tag moved to a head not yet reached is not current either.
  const livePath = `/api/tasks/${live}/events/`;
  const real = (await get(livePath)).headers.get('etag')!;
  const ahead = real.replace(/^"L(\d+)\./, '"L999999999.');
  const answered = await get(livePath, undefined, { 'If-None-Match': ahead });
  assert.is(answered.status, 200);
  assert.is(answered.headers.get('etag'), real);
  assert.is((await get(livePath, undefined, { 'If-None-Match': real })).status, 304, 'the real tag still is');
  // The owner's tag for the deleted history, shown to another viewer, is no key either.
  const owners = (await get(path, alice)).headers.get('etag')!;
  assert.is((await get(path, bob, { 'If-None-Match': owners })).status, 404);
});

History(
  'the feed shows each reader what it may see: whole for its own tasks, without ids for others, nothing of a deleted task but its place',
  async () => {
    const read = async (token: string) =>
      (await get('/api/events/?after=0&limit=100', token)).body.results as EventBody[];
    const [forBob, forAlice] = await Promise.all([read(bob), read(alice)]);
    assert.equal(
      forBob.map((event) => event.position),
      forAlice.map((event) => event.position),
      'every reader sees every position, so a consumer still sees no gap',
    );
    assert.equal(
      forBob.map((event) => event.position),
      Array.from({ length: forBob.length }, (_, i) => i + 1),
    );
    for (const event of forBob) {
      if (event.task_id === bobs) {
        assert.type(event.metadata.request_id, 'string', 'bob sees all of his own');
      } else if (event.task_id === gone) {
        assert.equal([event.data, event.metadata], [{}, {}], `deleted task, ${event.type}`);
      } else {
        assert.not.match(JSON.stringify(event), PRIVATE, `${event.type} of another's task`);
        assert.is(event.metadata.actor, 'alice');
      }
    }
    const aliceGone = forAlice.filter((event) => event.task_id === gone);
    assert.is(aliceGone[0]!.data.title, 'Secret surprise party', 'the owner still reads her deleted task in the feed');
    assert.type(aliceGone[0]!.metadata.actor_id, 'number');
    assert.not.match(
      JSON.stringify(forAlice.filter((event) => event.task_id === bobs)),
      PRIVATE,
      "bob's ids are not alice's to see",
    );
  },
);

History.run();
