import { get as httpGet } from 'node:http';
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from '../../helpers/app.js';
import { request, type TestResponse } from '../../helpers/http.js';

// GET /api/schema/ (docs/api.md "For integrators"): a valid OpenAPI 3.1 document naming every route
// the routers serve, whose response schemas every live answer of every route matches.

type Json = Record<string, any>;
const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;
const METHODS = ['get', 'post', 'put', 'patch', 'delete', 'options'];

let app: TestApp;
let doc: Json;
let ajv: Ajv2020;
let alice: string;
let bob: string;
const checked = new Set<string>();

/** The operation of the document a request is answered by: its template path matched segment by segment. */
function operationFor(method: string, path: string): { template: string; operation: Json } {
  const bare = new URL(path, 'http://x').pathname;
  for (const [template, item] of Object.entries<Json>(doc.paths)) {
    const pattern = new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}$`);
    if (pattern.test(bare) && item[method.toLowerCase()]) return { template, operation: item[method.toLowerCase()] };
  }
  throw new Error(`no operation in the document for ${method} ${bare}`);
}

/** Sends a request and checks its answer against the document: a documented status, body and headers. */
async function sample(
  method: string,
  path: string,
  options: Parameters<typeof request>[3] = {},
): Promise<TestResponse> {
  const response = await request(app.base, method, path, options);
  const { template, operation } = operationFor(method, path);
  const status = String(response.status);
  let answer = operation.responses[status];
  assert.ok(
    answer,
    `${method} ${path} answered ${status}, which the document does not list for ${method} ${template}: ${response.text}`,
  );
  let pointer = `paths/${escape(template)}/${method.toLowerCase()}/responses/${status}`;
  if (answer.$ref) {
    pointer = answer.$ref.slice(2);
    answer = doc.components.responses[answer.$ref.split('/').at(-1)];
  }
  const media = Object.keys(answer.content ?? {})[0];
  if (media === 'application/json') {
    const validate = ajv.getSchema(`openapi#/${pointer}/content/${escape('application/json')}/schema`)!;
    assert.ok(
      validate(response.body),
      `${method} ${path} ${status}: ${ajv.errorsText(validate.errors)}\n${response.text.slice(0, 500)}`,
    );
  } else {
    assert.ok(
      media === undefined ? response.text === '' : response.headers.get('content-type'),
      `${method} ${path} ${status}: body as documented`,
    );
  }
  for (const name of Object.keys(answer.headers ?? {})) {
    if (['Retry-After', 'Location', 'ETag', 'Allow'].includes(name))
      assert.ok(response.headers.get(name), `${method} ${path} ${status}: ${name}`);
  }
  checked.add(`${method.toLowerCase()} ${template} ${status}`);
  return response;
}

const escape = (segment: string) => segment.replaceAll('~', '~0').replaceAll('/', '~1');

const Schema = suite('GET /api/schema/: the OpenAPI 3.1 document of the running server');

Schema.before(async () => {
  app = await startTestApp({ THROTTLE_REPORTS: '2/min' }, 'openapi');
  alice = await app.login('alice');
  bob = await app.login('bob');
  const response = await request(app.base, 'GET', '/api/schema/');
  assert.is(response.status, 200, response.text);
  doc = response.body;
  ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats(ajv);
  ajv.addSchema(doc, 'openapi');
});
Schema.after(() => app.close());

Schema('is a valid OpenAPI 3.1 document whose server is the origin the request came to', async () => {
  const result = await new Validator().validate(structuredClone(doc));
  assert.equal(result, { valid: true }, JSON.stringify(result.errors ?? '').slice(0, 2000));
  assert.is(doc.openapi.slice(0, 4), '3.1.');
  assert.equal(doc.servers, [{ url: app.base }]);
  // fetch sets Host itself: ask with node:http to name another one
  const proxied = await new Promise<Json>((resolve, reject) => {
    const url = new URL('/api/schema/', app.base);
    const sent = httpGet(url, { headers: { Host: 'api.example.test:8443' } }, (response) => {
      let text = '';
      response.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
      response.on('end', () => resolve(JSON.parse(text) as Json));
    });
    sent.on('error', reject);
  });
  assert.equal(proxied.servers, [{ url: 'http://api.example.test:8443' }]);
});

