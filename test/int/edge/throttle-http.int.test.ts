// Load: 1.5 (four scopes with 2-second windows: each scope's requests must land within a second of its first)
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { issueToken } from '../../../src/auth/tokens.js';
import { createUser } from '../../../src/auth/users.repository.js';
import { scopeRules } from '../../../src/api/app.js';
import { createGuard } from '../../../src/edge/guard.js';
import { defineOperation, route } from '../../../src/api/openapi/operation.js';
import type { Routes } from '../../../src/api/router.js';
import { startTestApp, type TestApp } from '../../helpers/app.js';
import { request, type TestResponse } from '../../helpers/http.js';

// docs/architecture.md "Throttling" over HTTP, against the real app and Redis: every scope admits exactly its N, answers
// the exact 429, and admits exactly one more after Retry-After; budgets are separate; bad
// credentials, 401s and 404s-to-be are counted before they are answered; X-Forwarded-For only
// counts when proxies are trusted; health endpoints are never throttled.

const REPORT = { from: '2026-11-01', to: '2026-11-02' };

interface Client {
  ip?: string;
  token?: string;
  headers?: Record<string, string>;
}

function send(app: TestApp, method: string, path: string, client: Client = {}, body?: unknown): Promise<TestResponse> {
  const headers = { ...client.headers, ...(client.ip ? { 'X-Forwarded-For': client.ip } : {}) };
  return request(app.base, method, path, { headers, token: client.token, body });
}

async function tokenFor(app: TestApp, username: string): Promise<string> {
  await createUser(app.deps.db, username, 'a-long-password');
  const issued = await issueToken(app.deps.db, username, 'a-long-password', 3_600_000, new Date());
  return issued!.token;
}

/**
 * The RateLimit fields, less the trailing member of the `login` scope that a login attempt naming
 * a user also carries (its budget per username is tested in login-limits.int.test.ts).
 */
function assertFields(response: TestResponse, policy: string, state: string, label: string): void {
  const withoutLogin = (value: string | null) => value?.replace(/, "login";[^,]*$/, '') ?? null;
  assert.is(withoutLogin(response.headers.get('ratelimit-policy')), policy, `${label}: RateLimit-Policy`);
  assert.is(withoutLogin(response.headers.get('ratelimit')), state, `${label}: RateLimit`);
}

/** The 429 of docs/architecture.md "Throttling" for `seconds`, with the RateLimit fields of an exhausted scope. */
function assertThrottled(response: TestResponse, scope: string, policy: string, seconds: number, label: string): void {
  assert.is(response.status, 429, `${label}: ${response.text}`);
  assert.is(response.headers.get('retry-after'), String(seconds), `${label}: Retry-After`);
  assert.ok(response.headers.get('content-type')?.startsWith('application/json'), label);
  assert.ok(response.headers.get('allow')?.endsWith('OPTIONS'), `${label}: Allow, as on DRF's 429`);
  const unit = seconds === 1 ? 'second' : 'seconds';
  assert.equal(response.body, { detail: `Request was throttled. Expected available in ${seconds} ${unit}.` }, label);
  assertFields(response, policy, `"${scope}";r=0;t=${seconds}`, label);
}

/**
 * One request at t≈0, the other N-1 at t≈1.05 s (window 2 s), so the wait after the N-th is in
 * (0, 1] s: Retry-After must be exactly 1. After waiting it, the first request has left the
 * window and the others have not: exactly one more is admitted.
 *
 * The round holds only if each request is answered in time: those up to the refusal before the first leaves the window
 * (t0 + 2 s), those after Retry-After before the others leave it (t0 + 3.05 s). A step that fails after its time is
 * not a throttle's decision but a slow host's: the round is run again once the window is empty, at most three times,
 * and a failure then names the late rounds it saw.
 */
async function admitsExactlyN(
  scope: string,
  limit: number,
  admittedStatus: number,
  attempt: () => Promise<TestResponse>,
) {
  const late: string[] = [];
  for (let round = 1; ; round += 1) {
    const t0 = performance.now();
    try {
      return await oneRound(scope, limit, admittedStatus, attempt, t0);
    } catch (error) {
      const lateBy = (error as { lateByMs?: number }).lateByMs;
      if (lateBy === undefined || round === 3) {
        if (late.length > 0 && error instanceof Error) error.message += ` (earlier rounds answered late: ${late})`;
        throw error;
      }
      late.push(`round ${round}: ${(error as Error).message.split('\n')[0]}, ${Math.round(lateBy)} ms past its time`);
      await sleep(2_100); // every entry of the round has left the window
    }
  }
}

