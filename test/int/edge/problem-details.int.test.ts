import type { Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { createApi } from '../../../src/api/app.js';
import { answerEarlyRefusals } from '../../../src/listener/early-refusal.js';
import { createApiServer } from '../../../src/server/server.js';
import { startTestApp, type TestApp } from '../../helpers/app.js';
import { request } from '../../helpers/http.js';

// docs/api.md "Problem details": a client whose Accept asks for application/problem+json gets every error as
// RFC 9457 problem details (a throttle 429 as the RateLimit draft's quota-exceeded problem, from the app and
// before it), and every other client DRF's bytes as before. One app, served by a listener that tries the early
// refusal first and notes the requests it answered, as the production listener does.

const QUOTA_EXCEEDED = 'https://iana.org/assignments/http-problem-types#quota-exceeded';
const QUOTA_TITLE = 'Request cannot be satisfied as assigned quota has been exceeded';
const PROBLEM = 'application/problem+json';

let app: TestApp;
let server: Server | undefined;
let port = 0;
let token = '';
let validator: { validate(name: string, body: unknown): string | undefined };
/** The X-Request-Id of each request the early refusal answered. */
const answeredEarly: string[] = [];

/** A raw answer: its status line, header lines in order, and body. */
interface RawAnswer {
  head: string[];
  body: string;
}

/** Sends `text` on a new connection and reads one answer (its headers, then Content-Length bytes). */
function exchange(text: string): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(text));
    let received = Buffer.alloc(0);
    const deadline = setTimeout(() => fail(new Error('no whole answer within 10 s')), 10_000);
    const fail = (error: Error) => {
      clearTimeout(deadline);
      socket.destroy();
      reject(error);
    };
    socket.on('error', fail);
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      const end = received.indexOf('\r\n\r\n');
      if (end === -1) return;
      const head = received.subarray(0, end).toString('latin1').split('\r\n');
      const length = Number(/^content-length: (\d+)$/im.exec(head.join('\n'))?.[1] ?? 0);
      const body = received.subarray(end + 4);
      if (body.length < length) return;
      clearTimeout(deadline);
      socket.destroy();
      resolve({ head, body: body.toString('utf8') });
    });
  });
}

/** A request's text: its method and path, headers (`Accept`, `X-Forwarded-For`...) and an optional JSON body. */
function requestOf(method: string, path: string, headers: Record<string, string>, body = ''): string {
  const lines = [`${method} ${path} HTTP/1.1`, 'Host: 127.0.0.1', 'Connection: close'];
  for (const [name, value] of Object.entries(headers)) lines.push(`${name}: ${value}`);
  if (body) lines.push('Content-Type: application/json', `Content-Length: ${Buffer.byteLength(body)}`);
  return `${lines.join('\r\n')}\r\n\r\n${body}`;
}

const field = (answer: RawAnswer, name: string) =>
  answer.head.find((line) => line.toLowerCase().startsWith(`${name.toLowerCase()}: `))?.slice(name.length + 2);

/** Field names in order, with the values of those that do not vary between two answers of one refusal. */
const shape = (answer: RawAnswer) =>
  answer.head.map((line) =>
    /^(date|x-request-id|retry-after|ratelimit|content-\w+): /i.test(line) ? line.split(':')[0] : line,
  );

/** Spends the anon budget (2) of `ip` and returns the 429 Redis refused it with, through the app. */
async function spend(ip: string, accept?: string): Promise<RawAnswer> {
  const headers = { 'X-Forwarded-For': ip, 'X-Request-Id': `${ip}-spend` };
  for (let i = 0; i < 2; i++)
    assert.is((await exchange(requestOf('GET', '/api/tasks/', headers))).head[0], 'HTTP/1.1 200 OK');
  const refused = await exchange(requestOf('GET', '/api/tasks/', accept ? { ...headers, Accept: accept } : headers));
  assert.is(refused.head[0], 'HTTP/1.1 429 Too Many Requests', refused.body);
  assert.not.ok(answeredEarly.includes(`${ip}-spend`), 'the first refusal is Redis’s, through the app');
  return refused;
}

/** The quota-exceeded problem of a 429, every member checked against its fields. */
function assertQuotaExceeded(answer: RawAnswer, policies: unknown[], label: string): void {
  assert.is(answer.head[0], 'HTTP/1.1 429 Too Many Requests', label);
  assert.is(field(answer, 'Content-Type'), PROBLEM, label);
  assert.is(Number(field(answer, 'Content-Length')), Buffer.byteLength(answer.body), label);
  const problem = JSON.parse(answer.body) as Record<string, unknown>;
  const seconds = Number(field(answer, 'Retry-After'));
  assert.ok(seconds >= 1, `${label}: Retry-After`);
  const unit = seconds === 1 ? 'second' : 'seconds';
  assert.equal(
    problem,
    {
      type: QUOTA_EXCEEDED,
      title: QUOTA_TITLE,
      status: 429,
      detail: `Request was throttled. Expected available in ${seconds} ${unit}.`,
      'violated-policies': policies.map((policy) => (policy as { scope: string }).scope),
      policies,
      'retry-after': seconds,
    },
    label,
  );
  assert.is(validator.validate('QuotaExceeded', problem), undefined, `${label}: as the API document describes it`);
}

