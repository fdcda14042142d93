import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { startProcessors } from '../../../workers/processors.js';
import { sweepRetention } from '../../../workers/retention.js';
import { startTestApp, type TestApp } from '../../helpers/app.js';
import { parseMetrics, sumOf } from '../../helpers/metrics.js';

// The job child's retention sweep: expired tokens and idempotency records past their 24-hour TTL
// are deleted in small batches, live ones stay, and paceline_retention_swept_total{table} counts them.

const Retention = suite<{ app: TestApp; userId: number }>('retention sweep of tokens and idempotency records');

Retention.before(async (ctx) => {
  ctx.app = await startTestApp({ RETENTION_BATCH_SIZE: '2', RETENTION_SWEEP_INTERVAL_MS: '100' }, 'retention');
  await ctx.app.login('rhea');
  ctx.userId = (
    await ctx.app.deps.db.selectFrom('users').select('id').where('username', '=', 'rhea').executeTakeFirstOrThrow()
  ).id;
});
Retention.after(({ app }) => app.close());

async function seed(
  app: TestApp,
  userId: number,
  tag: string,
  counts: { expiredTokens: number; liveTokens: number; expiredKeys: number; liveKeys: number },
) {
  const { db } = app.deps;
  const hour = 3_600_000;
  const tokens = [
    ...Array.from({ length: counts.expiredTokens }, (_, i) => ({
      token_hash: `${tag}-expired-${i}-${randomBytes(4).toString('hex')}`,
      expires_at: new Date(Date.now() - (i + 1) * hour),
    })),
    ...Array.from({ length: counts.liveTokens }, (_, i) => ({
      token_hash: `${tag}-live-${i}-${randomBytes(4).toString('hex')}`,
      expires_at: new Date(Date.now() + hour),
    })),
  ];
  if (tokens.length > 0)
    await db
      .insertInto('tokens')
      .values(tokens.map((t) => ({ ...t, user_id: userId })))
      .execute();
  const key = (name: string, ageHours: number) => ({
    user_id: userId,
    key: name,
    request_hash: 'h',
    status: 201,
    body: '{}',
    resource_path: null,
    created_at: sql<Date>`now() - ${`${ageHours} hours`}::interval`,
  });
  const keys = [
    ...Array.from({ length: counts.expiredKeys }, (_, i) => key(`${tag}-expired-${i}`, 24 + i + 1)),
    ...Array.from({ length: counts.liveKeys }, (_, i) => key(`${tag}-live-${i}`, 23)),
  ];
  if (keys.length > 0) await db.insertInto('idempotency_keys').values(keys).execute();
}

async function left(app: TestApp, tag: string): Promise<{ tokens: string[]; keys: string[] }> {
  const { db } = app.deps;
  const tokens = await db.selectFrom('tokens').select('token_hash').where('token_hash', 'like', `${tag}-%`).execute();
  const keys = await db
    .selectFrom('idempotency_keys')
    .select('key')
    .where('key', 'like', `${tag}-%`)
    .orderBy('key')
    .execute();
  return { tokens: tokens.map((t) => t.token_hash.replace(/-[0-9a-f]{8}$/, '')).sort(), keys: keys.map((k) => k.key) };
}

async function swept(app: TestApp, table: string): Promise<number> {
  return sumOf(parseMetrics(await app.deps.metrics.registry.metrics()), 'paceline_retention_swept_total', { table });
}

Retention(
  'the job child runs the sweep: the metric reads 0 for both tables at first, then expired rows go',
  async ({ app, userId }) => {
    const processors = await startProcessors(app.deps);
    try {
      const text = await app.deps.metrics.registry.metrics();
      assert.match(text, '# HELP paceline_retention_swept_total ');
      assert.match(text, 'paceline_retention_swept_total{table="tokens"} 0');
      assert.match(text, 'paceline_retention_swept_total{table="idempotency_keys"} 0');
      await seed(app, userId, 'child', { expiredTokens: 3, liveTokens: 1, expiredKeys: 3, liveKeys: 1 });
      let rows = await left(app, 'child');
      for (let i = 0; i < 100 && (rows.tokens.length > 1 || rows.keys.length > 1); i += 1) {
        await sleep(50);
        rows = await left(app, 'child');
      }
      assert.equal(rows, { tokens: ['child-live-0'], keys: ['child-live-0'] });
      assert.is(await swept(app, 'tokens'), 3);
      assert.is(await swept(app, 'idempotency_keys'), 3);
    } finally {
      await processors.close();
    }
  },
);

Retention(
  'one sweep deletes every expired row in batches of RETENTION_BATCH_SIZE, keeps live ones, and counts them',
  async ({ app, userId }) => {
    const before = { tokens: await swept(app, 'tokens'), keys: await swept(app, 'idempotency_keys') };
    await seed(app, userId, 'batch', { expiredTokens: 5, liveTokens: 2, expiredKeys: 4, liveKeys: 2 });
    const { db } = app.deps;
    const result = await sweepRetention(app.deps);
    assert.equal(result, { tokens: 5, idempotency_keys: 4 });
    assert.equal(await left(app, 'batch'), {
      tokens: ['batch-live-0', 'batch-live-1'],
      keys: ['batch-live-0', 'batch-live-1'],
    });
    assert.is(await swept(app, 'tokens'), before.tokens + 5);
    assert.is(await swept(app, 'idempotency_keys'), before.keys + 4);
    assert.equal(await sweepRetention(app.deps), { tokens: 0, idempotency_keys: 0 }, 'nothing left to sweep');
    const rhea = await db
      .selectFrom('tokens')
      .select('token_hash')
      .where('user_id', '=', userId)
      .where('expires_at', '>', new Date())
      .execute();
    assert.ok(rhea.length >= 1, "the login's live token is kept");
  },
);

Retention('a sweep asked to stop ends between batches', async ({ app, userId }) => {
  await seed(app, userId, 'stop', { expiredTokens: 5, liveTokens: 0, expiredKeys: 0, liveKeys: 0 });
  let batches = 0;
  const result = await sweepRetention(app.deps, () => batches++ >= 1);
  assert.equal(result, { tokens: 2, idempotency_keys: 0 }, 'one batch of 2, then it stopped');
  assert.equal(await sweepRetention(app.deps), { tokens: 3, idempotency_keys: 0 });
});

Retention.run();
