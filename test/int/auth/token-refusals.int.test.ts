import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { REVOKED_KEPT_MS, sweepExpiredTokens } from '../../../src/auth/tokens.js';
import { startTestApp, type TestApp } from '../../helpers/app.js';
import { request } from '../../helpers/http.js';

// docs/api.md "Authentication": a refused token is always 401 `Invalid token.` (DRF's text), and
// its WWW-Authenticate says, where the token's row still says it, whether it expired or was
// revoked; a client then knows to log in again. Alike with the per-worker token memory and without.

const CHALLENGE = 'Bearer realm="api", error="invalid_token"';
const EXPIRED = `${CHALLENGE}, error_description="The token has expired"`;
const REVOKED = `${CHALLENGE}, error_description="The token has been revoked"`;

for (const [label, env] of [
  ['with the token memory', {}],
  ['without it', { READ_CACHE_BYTES: '0' }],
] as const) {
  const test = suite(`a refused token says why (${label})`);
  let app: TestApp;

  const get = (token: string) => request(app.base, 'GET', '/api/tasks/', { token });

  async function assertRefused(token: string, challenge: string, method = 'GET'): Promise<void> {
    const response = await request(app.base, method, '/api/tasks/', {
      token,
      body: method === 'POST' ? {} : undefined,
    });
    assert.is(response.status, 401, response.text);
    assert.equal(response.body, { detail: 'Invalid token.' });
    assert.is(response.headers.get('www-authenticate'), challenge);
  }

  /** Runs `check` with the app's clock past every token's expiry. */
  async function afterExpiry(check: () => Promise<void>): Promise<void> {
    const { expires_at } = await app.deps.db
      .selectFrom('tokens')
      .select('expires_at')
      .orderBy('expires_at', 'desc')
      .executeTakeFirstOrThrow();
    const clock = app.deps.clock;
    app.deps.clock = { now: () => new Date(expires_at.getTime() + 1_000) };
    try {
      await check();
    } finally {
      app.deps.clock = clock;
    }
  }

  test.before(async () => {
    app = await startTestApp({ TOKEN_TTL: '1h', ...env }, 'token-refusals');
  });
  test.after(() => app.close());

  test('an expired token: 401 Invalid token., "The token has expired", on reads and writes', async () => {
    const token = await app.login('erin');
    assert.is((await get(token)).status, 200, 'live, and remembered where there is a memory');
    await afterExpiry(async () => {
      await assertRefused(token, EXPIRED);
      await assertRefused(token, EXPIRED, 'POST');
    });
  });

  test('a logged-out token: "The token has been revoked", expired or not', async () => {
    const token = await app.login('rita');
    assert.is((await get(token)).status, 200);
    const logout = await request(app.base, 'DELETE', '/api/auth/token/', { token });
    assert.is(logout.status, 204, logout.text);
    await assertRefused(token, REVOKED);
    await afterExpiry(() => assertRefused(token, REVOKED));
    await sweepExpiredTokens(app.deps.db, new Date(), 1_000);
    await assertRefused(token, REVOKED);
  });

  test('the retention sweep keeps a revoked token a day, then it is unknown', async () => {
    const token = await app.login('sam');
    assert.is((await request(app.base, 'DELETE', '/api/auth/token/', { token })).status, 204);
    await sweepExpiredTokens(app.deps.db, new Date(Date.now() + REVOKED_KEPT_MS - 60_000), 1_000);
    await assertRefused(token, REVOKED);
    await sweepExpiredTokens(app.deps.db, new Date(Date.now() + REVOKED_KEPT_MS + 60_000), 1_000);
    await assertRefused(token, CHALLENGE);
  });

  test('an unknown token, or one the retention sweep removed: the challenge without a description', async () => {
    await assertRefused('0'.repeat(64), CHALLENGE);
    const token = await app.login('uma');
    await afterExpiry(async () => {
      await sweepExpiredTokens(app.deps.db, app.deps.clock.now(), 1_000);
      await assertRefused(token, CHALLENGE);
    });
  });

  test('a live token is served as before', async () => {
    const token = await app.login('vic');
    for (let i = 0; i < 3; i += 1) assert.is((await get(token)).status, 200);
  });

  test.run();
}