async function oneRound(
  scope: string,
  limit: number,
  admittedStatus: number,
  attempt: () => Promise<TestResponse>,
  t0: number,
): Promise<void> {
  const policy = `"${scope}";q=${limit};w=2`;
  /** Runs one step's checks; a failure answered after `dueMs` (from t0) is marked late. */
  const step = (response: TestResponse, dueMs: number, check: () => void) => {
    const lateByMs = performance.now() - t0 - dueMs;
    try {
      check();
    } catch (error) {
      if (lateByMs > 0) Object.assign(error as object, { lateByMs });
      throw error;
    }
    return response;
  };
  const first = await attempt();
  step(first, 2_000, () => {
    assert.is(first.status, admittedStatus, `${scope} 1: ${first.text}`);
    assertFields(first, policy, `"${scope}";r=${limit - 1};t=2`, `${scope} 1`);
  });
  await sleep(1050);
  for (let i = 2; i <= limit; i += 1) {
    const admitted = await attempt();
    step(admitted, 2_000, () => {
      assert.is(admitted.status, admittedStatus, `${scope} ${i}: ${admitted.text}`);
      assertFields(admitted, policy, `"${scope}";r=${limit - i};t=1`, `${scope} ${i}`);
    });
  }
  const refused = await attempt();
  step(refused, 2_000, () => assertThrottled(refused, scope, policy, 1, `${scope} ${limit + 1}`));
  await sleep(1000 * Number(refused.headers.get('retry-after')));
  const again = await attempt();
  step(again, 3_050, () => {
    assert.is(again.status, admittedStatus, `${scope}: one more after Retry-After: ${again.text}`);
    assertFields(again, policy, `"${scope}";r=0;t=1`, `${scope} after Retry-After`);
  });
  const onlyOne = await attempt();
  step(onlyOne, 3_050, () => assertThrottled(onlyOne, scope, policy, 1, `${scope}: only one more`));
}

/** Sends `count` requests and returns their statuses. */
async function statuses(count: number, attempt: (i: number) => Promise<TestResponse>): Promise<number[]> {
  const seen: number[] = [];
  for (let i = 0; i < count; i += 1) seen.push((await attempt(i)).status);
  return seen;
}

const Proxied = suite(
  'throttling over HTTP behind one trusted proxy (3/2s anon, 4/2s user, 2/2s token-obtain and reports)',
);
let app: TestApp;

Proxied.before(async () => {
  app = await startTestApp(
    {
      TRUST_PROXY_HOPS: '1',
      THROTTLE_ANON: '3/2s',
      THROTTLE_USER: '4/2s',
      THROTTLE_TOKEN_OBTAIN: '2/2s',
      THROTTLE_REPORTS: '2/2s',
    },
    'throttle-http',
  );
});
Proxied.after(() => app?.close());

Proxied(
  'each scope admits exactly N, answers the exact 429, and admits exactly one more after Retry-After',
  async () => {
    const [user, reporter] = await Promise.all([tokenFor(app, 'uma'), tokenFor(app, 'rita')]);
    const login = { username: 'uma', password: 'wrong-password' };
    await Promise.all([
      admitsExactlyN('anon', 3, 200, () => send(app, 'GET', '/api/tasks/', { ip: '198.51.100.1' })),
      admitsExactlyN('user', 4, 200, () => send(app, 'GET', '/api/tasks/', { ip: '198.51.100.2', token: user })),
      admitsExactlyN('token-obtain', 2, 400, () =>
        send(app, 'POST', '/api/auth/token/', { ip: '198.51.100.3' }, login),
      ),
      admitsExactlyN('reports', 2, 202, () =>
        send(app, 'POST', '/api/reports/', { ip: '198.51.100.4', token: reporter }, REPORT),
      ),
    ]);
  },
);

