import { connect } from 'node:net';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from '../../helpers/app.js';
import { request } from '../../helpers/http.js';

/** Sends raw bytes and returns the raw response (for requests fetch will not send). */
function rawRequest(base: string, bytes: Buffer | string): Promise<string> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => socket.end(bytes));
    let text = '';
    socket.on('data', (chunk) => (text += chunk));
    socket.on('end', () => resolve(text));
    socket.on('error', reject);
  });
}

const Input = suite<{ app: TestApp; token: string }>('odd input is a client error, never a 500');
Input.before(async (ctx) => {
  ctx.app = await startTestApp({}, 'hardening-input');
  ctx.token = await ctx.app.login('alice');
});
Input.after(({ app }) => app.close());

Input('an unpaired surrogate anywhere in a JSON body is 400, and nothing is stored', async ({ app, token }) => {
  for (const raw of ['{"title":"\\ud800"}', '{"title":"ok","description":"x\\ud83d"}', '{"\\udfff":1,"title":"ok"}']) {
    const res = await request(app.base, 'POST', '/api/tasks/', {
      token,
      raw,
      headers: { 'Content-Type': 'application/json' },
    });
    assert.is(res.status, 400, raw);
    assert.match(res.body.detail, /^JSON parse error - .*unpaired surrogate/);
  }
  const pair = await request(app.base, 'POST', '/api/tasks/', {
    token,
    raw: '{"title":"\\ud83d\\ude00 ok"}',
    headers: { 'Content-Type': 'application/json' },
  });
  assert.is(pair.status, 201, 'a proper surrogate pair (an emoji) is fine');
  assert.is(pair.body.title, '😀 ok');
  assert.is((await request(app.base, 'GET', '/api/tasks/')).body.count, 1);
});

Input(
  "a JSON body nested too deeply for the parser is 400 saying so, not the parser's internals",
  async ({ app, token }) => {
    const raw = `{"title":${'['.repeat(20_000)}${']'.repeat(20_000)}}`;
    const res = await request(app.base, 'POST', '/api/tasks/', {
      token,
      raw,
      headers: { 'Content-Type': 'application/json' },
    });
    assert.equal([res.status, res.body], [400, { detail: 'JSON parse error - the document is nested too deeply' }]);
  },
);

Input('a body that is not valid UTF-8 is 400', async ({ app, token }) => {
  const bytes = Buffer.concat([Buffer.from('{"title":"'), Buffer.from([0xff, 0xfe]), Buffer.from('"}')]);
  const response = await fetch(`${app.base}/api/tasks/`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: bytes,
  });
  assert.is(response.status, 400);
  assert.equal(await response.json(), { detail: 'JSON parse error - the body is not valid UTF-8' });
});

Input('a NUL in a report owner or the stats filter is 400 with the field named', async ({ app, token }) => {
  const report = await request(app.base, 'POST', '/api/reports/', {
    token,
    body: { from: '2026-11-01', to: '2026-11-02', owner: 'a\u0000' },
  });
  assert.equal([report.status, report.body], [400, { owner: ['Null characters are not allowed.'] }]);
  const stats = await request(app.base, 'GET', '/api/tasks/stats/?owner=%00');
  assert.equal([stats.status, stats.body], [400, { owner: ['Null characters are not allowed.'] }]);
});

Input('numbers are taken as text for login fields, as DRF does', async ({ app }) => {
  const res = await request(app.base, 'POST', '/api/auth/token/', { body: { username: 123, password: 456 } });
  assert.equal([res.status, res.body], [400, { non_field_errors: ['Unable to log in with provided credentials.'] }]);
});