Schema('is cacheable: an ETag, and 304 for a current If-None-Match', async () => {
  const first = await request(app.base, 'GET', '/api/schema/');
  const etag = first.headers.get('etag')!;
  assert.match(etag, /^"[A-Za-z0-9_-]+"$/);
  assert.match(first.headers.get('cache-control') ?? '', /max-age=\d+/);
  const again = await request(app.base, 'GET', '/api/schema/', { headers: { 'If-None-Match': etag } });
  assert.is(again.status, 304);
  assert.is(again.text, '');
});

Schema(
  "is served as OpenAPI's own media type to a client that asks for it, and 406 to one that accepts neither",
  async () => {
    const oai = await request(app.base, 'GET', '/api/schema/', {
      headers: { Accept: 'application/vnd.oai.openapi+json' },
    });
    assert.is(oai.status, 200);
    assert.is(oai.headers.get('content-type'), 'application/vnd.oai.openapi+json; charset=utf-8');
    const plain = await request(app.base, 'GET', '/api/schema/', { headers: { Accept: 'application/json' } });
    assert.is(plain.headers.get('content-type'), 'application/json; charset=utf-8');
    assert.equal(JSON.parse(oai.text), plain.body);
    // Two representations, two strong tags: a cache never hands one for the other.
    assert.is.not(oai.headers.get('etag'), plain.headers.get('etag'));
    assert.equal(Object.keys(doc.paths['/api/schema/'].get.responses['200'].content), [
      'application/json',
      'application/vnd.oai.openapi+json',
    ]);
    const refused = await request(app.base, 'GET', '/api/schema/', { headers: { Accept: 'text/html' } });
    assert.is(refused.status, 406);
    // Elsewhere JSON stays the only representation.
    const tasks = await request(app.base, 'GET', '/api/tasks/', {
      headers: { Accept: 'application/vnd.oai.openapi+json' },
    });
    assert.is(tasks.status, 406);
  },
);

Schema('names every route the app serves, and nothing else', async () => {
  // From outside: each documented path's OPTIONS lists the methods it serves (Allow), which must be the documented
  // ones (HEAD with GET); a path the document lacks is not served.
  for (const [template, item] of Object.entries<Json>(doc.paths)) {
    const path = template.replace(/\{[^}]+\}/g, '1');
    const options = await request(app.base, 'OPTIONS', path);
    const served = (options.headers.get('allow') ?? '')
      .split(', ')
      .map((m) => m.toLowerCase())
      .filter((m) => m !== 'head' && m !== 'options');
    const documented = Object.keys(item).filter((key) => METHODS.includes(key) && key !== 'options');
    assert.equal(served.sort(), documented.sort(), `${template}: served methods are the documented ones`);
  }
  assert.is((await request(app.base, 'GET', '/api/undocumented/')).status, 404, 'nothing else is served');
});