Proxied('anon, user, token-obtain and reports budgets are separate', async () => {
  const [first, second] = await Promise.all([tokenFor(app, 'ulla'), tokenFor(app, 'ugo')]);
  const a = { ip: '198.51.100.11' };
  assert.equal(await statuses(4, () => send(app, 'GET', '/api/tasks/', a)), [200, 200, 200, 429], 'anon exhausted');
  const asUser = await send(app, 'GET', '/api/tasks/', { ...a, token: first });
  assert.is(asUser.status, 200, 'the same address, authenticated, counts as its user');
  assertFields(asUser, '"user";q=4;w=2', '"user";r=3;t=2', 'user');
  const login = await send(app, 'POST', '/api/auth/token/', a, { username: 'ulla', password: 'a-long-password' });
  assert.is(login.status, 200, 'the token endpoint does not draw on the exhausted anon budget');
  assertFields(login, '"token-obtain";q=2;w=2', '"token-obtain";r=1;t=2', 'token-obtain');

  const b = { ip: '198.51.100.12', token: second };
  assert.equal(
    await statuses(5, () => send(app, 'GET', '/api/tasks/', b)),
    [200, 200, 200, 200, 429],
    'user exhausted',
  );
  assertFields(
    await send(app, 'GET', '/api/tasks/', { ip: b.ip }),
    '"anon";q=3;w=2',
    '"anon";r=2;t=2',
    'anon from the same address',
  );
  const report = await send(app, 'POST', '/api/reports/', b, REPORT);
  assert.is(report.status, 202, 'reports has its own budget');
  assertFields(report, '"reports";q=2;w=2', '"reports";r=1;t=2', 'reports');

  const c = { ip: '198.51.100.13' };
  const wrong = { username: 'ulla', password: 'wrong-password' };
  assert.equal(
    await statuses(3, () => send(app, 'POST', '/api/auth/token/', c, wrong)),
    [400, 400, 429],
    'token-obtain exhausted',
  );
  assertFields(await send(app, 'GET', '/api/tasks/', c), '"anon";q=3;w=2', '"anon";r=2;t=2', 'anon after token-obtain');
});

Proxied('bad credentials count against anon before their 401; throttling comes before permission and 404', async () => {
  const ip = '198.51.100.21';
  const forged = await send(app, 'GET', '/api/tasks/', { ip, token: randomBytes(32).toString('hex') });
  assert.is(forged.status, 401);
  assert.equal(forged.body, { detail: 'Invalid token.' });
  assertFields(forged, '"anon";q=3;w=2', '"anon";r=2;t=2', 'invalid token');
  const empty = await send(app, 'GET', '/api/tasks/', { ip, headers: { Authorization: 'Bearer' } });
  assert.equal([empty.status, empty.body.detail], [401, 'Invalid token header. No credentials provided.']);
  assert.is(empty.headers.get('ratelimit'), '"anon";r=1;t=2');
  const write = await send(app, 'POST', '/api/tasks/', { ip }, { title: 'no' });
  assert.equal([write.status, write.body.detail], [401, 'Authentication credentials were not provided.']);
  assert.is(write.headers.get('ratelimit'), '"anon";r=0;t=2');

  for (const [method, path, client] of [
    ['GET', '/api/tasks/', { ip }],
    ['GET', '/api/tasks/', { ip, token: randomBytes(32).toString('hex') }],
    ['POST', '/api/tasks/', { ip }],
    ['GET', '/api/tasks/99999/', { ip }],
    // reports is keyed by user: without one, anon counts the request (else it would be a 401 here)
    ['POST', '/api/reports/', { ip }],
    ['POST', '/api/reports/', { ip, token: randomBytes(32).toString('hex') }],
  ] as const) {
    const response = await send(
      app,
      method,
      path,
      client,
      method === 'POST' ? (path === '/api/reports/' ? REPORT : { title: 'no' }) : undefined,
    );
    assert.is(response.status, 429, `${method} ${path} once anon is spent by 401s: ${response.text}`);
  }
});

Proxied('a request refused for its Accept header (406) is counted like any other', async () => {
  const ip = '198.51.100.25';
  const xml = { ip, headers: { Accept: 'application/xml' } };
  const refused = await send(app, 'GET', '/api/tasks/', xml);
  assert.equal([refused.status, refused.body], [406, { detail: 'Could not satisfy the request Accept header.' }]);
  assert.is(refused.headers.get('ratelimit'), '"anon";r=2;t=2');
  assert.equal(
    await statuses(3, () => send(app, 'GET', '/api/tasks/', xml)),
    [406, 406, 429],
    'a 406 does not bypass the budget',
  );
  assert.is((await send(app, 'GET', '/api/tasks/', { ip })).status, 429);
});

