import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { createUser } from '../../../src/auth/users.repository.js';
import { startTestApp, type TestApp } from '../../helpers/app.js';
import { request, type TestResponse } from '../../helpers/http.js';

const TTL_MS = 3_600_000;
let app: TestApp;

const login = (body: unknown) => request(app.base, 'POST', '/api/auth/token/', { body });
const withAuth = (method: string, path: string, authorization: string, body?: unknown) =>
  request(app.base, method, path, { headers: { Authorization: authorization }, body });

function assertUnauthorized(response: TestResponse, detail: string): void {
  assert.is(response.status, 401, response.text);
  assert.equal(response.body, { detail });
  assert.match(response.headers.get('www-authenticate') ?? '', /^Bearer\b/);
}

const Login = suite('POST /api/auth/token/: logging in');

Login.before(async () => {
  app = await startTestApp({ TOKEN_TTL: '1h' }, 'auth');
  await createUser(app.deps.db, 'alice', 'alice-pass-123');
});
Login.after(() => app.close());

Login('good credentials give 200 {token, expires_at} one TOKEN_TTL ahead, and a new token each time', async () => {
  const before = Date.now();
  const first = await login({ username: 'alice', password: 'alice-pass-123' });
  assert.is(first.status, 200, first.text);
  assert.equal(Object.keys(first.body).sort(), ['expires_at', 'token']);
  assert.match(first.body.token, /^[0-9a-f]{64}$/);
  const expires = Date.parse(first.body.expires_at);
  assert.is(new Date(expires).toISOString(), first.body.expires_at);
  assert.ok(expires >= before + TTL_MS - 1000 && expires <= Date.now() + TTL_MS + 1000, first.body.expires_at);
  const second = await login({ username: 'alice', password: 'alice-pass-123' });
  assert.is.not(second.body.token, first.body.token);
});

Login('a wrong password and an unknown user get the same 400', async () => {
  const expected = { non_field_errors: ['Unable to log in with provided credentials.'] };
  for (const body of [
    { username: 'alice', password: 'wrong-pass' },
    { username: 'nobody', password: 'alice-pass-123' },
    { username: 'ALICE', password: 'alice-pass-123' },
  ]) {
    const response = await login(body);
    assert.is(response.status, 400, JSON.stringify(body));
    assert.equal(response.body, expected);
  }
});

Login("missing, blank and null fields have DRF's texts", async () => {
  const cases: Array<[unknown, unknown]> = [
    [{ username: 'alice' }, { password: ['This field is required.'] }],
    [{}, { username: ['This field is required.'], password: ['This field is required.'] }],
    [{ username: 'alice', password: '' }, { password: ['This field may not be blank.'] }],
    [{ username: '  ', password: 'x' }, { username: ['This field may not be blank.'] }],
    [{ username: null, password: 'x' }, { username: ['This field may not be null.'] }],
    [{ username: 'a\u0000', password: 'x' }, { username: ['Null characters are not allowed.'] }],
    [[], { non_field_errors: ['Invalid data. Expected a dictionary, but got list.'] }],
  ];
  for (const [body, errors] of cases) {
    const response = await login(body);
    assert.is(response.status, 400, JSON.stringify(body));
    assert.equal(response.body, errors, JSON.stringify(body));
  }
  const bad = await request(app.base, 'POST', '/api/auth/token/', {
    raw: 'not json',
    headers: { 'Content-Type': 'application/json' },
  });
  assert.is(bad.status, 400);
  assert.match(bad.body.detail, /^JSON parse error - /);
});

Login('a form-encoded login is 415: credentials are sent as JSON', async () => {
  const response = await request(app.base, 'POST', '/api/auth/token/', {
    raw: 'username=alice&password=alice-pass-123',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
  });
  assert.is(response.status, 415, response.text);
  assert.match(response.body.detail, /application\/json/);
});

const Tokens = suite('using, revoking and expiring tokens');
let token: string;

Tokens.before(async () => {
  app = await startTestApp({}, 'auth-tokens');
  token = await app.login('alice');
});
Tokens.after(() => app.close());

Tokens("Bearer and DRF's Token scheme (any case) are accepted alike", async () => {
  for (const header of [`Bearer ${token}`, `Token ${token}`, `token ${token}`, `BEARER  ${token}`]) {
    const response = await withAuth('POST', '/api/tasks/', header, { title: header.split(' ')[0] });
    assert.is(response.status, 201, `${header.split(' ')[0]}: ${response.text}`);
    assert.is(response.body.owner, 'alice');
  }
});

Tokens("a scheme without credentials, or with spaces in them, has DRF's texts", async () => {
  assertUnauthorized(await withAuth('GET', '/api/tasks/', 'Token'), 'Invalid token header. No credentials provided.');
  assertUnauthorized(await withAuth('GET', '/api/tasks/', 'Bearer'), 'Invalid token header. No credentials provided.');
  assertUnauthorized(
    await withAuth('GET', '/api/tasks/', 'Token a b'),
    'Invalid token header. Token string should not contain spaces.',
  );
});