Schema(
  'documents the pagination parameters and envelopes of each style, the auth schemes, the headers, 429 and 503',
  () => {
    const list = doc.paths['/api/tasks/'].get;
    const names = list.parameters.map((p: Json) =>
      p.$ref ? doc.components.parameters[p.$ref.split('/').at(-1)].name : p.name,
    );
    for (const name of ['page', 'page_size', 'limit', 'offset', 'cursor', 'ordering', 'If-None-Match'])
      assert.ok(names.includes(name), name);
    const envelopes = list.responses['200'].content['application/json'].schema.anyOf.map((s: Json) =>
      s.$ref.split('/').at(-1),
    );
    assert.equal(envelopes, ['TaskPageNumberPage', 'TaskLimitOffsetPage', 'TaskCursorPage']);
    assert.not.ok(doc.components.schemas.TaskCursorPage.properties.count);
    assert.equal(Object.keys(doc.components.securitySchemes).sort(), ['bearerAuth', 'tokenAuth']);
    assert.equal(doc.paths['/api/tasks/'].post.security, [{ bearerAuth: [] }, { tokenAuth: [] }]);
    for (const name of ['If-Match', 'If-None-Match', 'Idempotency-Key'])
      assert.ok(doc.components.parameters[name], name);
    const throttled = doc.components.responses.Throttled;
    assert.equal(Object.keys(throttled.headers).sort(), ['RateLimit', 'RateLimit-Policy', 'Retry-After']);
    assert.is(doc.components.headers['Retry-After'].required, true, 'every 429 and 503 carries Retry-After');
    assert.match(
      doc.components.responses.PayloadTooLarge.content['application/json'].example.detail,
      String(app.deps.config.BODY_LIMIT_BYTES),
    );
    assert.ok(doc.components.responses.Unavailable.headers['Retry-After']);
    for (const [path, item] of Object.entries<Json>(doc.paths)) {
      for (const [method, op] of Object.entries<Json>(item)) {
        if (op.security?.length)
          for (const status of ['401', '429', '503']) assert.ok(op.responses[status], `${method} ${path} ${status}`);
      }
    }
  },
);