Proxied(
  'with TRUST_PROXY_HOPS=1 the address the proxy appended counts: rotating the rest does not help; IPv6 by /64',
  async () => {
    const rotating = (i: number) => send(app, 'GET', '/api/tasks/', { ip: `10.0.0.${i}, 198.51.100.31` });
    assert.equal(await statuses(4, rotating), [200, 200, 200, 429]);
    const sameSlash64 = ['2001:db8:31:1::1', '2001:db8:31:1:ffff::2', '2001:db8:31:1:1:2:3:4', '2001:db8:31:1::9'];
    assert.equal(
      await statuses(4, (i) => send(app, 'GET', '/api/tasks/', { ip: sameSlash64[i] })),
      [200, 200, 200, 429],
    );
    const other = await send(app, 'GET', '/api/tasks/', { ip: '2001:db8:31:2::1' });
    assert.is(other.status, 200, 'the next /64 has its own budget');
    assert.is(other.headers.get('ratelimit'), '"anon";r=2;t=2');
  },
);

Proxied(
  'health and readiness are never throttled and carry no RateLimit fields; unknown paths are plain 404s',
  async () => {
    assert.equal(
      await statuses(4, () => send(app, 'GET', '/api/tasks/')),
      [200, 200, 200, 429],
      'the socket address is spent',
    );
    for (const path of ['/healthz', '/readyz']) {
      for (let i = 0; i < 10; i += 1) {
        const response = await send(app, 'GET', path);
        assert.is(response.status, 200, `${path} #${i + 1}`);
        assert.is(response.headers.get('ratelimit'), null, path);
        assert.is(response.headers.get('ratelimit-policy'), null, path);
      }
    }
    const unknown = await send(app, 'GET', '/nope');
    assert.is(unknown.status, 404);
    assert.is(unknown.headers.get('ratelimit'), null);
  },
);

Proxied('a route naming a scope that has no rate fails where it is declared, not on its first request', () => {
  const guard = createGuard(app.deps, scopeRules(app.deps.config));
  assert.throws(() => guard({ scope: 'exports' }), /throttle scope "exports" is not configured/);
  assert.type(guard({ scope: 'reports' }), 'function');
});

const Declared = suite('a scope declared where its route is declared');

Declared('one line gives an expensive endpoint its own budget; THROTTLE_RATES overrides its default', async () => {
  // A feature's route with its operation and the guard that declares the scope in one line.
  const resourceAt = (path: string, declare: Parameters<ReturnType<typeof createGuard>>[0]): Routes => {
    const operation = defineOperation({
      method: 'get',
      path,
      operationId: path,
      summary: path,
      tag: 'features',
      access: 'required',
      responses: { 200: { description: 'ok' } },
    });
    return (router, { guard }) =>
      route(router, operation, guard(declare), (ctx) => {
        ctx.body = { ok: true };
      });
  };
  const exportsRoute = resourceAt('/api/exports/', { scope: 'exports', rate: '2/min', keyedBy: 'user' });
  const searchRoute = resourceAt('/api/search/', { scope: 'search', rate: '50/min' });
  const declared = await startTestApp({ THROTTLE_RATES: 'search=1/min' }, 'throttle-declared', {
    routes: [exportsRoute, searchRoute],
  });
  try {
    const token = await declared.login('dora');
    const exportsStatuses = [];
    for (let i = 0; i < 3; i += 1)
      exportsStatuses.push((await request(declared.base, 'GET', '/api/exports/', { token })).status);
    assert.equal(exportsStatuses, [200, 200, 429], 'the default rate of the declaration applies');
    const general = await request(declared.base, 'GET', '/api/tasks/', { token });
    assert.is(general.status, 200, 'the general user budget is untouched');
    const search = [];
    for (let i = 0; i < 2; i += 1) search.push(await request(declared.base, 'GET', '/api/search/', { token }));
    assert.equal(
      search.map((r) => r.status),
      [200, 429],
      'THROTTLE_RATES overrides the declared default',
    );
    assert.is(search[0]!.headers.get('ratelimit-policy'), '"search";q=1;w=60');
    const table = await request(declared.base, 'GET', '/api/rate-limits/', { token });
    assert.ok(
      table.body.some(
        (r: { scope: string; rate: string; keyed_by: string }) =>
          r.scope === 'exports' && r.rate === '2/min' && r.keyed_by === 'user',
      ),
    );
    assert.ok(table.body.some((r: { scope: string; rate: string }) => r.scope === 'search' && r.rate === '1/min'));
  } finally {
    await declared.close();
  }
});