const test = suite('errors as RFC 9457 problem details for a client that asks, DRF’s bytes for the rest');

test.before(async () => {
  app = await startTestApp(
    { THROTTLE_ANON: '2/hour', TRUST_PROXY_HOPS: '1', THROTTLE_CONCURRENCY: 'user=1' },
    'problem-details',
  );
  token = await app.login('alice');
  const { app: koa, lookup, allowOf, recorder } = createApi(app.deps);
  const answerEarly = answerEarlyRefusals({ lookup, allowOf, recorder });
  const handle = koa.callback();
  server = createApiServer(app.deps.config, (req, res) => {
    if (answerEarly(req, res)) answeredEarly.push(String(req.headers['x-request-id']));
    else void handle(req, res);
  });
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
  const doc = (await request(app.base, 'GET', '/api/schema/')).body as Record<string, unknown>;
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  (addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020)(ajv);
  ajv.addSchema(doc, 'openapi');
  validator = {
    validate(name, body) {
      const validate = ajv.getSchema(`openapi#/components/schemas/${name}`)!;
      return validate(body) ? undefined : ajv.errorsText(validate.errors);
    },
  };
});

test.after(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
  await app?.close();
});

test('a 429 from Redis and one answered before the app: the quota-exceeded problem, retry-after as Retry-After', async () => {
  const ip = '198.51.100.71';
  const policies = [{ scope: 'anon', quota: 2, window: 3600 }];
  const fromRedis = await spend(ip, PROBLEM);
  assertQuotaExceeded(fromRedis, policies, 'refused by Redis');
  assert.is(field(fromRedis, 'RateLimit-Policy'), '"anon";q=2;w=3600');

  const accepts = [PROBLEM, 'application/json, application/problem+json', 'Application/Problem+JSON;q=0.9, */*;q=0.1'];
  for (const [i, accept] of accepts.entries()) {
    const id = `${ip}-early-${i}`;
    const early = await exchange(
      requestOf('GET', '/api/tasks/', { 'X-Forwarded-For': ip, 'X-Request-Id': id, Accept: accept }),
    );
    assert.ok(answeredEarly.includes(id), `${accept}: answered before the app`);
    assertQuotaExceeded(early, policies, `before the app, Accept: ${accept}`);
    assert.equal(shape(early), shape(fromRedis), `${accept}: the same fields as the app's`);
  }
});

test('the default 429, 400 and 404 are DRF’s bytes, whatever Accept does not ask for problem details', async () => {
  const ip = '198.51.100.72';
  const fromRedis = await spend(ip);
  const problem = await exchange(requestOf('GET', '/api/tasks/', { 'X-Forwarded-For': ip, Accept: PROBLEM }));
  const asDrf = [undefined, 'application/json', '*/*', 'application/json, application/problem+json;q=0.5'];
  const drfBytes = (answer: RawAnswer, label: string) => {
    const seconds = Number(field(answer, 'Retry-After'));
    const unit = seconds === 1 ? 'second' : 'seconds';
    assert.is(answer.body, `{"detail":"Request was throttled. Expected available in ${seconds} ${unit}."}`, label);
    assert.is(field(answer, 'Content-Type'), 'application/json; charset=utf-8', label);
    assert.is(field(answer, 'Content-Length'), String(Buffer.byteLength(answer.body)), label);
    assert.equal(shape(answer), shape(problem), `${label}: the same fields as problem details, in order`);
  };
  drfBytes(fromRedis, 'refused by Redis');
  for (const accept of asDrf) {
    const headers: Record<string, string> = { 'X-Forwarded-For': ip, ...(accept ? { Accept: accept } : {}) };
    drfBytes(await exchange(requestOf('GET', '/api/tasks/', headers)), `429, Accept: ${accept ?? 'none'}`);
  }

  const auth = { Authorization: `Bearer ${token}` };
  for (const accept of asDrf) {
    const headers: Record<string, string> = { ...auth, ...(accept ? { Accept: accept } : {}) };
    const invalid = await exchange(requestOf('POST', '/api/tasks/', headers, '{}'));
    assert.is(invalid.head[0], 'HTTP/1.1 400 Bad Request', invalid.body);
    assert.is(invalid.body, '{"title":["This field is required."]}', `400, Accept: ${accept ?? 'none'}`);
    assert.is(field(invalid, 'Content-Type'), 'application/json; charset=utf-8');
    const missing = await exchange(requestOf('GET', '/api/tasks/99999/', headers));
    assert.is(missing.head[0], 'HTTP/1.1 404 Not Found', missing.body);
    assert.is(missing.body, '{"detail":"Not found."}', `404, Accept: ${accept ?? 'none'}`);
    assert.is(field(missing, 'Content-Type'), 'application/json; charset=utf-8');
  }
});