Tokens('an unknown token is 401 Invalid token. with WWW-Authenticate, on reads as on writes', async () => {
  for (const bad of ['0'.repeat(64), 'garbage', `${token}x`]) {
    assertUnauthorized(await withAuth('GET', '/api/tasks/', `Bearer ${bad}`), 'Invalid token.');
    assertUnauthorized(await withAuth('POST', '/api/tasks/', `Token ${bad}`, { title: 'x' }), 'Invalid token.');
  }
});

Tokens('DELETE /api/auth/token/ revokes the presented token only; its next use is 401', async () => {
  const other = (await login({ username: 'alice', password: 'alice-pass-123' })).body.token as string;
  const revoked = await withAuth('DELETE', '/api/auth/token/', `Token ${token}`);
  assert.is(revoked.status, 204);
  assert.is(revoked.text, '');
  assertUnauthorized(await withAuth('POST', '/api/tasks/', `Bearer ${token}`, { title: 'x' }), 'Invalid token.');
  assertUnauthorized(await withAuth('DELETE', '/api/auth/token/', `Bearer ${token}`), 'Invalid token.');
  assert.is((await withAuth('POST', '/api/tasks/', `Bearer ${other}`, { title: 'still in' })).status, 201);
  token = other;
});

Tokens('logging out anonymously is 401 not provided', async () => {
  assertUnauthorized(
    await request(app.base, 'DELETE', '/api/auth/token/'),
    'Authentication credentials were not provided.',
  );
});

Tokens('an expired token is 401 Invalid token.', async () => {
  assert.is((await withAuth('GET', '/api/tasks/', `Bearer ${token}`)).status, 200);
  // Time passes beyond the token's life (a worker may remember the token; its expiry goes with it).
  const { expires_at } = await app.deps.db
    .selectFrom('tokens')
    .select('expires_at')
    .orderBy('expires_at', 'desc')
    .executeTakeFirstOrThrow();
  const clock = app.deps.clock;
  app.deps.clock = { now: () => new Date(expires_at.getTime() + 1_000) };
  try {
    assertUnauthorized(await withAuth('GET', '/api/tasks/', `Bearer ${token}`), 'Invalid token.');
  } finally {
    app.deps.clock = clock;
  }
});

const Permissions = suite('who may change a task');
let alice: string;
let bob: string;

Permissions.before(async () => {
  app = await startTestApp({}, 'auth-permissions');
  [alice, bob] = await Promise.all([app.login('alice'), app.login('bob')]);
  assert.is((await request(app.base, 'POST', '/api/tasks/', { token: alice, body: { title: "Alice's" } })).status, 201);
});
Permissions.after(() => app.close());

Permissions("another user's PATCH, PUT and DELETE are 403 and change nothing", async () => {
  const forbidden = { detail: 'You do not have permission to perform this action.' };
  for (const [method, body] of [
    ['PATCH', { title: 'Mine now' }],
    ['PUT', { title: 'Mine now' }],
    ['DELETE', undefined],
  ] as const) {
    const response = await request(app.base, method, '/api/tasks/1/', { token: bob, body });
    assert.is(response.status, 403, method);
    assert.equal(response.body, forbidden, method);
  }
  const task = (await request(app.base, 'GET', '/api/tasks/1/')).body;
  assert.equal([task.title, task.version, task.owner], ["Alice's", 1, 'alice']);
});

Permissions('anonymous writes are 401 not provided, with WWW-Authenticate; anonymous reads are fine', async () => {
  const notProvided = 'Authentication credentials were not provided.';
  assertUnauthorized(await request(app.base, 'POST', '/api/tasks/', { body: { title: 'x' } }), notProvided);
  assertUnauthorized(await request(app.base, 'PATCH', '/api/tasks/1/', { body: { title: 'x' } }), notProvided);
  assertUnauthorized(await request(app.base, 'PUT', '/api/tasks/1/', { body: { title: 'x' } }), notProvided);
  assertUnauthorized(await request(app.base, 'DELETE', '/api/tasks/1/'), notProvided);
  assert.is((await request(app.base, 'GET', '/api/tasks/1/')).status, 200);
  assert.is((await request(app.base, 'GET', '/api/tasks/')).status, 200);
});

Permissions('the owner still may', async () => {
  assert.is(
    (await request(app.base, 'PATCH', '/api/tasks/1/', { token: alice, body: { completed: true } })).status,
    200,
  );
  assert.is((await request(app.base, 'DELETE', '/api/tasks/1/', { token: alice })).status, 204);
});

Login.run();
Tokens.run();
Permissions.run();