Declared(
  'THROTTLE_ENABLED=false: nothing is refused or counted, no RateLimit fields, and the live table is empty',
  async () => {
    const off = await startTestApp({ THROTTLE_ENABLED: 'false', THROTTLE_ANON: '2/min' }, 'throttle-off');
    try {
      const responses = [];
      for (let i = 0; i < 4; i += 1) responses.push(await request(off.base, 'GET', '/api/tasks/'));
      assert.equal(
        responses.map((r) => [r.status, r.headers.get('ratelimit')]),
        Array(4).fill([200, null]),
      );
      const table = await request(off.base, 'GET', '/api/rate-limits/');
      assert.equal([table.status, table.body], [200, []]);
    } finally {
      await off.close();
    }
  },
);

const Direct = suite('throttling with no trusted proxy (TRUST_PROXY_HOPS=0, 3/min anon)');
let direct: TestApp;

Direct.before(async () => {
  direct = await startTestApp({ TRUST_PROXY_HOPS: '0', THROTTLE_ANON: '3/min' }, 'throttle-http-direct');
});
Direct.after(() => direct?.close());

Direct(
  'an invented X-Forwarded-For is ignored: rotating it does not dodge the anon limit (counted from the first request on)',
  async () => {
    const started = Date.now();
    for (let i = 0; i < 3; i += 1) {
      const admitted = await send(direct, 'GET', '/api/tasks/', { ip: `10.9.8.${i}` });
      assert.is(admitted.status, 200);
      assert.is(
        admitted.headers.get('ratelimit'),
        `"anon";r=${2 - i};t=60`,
        `request ${i + 1} right after start is counted`,
      );
    }
    const refused = await send(direct, 'GET', '/api/tasks/', { ip: '10.9.8.7' });
    const elapsedS = (Date.now() - started + 1) / 1000;
    const wait = Number(refused.headers.get('retry-after'));
    // The ceiling of the time until the first request leaves the 60 s window: 60 unless this was slow.
    assert.ok(wait <= 60 && wait >= Math.ceil(60 - elapsedS), `Retry-After ${wait} after ${elapsedS} s`);
    assertThrottled(refused, 'anon', '"anon";q=3;w=60', wait, 'fourth address');
  },
);

const Listed = suite('TRUSTED_PROXIES: forwarded headers count only when the connection comes from a listed proxy');

Listed('a peer not in the list is keyed by its socket address, and its links use the Host header', async () => {
  // The test client connects from 127.0.0.1, which this list leaves out.
  const listed = await startTestApp(
    { TRUST_PROXY_HOPS: '1', TRUSTED_PROXIES: '10.0.0.0/8, ::1', THROTTLE_ANON: '3/min' },
    'throttle-untrusted-peer',
  );
  try {
    const forged = { 'X-Forwarded-Proto': 'https', 'X-Forwarded-Host': 'evil.example' };
    const root = await send(listed, 'GET', '/api/', { ip: '198.51.100.41', headers: forged });
    assert.is(root.status, 200, root.text);
    assert.is(root.body.tasks, `${listed.base}/api/tasks/`, 'scheme and host from the connection and Host');
    const rotating = await statuses(3, (i) => send(listed, 'GET', '/api/tasks/', { ip: `198.51.100.${42 + i}` }));
    assert.equal(rotating, [200, 200, 429], 'every forged address drew on one budget');
    const plain = await send(listed, 'GET', '/api/tasks/');
    assert.is(plain.status, 429, 'the budget is the socket address its own requests spend');
  } finally {
    await listed.close();
  }
});

Listed("a listed peer's X-Forwarded-For, -Proto and -Host are used", async () => {
  const listed = await startTestApp(
    { TRUST_PROXY_HOPS: '1', TRUSTED_PROXIES: '10.0.0.0/8,127.0.0.0/8', THROTTLE_ANON: '2/min' },
    'throttle-trusted-peer',
  );
  try {
    const root = await send(listed, 'GET', '/api/', {
      headers: { 'X-Forwarded-Proto': 'https', 'X-Forwarded-Host': 'api.example.com' },
    });
    assert.is(root.body.tasks, 'https://api.example.com/api/tasks/');
    const a = { ip: '198.51.100.51' };
    assert.equal(
      await statuses(3, () => send(listed, 'GET', '/api/tasks/', a)),
      [200, 200, 429],
      'the forwarded address has its own budget',
    );
    const b = await send(listed, 'GET', '/api/tasks/', { ip: '198.51.100.52' });
    assert.equal(
      [b.status, b.headers.get('ratelimit')],
      [200, '"anon";r=1;t=60'],
      'another forwarded address has another',
    );
  } finally {
    await listed.close();
  }
});

Proxied.run();
Declared.run();
Direct.run();
Listed.run();
