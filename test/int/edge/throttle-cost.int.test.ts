import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from '../../helpers/app.js';
import { request, type TestResponse } from '../../helpers/http.js';

// docs/throttling.md "Cost: requests that weigh more" over HTTP, against the real app and Redis: a page of 500 rows
// costs 5 units of anon's 10/min (MAX_PAGE_SIZE=500), a report 4 of reports' 6/min (THROTTLE_COSTS); the RateLimit
// fields and GET /api/rate-limits/ count units, and a request that costs more than its limit is refused at once,
// with a message that says so and no Retry-After, from the app and from memory before it.

const REPORT = { from: '2026-11-01', to: '2026-11-02' };
const test = suite('request costs over HTTP (anon 10/min; pages of up to 500 rows; reports=4 of 6/min)');
let app: TestApp;

const page = (ip: string, size?: number, headers: Record<string, string> = {}) =>
  request(app.base, 'GET', `/api/tasks/${size === undefined ? '' : `?page_size=${size}`}`, {
    headers: { 'X-Forwarded-For': ip, ...headers },
  });

/** The RateLimit field's `r`, and whether its `t` is within a few seconds of `seconds` (a loaded host is slow). */
function stateOf(response: TestResponse, seconds: number): [number, boolean] {
  const match = /^"anon";r=(\d+);t=(\d+)$/.exec(response.headers.get('ratelimit') ?? '');
  return [Number(match?.[1] ?? -1), match !== null && Math.abs(Number(match[2]) - seconds) <= 3];
}

function fields(response: TestResponse): [number, string | null, string | null, string | null] {
  return [
    response.status,
    response.headers.get('ratelimit-policy'),
    response.headers.get('ratelimit'),
    response.headers.get('retry-after'),
  ];
}

test.before(async () => {
  app = await startTestApp(
    {
      TRUST_PROXY_HOPS: '1',
      THROTTLE_ANON: '10/min',
      THROTTLE_REPORTS: '6/min',
      THROTTLE_COSTS: 'reports=4',
      MAX_PAGE_SIZE: '1500',
    },
    'throttle-cost',
  );
});
test.after(() => app?.close());

test('RateLimit counts units: a page of 500 rows takes 5, a plain page 1, and a 429 waits for enough', async () => {
  const ip = '198.51.100.31';
  const policy = '"anon";q=10;w=60';
  assert.equal(fields(await page(ip, 500)), [200, policy, '"anon";r=5;t=60', null], 'a page of 500 rows costs 5');
  const plain = await page(ip);
  assert.equal([plain.status, ...stateOf(plain, 60)], [200, 4, true], 'a page of 10 rows costs 1');
  const hundred = await page(ip, 100);
  assert.equal([hundred.status, ...stateOf(hundred, 60)], [200, 3, true], 'a page of 100 rows costs 1');
  const refused = await page(ip, 401);
  assert.is(refused.status, 429, 'a page of 401 rows costs 5: 3 units left do not make it');
  assert.is(refused.headers.get('ratelimit'), `"anon";r=3;t=${refused.headers.get('retry-after')}`);
  const seconds = Number(refused.headers.get('retry-after'));
  assert.ok(seconds >= 59 && seconds <= 60, `it waits for the first page's 5 units: ${seconds} s`);
  assert.equal(refused.body, { detail: `Request was throttled. Expected available in ${seconds} seconds.` });
  const again = await page(ip, 401);
  assert.equal([again.status, stateOf(again, seconds)[0]], [429, 3], 'refused again, from memory: 3 units left');
  const smaller = await page(ip, 300);
  assert.equal([smaller.status, ...stateOf(smaller, 60)], [200, 0, true], 'a page of 300 rows (3 units) still fits');
});

test('GET /api/rate-limits/ reports the budget in units', async () => {
  const ip = '198.51.100.32';
  assert.is((await page(ip, 500)).status, 200);
  const listed = await request(app.base, 'GET', '/api/rate-limits/', { headers: { 'X-Forwarded-For': ip } });
  assert.is(listed.status, 200, listed.text);
  const anon = (listed.body as Array<Record<string, unknown>>).find((entry) => entry.scope === 'anon');
  assert.equal([anon?.rate, anon?.remaining], ['10/min', 4], 'the page took 5 units, this read 1: 4 left');
});

test('a request that costs more than its limit is refused at once, saying so, with no Retry-After', async () => {
  const ip = '198.51.100.33';
  const cases = [
    ['a bad token: counted as anon by the app', { Authorization: 'Bearer not-a-token' }],
    ['no credentials: answered before the app', {}],
  ] as const;
  for (const [label, headers] of cases) {
    const over = await page(ip, 1500, headers);
    assert.equal(fields(over), [429, '"anon";q=10;w=60', null, null], label);
    assert.equal(over.body, { detail: 'Request costs 15 units; the limit is 10 per minute.' }, label);
  }
  const problem = await page(ip, 1100, { Accept: 'application/problem+json' });
  assert.is(problem.status, 429);
  assert.is(problem.headers.get('content-type'), 'application/problem+json');
  const body = JSON.parse(problem.text) as Record<string, unknown>;
  assert.equal(
    [body.detail, body['violated-policies'], body.policies, 'retry-after' in body],
    [
      'Request costs 11 units; the limit is 10 per minute.',
      ['anon'],
      [{ scope: 'anon', quota: 10, window: 60 }],
      false,
    ],
    'the quota-exceeded problem, with no retry-after',
  );
  assert.equal(fields(await page(ip, 1000)), [200, '"anon";q=10;w=60', '"anon";r=0;t=60', null], 'it spent nothing');
});

test("THROTTLE_COSTS gives a scope's route its cost: a report takes 4 of 6 units", async () => {
  const token = await app.login('costly');
  const report = () => request(app.base, 'POST', '/api/reports/', { token, body: REPORT });
  const first = await report();
  assert.equal([first.status, first.headers.get('ratelimit')], [202, '"reports";r=2;t=60'], first.text);
  const second = await report();
  assert.is(second.status, 429, 'a second report does not fit in 2 units');
  assert.is(second.headers.get('ratelimit'), `"reports";r=2;t=${second.headers.get('retry-after')}`);
});

test('the API document gives each guarded route its cost (x-rate-limit-cost)', async () => {
  const schema = await request(app.base, 'GET', '/api/schema/');
  assert.is(schema.status, 200, schema.text);
  const paths = schema.body.paths as Record<string, Record<string, Record<string, unknown>>>;
  const cost = (path: string, method: string) => paths[path]?.[method]?.['x-rate-limit-cost'];
  assert.equal(
    [cost('/api/tasks/', 'get'), cost('/api/reports/', 'post'), cost('/api/tasks/{id}/', 'get')],
    ['per request', 4, 1],
  );
});

test.run();