Input('requests the HTTP parser refuses still get a JSON error', async ({ app }) => {
  const unknownMethod = await rawRequest(app.base, 'FOO /api/tasks/ HTTP/1.1\r\nHost: x\r\n\r\n');
  assert.match(unknownMethod, /^HTTP\/1\.1 400 /);
  assert.match(unknownMethod, /Content-Type: application\/json/);
  assert.match(unknownMethod, /\{"detail":"Bad request\."\}$/);
  const hugeHeader = await rawRequest(
    app.base,
    `GET /api/tasks/ HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
  );
  assert.match(hugeHeader, /^HTTP\/1\.1 431 /);
  assert.match(hugeHeader, /\{"detail":"Request header fields too large\."\}$/);
  const longUri = await rawRequest(app.base, `GET /api/tasks/?q=${'a'.repeat(20_000)} HTTP/1.1\r\nHost: x\r\n\r\n`);
  assert.match(longUri, /^HTTP\/1\.1 414 /);
  assert.match(longUri, /\{"detail":"The request URI is too long\."\}$/);
  const twoHosts = await rawRequest(app.base, 'GET /api/tasks/ HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\n\r\n');
  assert.match(twoHosts, /^HTTP\/1\.1 400 /);
  assert.match(twoHosts, /\{"detail":"Bad request: more than one Host header\."\}$/);
  const noHost = await rawRequest(app.base, 'GET /api/tasks/ HTTP/1.1\r\n\r\n');
  assert.match(noHost, /^HTTP\/1\.1 400 /);
  assert.match(noHost, /Content-Type: application\/json/);
  assert.match(noHost, /\{"detail":"Bad request: the Host header is missing\."\}$/);
  const oldClient = await rawRequest(app.base, 'GET /healthz HTTP/1.0\r\n\r\n');
  assert.match(oldClient, /^HTTP\/1\.1 200 /);
});

Input(
  'paths match as written: case, doubled slashes and unknown /api paths are 404, not redirects',
  async ({ app }) => {
    for (const path of ['/api/TASKS/', '/api/tasks//', '/api/nope', '/api/nope/']) {
      const res = await request(app.base, 'GET', path);
      assert.equal([res.status, res.body], [404, { detail: 'Not found.' }], path);
    }
    const moved = await request(app.base, 'GET', '/api/tasks?page=1');
    assert.equal([moved.status, moved.headers.get('location')], [308, '/api/tasks/?page=1']);
  },
);

const Proxy = suite<{ app: TestApp }>('forwarded scheme and host behind one trusted proxy');
Proxy.before(async (ctx) => {
  ctx.app = await startTestApp({ TRUST_PROXY_HOPS: '1' }, 'hardening-proxy');
  const token = await ctx.app.login('bob');
  for (let i = 0; i < 12; i += 1)
    await request(ctx.app.base, 'POST', '/api/tasks/', { token, body: { title: `t${i}` } });
});
Proxy.after(({ app }) => app.close());

Proxy('links use the value our proxy wrote (rightmost), only http/https, only well-formed hosts', async ({ app }) => {
  const next = async (headers: Record<string, string>) =>
    (await request(app.base, 'GET', '/api/tasks/', { headers })).body.next as string;
  assert.is(
    await next({ 'X-Forwarded-Proto': 'http, https', 'X-Forwarded-Host': 'evil.example, api.example.com' }),
    'https://api.example.com/api/tasks/?page=2',
  );
  assert.ok(
    (await next({ 'X-Forwarded-Proto': 'gopher', 'X-Forwarded-Host': 'evil/x?y' })).startsWith('http://127.0.0.1:'),
  );
});

const Methods = suite<{ app: TestApp }>('a method a path lacks is counted by its throttle scope, as DRF counts 405s');
Methods.before(async (ctx) => {
  ctx.app = await startTestApp({ THROTTLE_TOKEN_OBTAIN: '3/min', THROTTLE_ANON: '4/min' }, 'hardening-methods');
  await ctx.app.deps.db.insertInto('users').values({ username: 'carol', password_hash: 'unused' }).execute();
});
Methods.after(({ app }) => app.close());

Methods('405s on the login endpoint spend its token-obtain budget; OPTIONS is 204 with Allow', async ({ app }) => {
  const options = await request(app.base, 'OPTIONS', '/api/auth/token/');
  assert.equal([options.status, options.headers.get('allow')], [204, 'POST, DELETE, OPTIONS']);
  const refused = await request(app.base, 'GET', '/api/auth/token/');
  assert.equal(
    [refused.status, refused.body, refused.headers.get('allow')],
    [405, { detail: 'Method "GET" not allowed.' }, 'POST, DELETE, OPTIONS'],
  );
  assert.is(refused.headers.get('ratelimit'), '"token-obtain";r=1;t=60');
  assert.is(
    (await request(app.base, 'DELETE', '/api/tasks/')).status,
    401,
    'a refusal elsewhere uses the general budget',
  );
  assert.is((await request(app.base, 'PATCH', '/api/auth/token/')).status, 405);
  const login = await request(app.base, 'POST', '/api/auth/token/', {
    body: { username: 'carol', password: 'whatever-1' },
  });
  assert.is(login.status, 429, 'OPTIONS, GET and PATCH used the 3/min budget');
  const anon = await request(app.base, 'PUT', '/api/tasks/');
  assert.equal([anon.status, anon.headers.get('ratelimit')], [401, '"anon";r=2;t=60']);
});

Input(
  'If-Match takes a list: any current tag of this task matches; weak, foreign or stale tags do not',
  async ({ app, token }) => {
    const created = await request(app.base, 'POST', '/api/tasks/', { token, body: { title: 'conditional' } });
    const id = created.body.id as number;
    const patch = (ifMatch: string, path = `/api/tasks/${id}/`) =>
      request(app.base, 'PATCH', path, { token, body: { description: ifMatch }, headers: { 'If-Match': ifMatch } });
    assert.is((await patch(`"${id}-7", "${id}-1"`)).status, 200, 'the list holds the current version');
    assert.is((await patch(`W/"${id}-2"`)).status, 412, 'weak tags never match');
    assert.is((await patch(`"${id + 1}-2"`)).status, 412, 'another task');
    assert.is((await patch('garbage')).status, 412);
    assert.is((await patch(`"${id}-2"`, `/api/tasks/0${id}/`)).status, 200, 'the id in the path is a number');
    assert.is((await patch('*')).status, 200, '* matches any current version');
    const missing = await patch('*', '/api/tasks/999999/');
    assert.equal([missing.status, missing.body], [412, { detail: 'Precondition failed: the task does not exist.' }]);
    assert.is((await patch('"999999-1"', '/api/tasks/999999/')).status, 404, 'without *, a missing task is 404');
  },
);

Input(
  'If-None-Match on a write refuses the versions it names (412), * refuses any; If-Match on a read is checked too',
  async ({ app, token }) => {
    const created = await request(app.base, 'POST', '/api/tasks/', { token, body: { title: 'guarded' } });
    const id = created.body.id as number;
    const write = (method: string, headers: Record<string, string>) =>
      request(app.base, method, `/api/tasks/${id}/`, {
        token,
        headers,
        ...(method === 'DELETE' ? {} : { body: { title: 'guarded', description: JSON.stringify(headers) } }),
      });
    const excludes = {
      detail: `Precondition failed: the task's current ETag is "${id}-1", which If-None-Match excludes.`,
    };
    for (const method of ['PATCH', 'PUT', 'DELETE']) {
      for (const tag of ['*', `"${id}-1"`, `W/"${id}-1"`, `"${id}-9", "${id}-1"`]) {
        const refused = await write(method, { 'If-None-Match': tag });
        assert.equal([refused.status, refused.body], [412, excludes], `${method} If-None-Match: ${tag}`);
      }
    }
    const events = await request(app.base, 'GET', `/api/tasks/${id}/events/`);
    assert.is(events.body.count, 1, 'nothing was written');
    assert.is(
      (await write('PATCH', { 'If-None-Match': `"${id}-7", "${id + 1}-1"` })).status,
      200,
      'other versions and tasks do not exclude',
    );
    const both = await write('PATCH', { 'If-Match': `"${id}-1"`, 'If-None-Match': `"${id}-2"` });
    assert.equal(
      [both.status, both.body.detail],
      [412, `Precondition failed: the task's current ETag is "${id}-2", which If-Match does not name.`],
      'If-Match is judged first',
    );
    const read = (headers: Record<string, string>) => request(app.base, 'GET', `/api/tasks/${id}/`, { headers });
    assert.equal(
      [
        (await read({ 'If-Match': `"${id}-1"` })).status,
        (await read({ 'If-Match': `"${id}-2"` })).status,
        (await read({ 'If-Match': '*' })).status,
      ],
      [412, 200, 200],
    );
    assert.is((await read({ 'If-Match': `"${id}-2"`, 'If-None-Match': `"${id}-2"` })).status, 304);
    assert.is((await write('DELETE', { 'If-None-Match': `"${id}-1"` })).status, 204);
  },
);

Input('GET /api/ lists the collections as absolute links', async ({ app }) => {
  const root = await request(app.base, 'GET', '/api/');
  assert.is(root.status, 200);
  assert.is(root.body.tasks, `${app.base}/api/tasks/`);
  assert.is(root.body['rate-limits'], `${app.base}/api/rate-limits/`);
  assert.is(root.body.reports, `${app.base}/api/reports/`);
});

Input('GET / redirects to the API root', async ({ app }) => {
  const home = await request(app.base, 'GET', '/');
  assert.equal([home.status, home.headers.get('location')], [302, '/api/']);
  const followed = await fetch(new URL('/', app.base));
  assert.equal([followed.status, followed.url], [200, `${app.base}/api/`]);
});

Input.run();
Proxy.run();
Methods.run();
