import pg from 'pg';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { sweepRetention } from '../../../workers/retention.js';
import { startTestApp, type TestApp } from '../../helpers/app.js';
import { request } from '../../helpers/http.js';

// docs/api.md "Authentication": a logout revokes the presented token in a statement that touches that one row,
// so a backlog of expired tokens (or a lock another transaction holds on one of them) never makes
// it time out with the token still live; expired tokens are left to the retention sweep.

const Logout = suite<{ app: TestApp; userId: number }>('logout revokes first and leaves expired tokens to the sweep');

Logout.before(async (ctx) => {
  ctx.app = await startTestApp({ DATABASE_STATEMENT_TIMEOUT_MS: '1000' }, 'logout');
  await ctx.app.login('lou');
  const { db } = ctx.app.deps;
  ctx.userId = (await db.selectFrom('users').select('id').where('username', '=', 'lou').executeTakeFirstOrThrow()).id;
  const expired = Array.from({ length: 500 }, (_, i) => ({
    token_hash: `expired-${i}`,
    user_id: ctx.userId,
    expires_at: new Date(Date.now() - (i + 1) * 60_000),
  }));
  await db.insertInto('tokens').values(expired).execute();
});
Logout.after(({ app }) => app.close());

const countExpired = async (app: TestApp) =>
  Number(
    (
      await app.deps.db
        .selectFrom('tokens')
        .select((eb) => eb.fn.countAll().as('n'))
        .where('expires_at', '<=', new Date())
        // A revoked token is expired too (so an older release refuses it) but kept a day to say so.
        .where('revoked_at', 'is', null)
        .executeTakeFirstOrThrow()
    ).n,
  );

Logout(
  'a logout while another transaction holds expired tokens locked is 204, and the token is dead',
  async ({ app }) => {
    const token = await app.login('lou-2');
    const locker = new pg.Client({ connectionString: app.databaseUrl });
    await locker.connect();
    try {
      await locker.query('BEGIN');
      // Another sweep (or anything) holding expired rows: a logout that also deleted them would wait
      // for this lock past the statement timeout and answer 503 with the token still live.
      await locker.query(`SELECT 1 FROM tokens WHERE token_hash LIKE 'expired-%' FOR UPDATE`);
      const out = await request(app.base, 'DELETE', '/api/auth/token/', { token });
      assert.is(out.status, 204, out.text);
      const after = await request(app.base, 'GET', '/api/tasks/', { token });
      assert.is(after.status, 401, 'the presented token no longer works');
    } finally {
      await locker.query('ROLLBACK');
      await locker.end();
    }
  },
);

Logout('expired tokens stay until the retention sweep takes them in batches', async ({ app }) => {
  const token = await app.login('lou-3');
  assert.is(await countExpired(app), 500);
  assert.is((await request(app.base, 'DELETE', '/api/auth/token/', { token })).status, 204);
  assert.is(await countExpired(app), 500, 'the logout deleted no other token');
  const swept = await sweepRetention(app.deps);
  assert.is(swept.tokens, 500);
  assert.is(await countExpired(app), 0);
});

Logout.run();
