import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { createUser } from '../../../src/auth/users.repository.js';
import { startTestApp, type TestApp } from '../../helpers/app.js';
import { request, type TestResponse } from '../../helpers/http.js';
import { parseMetrics, sumOf } from '../../helpers/metrics.js';

// docs/security.md "Login CPU budget": password hashes of logins (real and decoy) run at most
// LOGIN_HASH_CONCURRENCY at once per process; a login that waits past LOGIN_HASH_WAIT_MS is
// answered 503 with Retry-After, never 500; known and unknown names are answered alike; IPv6
// login attempts share the token-obtain budget per LOGIN_IPV6_PREFIX. Against the real app,
// PostgreSQL and Redis, with client addresses varied through a trusted proxy.

const PASSWORD = 'the-right-password';
const BAD_LOGIN = { non_field_errors: ['Unable to log in with provided credentials.'] };
const PROXIED = { TRUST_PROXY_HOPS: '1', TRUSTED_PROXIES: '127.0.0.1,::1' };

function attempt(app: TestApp, username: string, password: string, ip: string): Promise<TestResponse> {
  return request(app.base, 'POST', '/api/auth/token/', {
    body: { username, password },
    headers: { 'X-Forwarded-For': ip },
  });
}

/** Everything a client receives but the Date and request id: status, each header, the body bytes. */
function received(response: TestResponse): string {
  const headers = [...response.headers.entries()]
    .filter(([name]) => name !== 'date' && name !== 'x-request-id')
    .map(([n, v]) => `${n}: ${v}`);
  return [String(response.status), ...headers, '', response.text].join('\n');
}

async function metric(app: TestApp, name: string): Promise<number> {
  return sumOf(parseMetrics(await app.deps.metrics.registry.metrics()), name);
}

const Bound = suite('at most LOGIN_HASH_CONCURRENCY=2 hashes at once, however many logins arrive together');
let bound: TestApp;

Bound.before(async () => {
  bound = await startTestApp({ ...PROXIED, LOGIN_HASH_CONCURRENCY: '2', LOGIN_HASH_WAIT_MS: '60000' }, 'login-bound');
  await createUser(bound.deps.db, 'alice', PASSWORD);
});
Bound.after(() => bound?.close());

Bound(
  '24 logins at once (right, wrong and unknown names): each answered as if alone, never more than 2 hashing',
  async () => {
    const names = Array.from({ length: 24 }, (_, i) => (i % 3 === 0 ? 'alice' : i % 3 === 1 ? 'alice' : `ghost-${i}`));
    const answers = await Promise.all(
      names.map((name, i) => attempt(bound, name, i % 3 === 0 ? PASSWORD : 'wrong', `198.51.100.${i + 1}`)),
    );
    answers.forEach((answer, i) => {
      if (i % 3 === 0) assert.is(answer.status, 200, `attempt ${i}: ${answer.text}`);
      else assert.equal([answer.status, answer.body], [400, BAD_LOGIN], `attempt ${i}`);
    });
    const peak = await metric(bound, 'paceline_login_hashes_in_flight_peak');
    assert.ok(peak >= 1 && peak <= 2, `the most hashes run at once: ${peak}`);
    assert.is(await metric(bound, 'paceline_login_hashes_in_flight'), 0);
    assert.is(await metric(bound, 'paceline_login_hashes_waiting'), 0);
    assert.is(await metric(bound, 'paceline_login_hash_refused_total'), 0);
    assert.ok((await metric(bound, 'paceline_login_hash_seconds_total')) > 0, 'hashing time is counted');
    // The login budget's remaining count differs only because alice was named more often.
    const [wrong, unknown] = [answers[1]!, answers[2]!].map((a) => received(a).replace(/"login";r=\d+/, ''));
    assert.is(unknown, wrong, 'a wrong password and an unknown name get the same answer');
  },
);

