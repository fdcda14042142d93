import { request as httpRequest } from 'node:http';
import { sql } from 'kysely';
import { suite } from '../../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from '../../../helpers/app.js';
import { request, type RequestOptions } from '../../../helpers/http.js';

const BODY_LIMIT = 4096;
let app: TestApp;
let token: string;

const call = (method: string, path: string, options: RequestOptions = {}) =>
  request(app.base, method, path, { token, ...options });
const post = (body: unknown) => call('POST', '/api/tasks/', { body });

/** Sends `chunks` with chunked transfer encoding (no Content-Length), pausing between them. */
function sendChunked(path: string, chunks: string[]): Promise<{ status: number; body: string } | { error: string }> {
  const url = new URL(path, app.base);
  return new Promise((resolve) => {
    const req = httpRequest(
      url,
      { method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${token}` } },
      (res) => {
        let body = '';
        res.on('data', (chunk) => (body += chunk));
        res.on('end', () => resolve({ status: res.statusCode!, body }));
        res.on('error', (error) => resolve({ error: error.message }));
      },
    );
    req.on('error', (error) => resolve({ error: (error as NodeJS.ErrnoException).code ?? error.message }));
    const write = (i: number) => {
      if (i === chunks.length) return void req.end();
      req.write(chunks[i], () => setTimeout(() => write(i + 1), 5));
    };
    write(0);
  });
}

const Errors = suite('every error answers JSON with DRF texts and the right status');

Errors.before(async () => {
  app = await startTestApp({ BODY_LIMIT_BYTES: String(BODY_LIMIT) }, 'tasks-errors');
  token = await app.login('alice');
  assert.is((await post({ title: 'Existing' })).status, 201);
});
Errors.after(() => app.close());

Errors('malformed JSON is 400 "JSON parse error - <reason>"', async () => {
  for (const raw of ['this is not json', '{"title": "x",}', '{"title"']) {
    const response = await call('POST', '/api/tasks/', { raw, headers: { 'Content-Type': 'application/json' } });
    assert.is(response.status, 400, raw);
    assert.equal(Object.keys(response.body), ['detail']);
    assert.match(response.body.detail, /^JSON parse error - \S/, raw);
  }
  const patch = await call('PATCH', '/api/tasks/1/', { raw: '{', headers: { 'Content-Type': 'application/json' } });
  assert.is(patch.status, 400);
  assert.match(patch.body.detail, /^JSON parse error - /);
});

Errors('a body in another media type is 415 naming it', async () => {
  const response = await call('POST', '/api/tasks/', { raw: 'title=x', headers: { 'Content-Type': 'text/plain' } });
  assert.is(response.status, 415);
  assert.equal(response.body, {
    detail:
      'Unsupported media type "text/plain" in request. Send the body as JSON with Content-Type: application/json.',
  });
  const xml = await call('PUT', '/api/tasks/1/', {
    raw: '<t/>',
    headers: { 'Content-Type': 'application/xml; charset=utf-8' },
  });
  assert.equal(
    [xml.status, xml.body],
    [
      415,
      {
        detail:
          'Unsupported media type "application/xml" in request. Send the body as JSON with Content-Type: application/json.',
      },
    ],
  );
});

Errors(
  'a compressed body or one in another charset is 415 saying which; UTF-8 named in any spelling is read',
  async () => {
    const { gzipSync } = await import('node:zlib');
    const compressed = await fetch(`${app.base}/api/tasks/`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json', 'Content-Encoding': 'gzip' },
      body: gzipSync('{"title":"zipped"}'),
    });
    assert.equal(
      [compressed.status, await compressed.json()],
      [415, { detail: 'Unsupported content coding "gzip" in request.' }],
    );
    const utf16 = await fetch(`${app.base}/api/tasks/`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json; charset=UTF-16' },
      body: Buffer.from('{"title":"wide"}', 'utf16le'),
    });
    assert.equal(
      [utf16.status, await utf16.json()],
      [415, { detail: 'Unsupported charset "utf-16" in request: bodies are read as UTF-8.' }],
    );
    for (const type of ['application/json; charset="UTF-8"', 'application/json;charset=utf8']) {
      const named = await call('POST', '/api/tasks/', {
        raw: '{"title":"named"}',
        headers: { 'Content-Type': type, 'Content-Encoding': 'identity' },
      });
      assert.is(named.status, 201, type);
    }
  },
);

Errors(
  'a form, or a body with no Content-Type, is 415 saying that JSON is expected; an empty body is still read as {}',
  async () => {
    const expected = 'Send the body as JSON with Content-Type: application/json.';
    const form = await call('POST', '/api/tasks/', {
      raw: '{"title":"x"}',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    });
    assert.equal(
      [form.status, form.body],
      [415, { detail: `Unsupported media type "application/x-www-form-urlencoded" in request. ${expected}` }],
    );
    // A byte body: fetch labels a string body text/plain, and this one must carry no Content-Type.
    const bare = await fetch(new URL('/api/tasks/', app.base), {
      method: 'POST',
      headers: { Authorization: `Bearer ${token}` },
      body: Buffer.from('{"title":"x"}'),
    });
    assert.equal(
      [bare.status, await bare.json()],
      // DRF's text names the media type it got: an empty one. Ours then says so in words.
      [415, { detail: `Unsupported media type "" in request. The request has no Content-Type. ${expected}` }],
    );
    for (const method of ['PUT', 'PATCH']) {
      const write = await call(method, '/api/tasks/1/', {
        raw: 'title=y',
        headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      });
      assert.is(write.status, 415, `${method}: ${write.text}`);
    }
    const login = await call('POST', '/api/auth/token/', {
      token: undefined,
      raw: 'username=alice&password=x',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    });
    assert.is(login.status, 415, login.text);
    const empty = await call('POST', '/api/tasks/', { raw: '' });
    assert.equal([empty.status, empty.body], [400, { title: ['This field is required.'] }]);
  },
);

Errors('an oversize body is 413 whether announced by Content-Length or streamed chunked', async () => {
  const big = JSON.stringify({ title: 'x', description: 'y'.repeat(BODY_LIMIT) });
  const announced = await call('POST', '/api/tasks/', { raw: big, headers: { 'Content-Type': 'application/json' } });
  assert.is(announced.status, 413);
  assert.equal(announced.body, { detail: `Request body is larger than ${BODY_LIMIT} bytes.` });
  const streamed = await sendChunked('/api/tasks/', [
    big.slice(0, 1000),
    big.slice(1000, 3000),
    big.slice(3000),
    ' '.repeat(8192),
  ]);
  assert.equal(streamed, {
    status: 413,
    body: JSON.stringify({ detail: `Request body is larger than ${BODY_LIMIT} bytes.` }),
  });
  const fits = await sendChunked('/api/tasks/', ['{"title":', '"chunked"}']);
  assert.is('status' in fits && fits.status, 201);
  assert.is((await call('GET', '/healthz')).status, 200);
});

Errors('unknown and non-numeric ids are 404 Not found. for every method', async () => {
  for (const path of [
    '/api/tasks/99999/',
    '/api/tasks/abc/',
    '/api/tasks/1.5/',
    '/api/tasks/-1/',
    `/api/tasks/${'9'.repeat(40)}/`,
  ]) {
    for (const method of ['GET', 'PATCH', 'PUT', 'DELETE']) {
      const response = await call(
        method,
        path,
        method === 'GET' || method === 'DELETE' ? {} : { body: { title: 'x' } },
      );
      assert.is(response.status, 404, `${method} ${path}`);
      assert.equal(response.body, { detail: 'Not found.' }, `${method} ${path}`);
    }
  }
  const nowhere = await call('GET', '/api/nothing-here/');
  assert.equal([nowhere.status, nowhere.body], [404, { detail: 'Not found.' }]);
});

Errors("a method the resource lacks is 405 with Allow and DRF's text", async () => {
  const list = await call('DELETE', '/api/tasks/');
  assert.is(list.status, 405);
  assert.equal(list.body, { detail: 'Method "DELETE" not allowed.' });
  const allow = (list.headers.get('allow') ?? '').split(/,\s*/).sort();
  assert.ok(['GET', 'POST'].every((m) => allow.includes(m)) && !allow.includes('DELETE'), allow.join());
  const detail = await call('POST', '/api/tasks/1/', { body: { title: 'x' } });
  assert.equal([detail.status, detail.body], [405, { detail: 'Method "POST" not allowed.' }]);
  assert.ok(['GET', 'PATCH', 'PUT', 'DELETE'].every((m) => (detail.headers.get('allow') ?? '').includes(m)));
  const login = await call('GET', '/api/auth/token/');
  assert.equal([login.status, login.body], [405, { detail: 'Method "GET" not allowed.' }]);
});

Errors(
  'an anonymous client is told to authenticate before a missing method is refused, as DRF checks permission first',
  async () => {
    const cases: Array<[string, string, number]> = [
      ['PUT', '/api/tasks/', 401],
      ['DELETE', '/api/tasks/', 401],
      ['POST', '/api/tasks/1/', 401],
      ['POST', '/api/tasks/1/events/', 401],
      ['GET', '/api/reports/', 401],
      ['OPTIONS', '/api/events/', 401],
      ['GET', '/api/auth/token/', 405],
      ['DELETE', '/api/rate-limits/', 405],
      ['POST', '/api/', 405],
      ['OPTIONS', '/api/tasks/', 204],
    ];
    for (const [method, path, status] of cases) {
      const anonymous = await request(app.base, method, path);
      assert.is(anonymous.status, status, `${method} ${path}`);
      if (status === 401) {
        assert.equal(anonymous.body, { detail: 'Authentication credentials were not provided.' });
        assert.is(anonymous.headers.get('www-authenticate'), 'Bearer realm="api"');
      }
    }
    const signedIn = await call('PUT', '/api/reports/');
    assert.equal(
      [signedIn.status, signedIn.body, signedIn.headers.get('allow')],
      [405, { detail: 'Method "PUT" not allowed.' }, 'GET, POST, HEAD, OPTIONS'],
    );
  },
);

Errors('every answer of an API path carries its Allow, errors included', async () => {
  const responses = [
    [await request(app.base, 'POST', '/api/tasks/', { body: { title: 'x' } }), 401, 'GET, POST, HEAD, OPTIONS'],
    [await call('GET', '/api/tasks/99999/'), 404, 'GET, PUT, PATCH, DELETE, HEAD, OPTIONS'],
    [await call('GET', '/api/tasks/?page=99'), 404, 'GET, POST, HEAD, OPTIONS'],
    [await call('GET', '/api/tasks/'), 200, 'GET, POST, HEAD, OPTIONS'],
    [await request(app.base, 'POST', '/api/auth/token/', { body: {} }), 400, 'POST, DELETE, OPTIONS'],
  ] as const;
  for (const [response, status, allow] of responses)
    assert.equal([response.status, response.headers.get('allow')], [status, allow]);
  const unrouted = await call('GET', '/api/nothing-here/');
  assert.is(unrouted.headers.get('allow'), null);
});

Errors('a path without its trailing slash is 308 to the slashed path, keeping method and query', async () => {
  const list = await call('GET', '/api/tasks?page=2&foo=bar');
  assert.is(list.status, 308);
  assert.is(list.headers.get('location'), '/api/tasks/?page=2&foo=bar');
  assert.equal(list.body, { detail: 'Moved to /api/tasks/?page=2&foo=bar' });
  const create = await call('POST', '/api/tasks', { body: { title: 'Redirected' } });
  assert.is(create.status, 308);
  assert.is(create.headers.get('location'), '/api/tasks/');
  const detail = await call('PATCH', '/api/tasks/1', { body: { title: 'x' } });
  assert.equal([detail.status, detail.headers.get('location')], [308, '/api/tasks/1/']);
  // A client that follows the redirect (fetch does for 308) re-sends the POST with its body.
  const followed = await fetch(`${app.base}/api/tasks`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: '{"title":"Followed"}',
  });
  assert.is(followed.status, 201);
  assert.is(((await followed.json()) as { title: string }).title, 'Followed');
});

Errors("validation errors name each field with DRF's texts", async () => {
  const cases: Array<[unknown, unknown]> = [
    [{}, { title: ['This field is required.'] }],
    [{ title: '' }, { title: ['This field may not be blank.'] }],
    [{ title: '   ' }, { title: ['This field may not be blank.'] }],
    [{ title: null }, { title: ['This field may not be null.'] }],
    [{ title: 'x'.repeat(201) }, { title: ['Ensure this field has no more than 200 characters.'] }],
    [{ title: 'nul\u0000byte' }, { title: ['Null characters are not allowed.'] }],
    [{ title: 'ok', completed: 'maybe' }, { completed: ['Must be a valid boolean.'] }],
    [[], { non_field_errors: ['Invalid data. Expected a dictionary, but got list.'] }],
    [null, { non_field_errors: ['No data provided'] }],
  ];
  for (const [body, errors] of cases) {
    const response = await post(body);
    assert.is(response.status, 400, JSON.stringify(body));
    assert.equal(response.body, errors, JSON.stringify(body));
  }
  const put = await call('PUT', '/api/tasks/1/', { body: {} });
  assert.equal([put.status, put.body], [400, { title: ['This field is required.'] }]);
});

Errors('200 characters fit; a number is coerced to a string; id and unknown fields are ignored', async () => {
  const long = await post({ title: 'x'.repeat(200) });
  assert.equal([long.status, long.body.title.length], [201, 200]);
  const number = await post({ title: 123 });
  assert.equal([number.status, number.body.title], [201, '123']);
  const withId = await post({ id: 999, title: 'With id', extra: 1, owner: 'mallory', version: 50 });
  assert.is(withId.status, 201);
  assert.ok(withId.body.id < 999);
  assert.equal(
    [withId.body.title, withId.body.owner, withId.body.version, 'extra' in withId.body],
    ['With id', 'alice', 1, false],
  );
});

Errors('a failed validation appends nothing', async () => {
  const count = async () =>
    (await sql<{ n: number }>`select count(*)::int as n from events`.execute(app.deps.db)).rows[0]!.n;
  const before = await count();
  await post({ title: '' });
  await call('PATCH', '/api/tasks/1/', { body: { title: null } });
  assert.is(await count(), before);
});

Errors('Accept: application/xml is 406; JSON, wildcards and no Accept are served', async () => {
  const xml = await call('GET', '/api/tasks/', { headers: { Accept: 'application/xml' } });
  assert.is(xml.status, 406);
  assert.equal(xml.body, { detail: 'Could not satisfy the request Accept header.' });
  assert.match(xml.headers.get('content-type') ?? '', 'application/json');
  for (const accept of ['application/json', '*/*', 'text/html, application/json;q=0.5', 'application/*']) {
    assert.is((await call('GET', '/api/tasks/', { headers: { Accept: accept } })).status, 200, accept);
  }
});

Errors('every error is JSON with nosniff and a same-origin referrer policy', async () => {
  const response = await call('GET', '/api/tasks/abc/');
  assert.match(response.headers.get('content-type') ?? '', 'application/json');
  assert.is(response.headers.get('x-content-type-options'), 'nosniff');
  assert.is(response.headers.get('referrer-policy'), 'same-origin');
});

Errors.run();