test('a 400 with field errors keeps them as `errors`; a 404 and a 401 are about:blank with DRF’s detail', async () => {
  const auth = { Authorization: `Bearer ${token}`, Accept: 'application/json, application/problem+json' };
  const invalid = await exchange(requestOf('POST', '/api/tasks/', auth, '{"title":""}'));
  assert.is(invalid.head[0], 'HTTP/1.1 400 Bad Request', invalid.body);
  assert.is(field(invalid, 'Content-Type'), PROBLEM);
  const errors = { title: ['This field may not be blank.'] };
  const body = { type: 'about:blank', title: 'Bad Request', status: 400, detail: 'Invalid input.', errors };
  assert.equal(JSON.parse(invalid.body), body);
  assert.is(validator.validate('Problem', JSON.parse(invalid.body)), undefined);

  const missing = await exchange(requestOf('GET', '/api/tasks/99999/', auth));
  assert.is(missing.head[0], 'HTTP/1.1 404 Not Found', missing.body);
  assert.is(field(missing, 'Content-Type'), PROBLEM);
  assert.equal(JSON.parse(missing.body), {
    type: 'about:blank',
    title: 'Not Found',
    status: 404,
    detail: 'Not found.',
  });
  assert.ok(field(missing, 'Allow')?.endsWith('OPTIONS'), 'Allow, as on every answer of the path');

  const unknown = await exchange(
    requestOf('GET', '/nowhere/', { Accept: PROBLEM, 'X-Forwarded-For': '198.51.100.73' }),
  );
  assert.is(unknown.head[0], 'HTTP/1.1 404 Not Found', unknown.body);
  assert.is(JSON.parse(unknown.body).detail, 'Not found.');

  const anonymous = await exchange(
    requestOf('POST', '/api/tasks/', { Accept: auth.Accept, 'X-Forwarded-For': '198.51.100.74' }, '{}'),
  );
  assert.is(anonymous.head[0], 'HTTP/1.1 401 Unauthorized', anonymous.body);
  assert.is(field(anonymous, 'WWW-Authenticate'), 'Bearer realm="api"');
  const notProvided = 'Authentication credentials were not provided.';
  assert.equal(JSON.parse(anonymous.body), {
    type: 'about:blank',
    title: 'Unauthorized',
    status: 401,
    detail: notProvided,
  });
});

test('Accept with problem details only, on a JSON route: 406 as problem details; listed beside JSON, 200 JSON', async () => {
  const only = await exchange(requestOf('GET', '/api/tasks/', { Authorization: `Bearer ${token}`, Accept: PROBLEM }));
  assert.is(only.head[0], 'HTTP/1.1 406 Not Acceptable', only.body);
  assert.is(field(only, 'Content-Type'), PROBLEM);
  const detail = 'Could not satisfy the request Accept header.';
  assert.equal(JSON.parse(only.body), { type: 'about:blank', title: 'Not Acceptable', status: 406, detail });

  const both = await exchange(
    requestOf('GET', '/api/tasks/', {
      Authorization: `Bearer ${token}`,
      Accept: 'application/json, application/problem+json',
    }),
  );
  assert.is(both.head[0], 'HTTP/1.1 200 OK', both.body);
  assert.is(field(both, 'Content-Type'), 'application/json; charset=utf-8');
  assert.ok(Array.isArray(JSON.parse(both.body).results));
});

test('a concurrency 429: the quota-exceeded problem of the concurrent-requests policy', async () => {
  const uploader = await app.login('uploader');
  // A POST whose body never arrives in full holds the user's one slot until the socket goes.
  const upload = connect(port, '127.0.0.1');
  upload.on('error', () => {});
  upload.write(
    `POST /api/tasks/ HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${uploader}\r\n` +
      'Content-Type: application/json\r\nContent-Length: 64\r\n\r\n{"title": ',
  );
  try {
    const list = () =>
      exchange(requestOf('GET', '/api/tasks/', { Authorization: `Bearer ${uploader}`, Accept: PROBLEM }));
    let refused = await list();
    for (let i = 0; i < 50 && !refused.head[0]!.includes(' 429 '); i += 1) {
      await sleep(100);
      refused = await list();
    }
    assertQuotaExceeded(refused, [{ scope: 'user:concurrent', quota: 1, 'quota-unit': 'concurrent-requests' }], 'slot');
    assert.is(field(refused, 'Retry-After'), '1');
    assert.is(field(refused, 'RateLimit'), '"user:concurrent";r=0');
  } finally {
    upload.destroy();
  }
});

test.run();