const Flood = suite('a flood past LOGIN_HASH_WAIT_MS is answered 503 with Retry-After, known and unknown names alike');
let flood: TestApp;

Flood.before(async () => {
  flood = await startTestApp({ ...PROXIED, LOGIN_HASH_CONCURRENCY: '1', LOGIN_HASH_WAIT_MS: '1' }, 'login-flood');
  await createUser(flood.deps.db, 'bob', PASSWORD);
});
Flood.after(() => flood?.close());

Flood('40 logins at once with one slot and no time to wait: the rest are 503, none is 500', async () => {
  const answers = await Promise.all(
    Array.from({ length: 40 }, (_, i) => attempt(flood, i % 2 ? 'bob' : `nobody-${i}`, 'wrong', `203.0.113.${i + 1}`)),
  );
  const statuses = answers.map((a) => a.status);
  assert.ok(
    statuses.every((s) => s === 400 || s === 503),
    `only 400 (checked) or 503 (no slot): ${statuses.join(',')}`,
  );
  const busy = answers.filter((a) => a.status === 503);
  assert.ok(busy.length > 0, 'some found no slot');
  assert.ok(busy.length < 40, 'the first always has one');
  const bodies = new Set(busy.map((a) => `${a.headers.get('retry-after')} ${a.text}`));
  assert.equal(
    [...bodies],
    [`1 ${JSON.stringify({ detail: 'Too many logins are being checked right now. Try again shortly.' })}`],
  );
  assert.ok(
    busy.some((_, i) => answers.indexOf(busy[i]!) % 2 === 1),
    'a known name is refused as an unknown one',
  );
  assert.is(await metric(flood, 'paceline_login_hash_refused_total'), busy.length);
  assert.is(await metric(flood, 'paceline_login_hashes_in_flight_peak'), 1);

  const later = await attempt(flood, 'bob', PASSWORD, '203.0.113.200');
  assert.is(later.status, 200, `once the flood is over, a login goes through: ${later.text}`);
});

const Ipv6 = suite('IPv6 login attempts share the per-address budget by /56 (token-obtain 2/min)');
let v6: TestApp;

Ipv6.before(async () => {
  v6 = await startTestApp({ ...PROXIED, THROTTLE_TOKEN_OBTAIN: '2/min' }, 'login-ipv6');
});
Ipv6.after(() => v6?.close());

Ipv6('two /64s of one /56 share one budget; another /56 has its own', async () => {
  const first = await attempt(v6, 'ghost-a', 'x', '2001:db8:0:100::1');
  const second = await attempt(v6, 'ghost-b', 'x', '2001:db8:0:1ff::1');
  assert.equal([first.status, second.status], [400, 400]);
  const third = await attempt(v6, 'ghost-c', 'x', '2001:db8:0:1ab:1:2:3:4');
  assert.is(third.status, 429, `a third /64 of the same /56 is over the budget: ${third.text}`);
  const other = await attempt(v6, 'ghost-d', 'x', '2001:db8:0:200::1');
  assert.is(other.status, 400, `another /56 is counted apart: ${other.text}`);
  assert.match(other.headers.get('ratelimit') ?? '', /^"token-obtain";r=1;/);
});

Ipv6('anonymous browsing is still counted per /64', async () => {
  const anon = await startTestApp({ ...PROXIED, THROTTLE_ANON: '1/min' }, 'login-ipv6-anon');
  try {
    const get = (ip: string) => request(anon.base, 'GET', '/api/tasks/', { headers: { 'X-Forwarded-For': ip } });
    assert.is((await get('2001:db8:0:100::1')).status === 429, false);
    assert.is((await get('2001:db8:0:1ff::1')).status === 429, false, 'another /64 of the /56 has its own budget');
    assert.is((await get('2001:db8:0:100::2')).status, 429, 'the same /64 again is over');
  } finally {
    await anon.close();
  }
});

Bound.run();
Flood.run();
Ipv6.run();