Schema(
  'every route answers as documented: 2xx, 3xx and errors of each, bodies validated against their schemas',
  async () => {
    const auth = (token: string) => ({ token });
    await sample('GET', '/');
    await sample('GET', '/api/', auth(alice));
    await sample('GET', '/healthz');
    await sample('GET', '/readyz');
    await sample('GET', '/api/schema/');
    await sample('GET', '/api/docs/');
    await sample('GET', '/api/docs/swagger-ui.css');
    await sample('GET', '/api/docs/nothing.js');
    await sample('OPTIONS', '/api/tasks/');
    await sample('OPTIONS', '/healthz');

    const created = await sample('POST', '/api/tasks/', {
      ...auth(alice),
      body: { title: 'Write the docs', description: 'typed' },
      headers: { 'Idempotency-Key': 'k-1' },
    });
    const task = created.body;
    await sample('POST', '/api/tasks/', {
      ...auth(alice),
      body: { title: 'Write the docs', description: 'typed' },
      headers: { 'Idempotency-Key': 'k-1' },
    });
    await sample('POST', '/api/tasks/', {
      ...auth(alice),
      body: { title: 'Other' },
      headers: { 'Idempotency-Key': 'k-1' },
    });
    for (let i = 0; i < 3; i += 1)
      await sample('POST', '/api/tasks/', { ...auth(bob), body: { title: `Bob ${i}`, completed: i === 0 } });
    await sample('POST', '/api/tasks/', { ...auth(alice), body: { title: '' } });
    await sample('POST', '/api/tasks/', { ...auth(alice), raw: '{"title": "x"}' });
    await sample('POST', '/api/tasks/', { body: { title: 'anonymous' } });
    await sample('GET', '/api/tasks/', { token: 'f'.repeat(64) });
    await sample('GET', '/api/tasks/', { headers: { Accept: 'text/html' } });

    for (const query of [
      '',
      '?page=2&page_size=2',
      '?page=last',
      '?limit=2&offset=1',
      '?cursor=&page_size=2',
      '?ordering=-id',
      '?page=9',
      '?cursor=nope',
      '?page_size=0',
      '?cursor=&page=1',
    ]) {
      await sample('GET', `/api/tasks/${query}`);
    }
    const cursorPage = await sample('GET', '/api/tasks/?cursor=&page_size=2');
    await sample('GET', new URL(cursorPage.body.next).pathname + new URL(cursorPage.body.next).search);
    const list = await sample('GET', '/api/tasks/');
    await sample('GET', '/api/tasks/', { headers: { 'If-None-Match': list.headers.get('etag')! } });

    const path = `/api/tasks/${task.id}/`;
    const one = await sample('GET', path);
    await sample('GET', path, { headers: { 'If-None-Match': one.headers.get('etag')! } });
    await sample('GET', path, { headers: { 'If-Match': '"999-1"' } });
    await sample('GET', '/api/tasks/999999/');
    await sample('PATCH', path, {
      ...auth(alice),
      body: { completed: true },
      headers: { 'If-Match': one.headers.get('etag')! },
    });
    await sample('PATCH', path, {
      ...auth(alice),
      body: { completed: false },
      headers: { 'If-Match': one.headers.get('etag')! },
    });
    await sample('PATCH', path, { ...auth(bob), body: { completed: false } });
    await sample('PUT', path, { ...auth(alice), body: { title: 'Replaced' } });
    await sample('PUT', path, { ...auth(alice), body: { title: 'x'.repeat(201) } });
    await sample('GET', `${path}events/`);
    await sample('GET', `${path}events/?cursor=&ordering=-version`);
    await sample('GET', `${path}events/?limit=1&offset=1`);
    await sample('GET', '/api/tasks/999999/events/');
    await sample('DELETE', path, auth(bob));
    await sample('DELETE', path, auth(alice));
    await sample('DELETE', path, auth(alice));

    await sample('GET', '/api/tasks/stats/');
    await sample('GET', '/api/tasks/stats/?owner=bob');
    await sample('GET', '/api/rate-limits/');
    await sample('GET', '/api/events/?after=1&limit=3', auth(alice));
    await sample('GET', '/api/events/?after=-1', auth(alice));
    await sample('GET', '/api/events/');

    const report = await sample('POST', '/api/reports/', {
      ...auth(alice),
      body: { from: '2026-11-01', to: '2026-11-30' },
    });
    await sample('POST', '/api/reports/', {
      ...auth(alice),
      body: { from: '2026-11-30', to: '2026-11-01', owner: 'bob' },
    });
    await sample('POST', '/api/reports/', { ...auth(alice), body: { from: '2026-11-01', to: '2026-11-02' } });
    await sample('GET', `/api/reports/${report.body.id}/`, auth(alice));
    await sample('GET', `/api/reports/${report.body.id}/`, auth(bob));
    await sample('GET', '/api/reports/', auth(alice));
    await sample('GET', '/api/reports/?cursor=', auth(alice));

    await sample('POST', '/api/auth/token/', { body: { username: 'alice', password: 'alice-pass-123' } });
    await sample('POST', '/api/auth/token/', { body: { username: 'alice', password: 'wrong' } });
    await sample('DELETE', '/api/auth/token/', auth(bob));
    await sample('DELETE', '/api/auth/token/', auth(bob));

    const filled = { id: String(created.body.id), file: 'swagger-ui.css' };
    for (const template of Object.keys(doc.paths)) {
      const concrete = template.replace(/\{(\w+)\}/g, (_, name: 'id' | 'file') =>
        template.startsWith('/api/reports/') ? report.body.id : filled[name],
      );
      await sample('OPTIONS', concrete, auth(alice));
    }

    // Every operation answered at least once as it does when it succeeds, and each kind of error.
    const operations = Object.entries<Json>(doc.paths).flatMap(([path, item]) =>
      Object.keys(item).map((method) => `${method} ${path}`),
    );
    for (const operation of operations)
      assert.ok(
        [...checked].some((c) => c.startsWith(`${operation} `) && /^[23]/.test(c.slice(operation.length + 1))),
        `no 2xx/3xx sample of ${operation}`,
      );
    for (const status of ['304', '400', '401', '403', '404', '406', '412', '415', '422', '429'])
      assert.ok(
        [...checked].some((c) => c.endsWith(` ${status}`)),
        `no ${status} sample`,
      );
  },
);

Schema.run();
