import pg from 'pg';
import { setTimeout as sleep } from 'node:timers/promises';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { startCluster, type RunningCluster } from '../../helpers/cluster.js';
import { testStoresEnv } from '../../helpers/test-stores-env.js';
import { createTestDatabase } from '../../helpers/database.js';
import { request } from '../../helpers/http.js';

// docs/operations.md "Health checks" and docs/throttling.md "Scopes" on the real entry point:
// /readyz probes share one check of the stores per worker per READY_CHECK_MS, so a flood of them
// costs PostgreSQL a few transactions; the docs page's files are kept by browsers (a versioned URL,
// immutable, with a strong ETag answered 304) and counted under their own `docs` scope, so a
// client that spent its anonymous budget still gets the page and the document it loads.

const WORKERS = 2;
const PROBES = 2_000;
/** PostgreSQL publishes a backend's counts when it has been idle this long (PGSTAT_IDLE_INTERVAL), at the latest. */
const STATS_SETTLE_MS = 11_000;

const test = suite('cheap probes and docs assets');
let cluster: RunningCluster;
let databaseUrl = '';
let dropDatabase: () => Promise<void> = async () => {};

/**
 * Transactions committed in the test's database less the sessions opened in it: a new connection
 * commits one while it starts (its catalog lookups), and a worker's pool reopens its connection
 * after the idle settle, or adds one when a check is slow on a loaded host.
 */
async function committedTransactions(): Promise<number> {
  const name = new URL(databaseUrl).pathname.slice(1);
  const client = new pg.Client({ connectionString: process.env.TEST_DATABASE_URL });
  await client.connect();
  try {
    const query = 'select xact_commit - sessions as checks from pg_stat_database where datname = $1';
    const { rows } = await client.query(query, [name]);
    return Number(rows[0].checks);
  } finally {
    await client.end();
  }
}

test.before(async () => {
  const database = await createTestDatabase('cheap_probes');
  databaseUrl = database.url;
  dropDatabase = database.drop;
  cluster = await startCluster({
    ...testStoresEnv('cheap-probes', database.url),
    WEB_CONCURRENCY: String(WORKERS),
    // No jobs child: its sweeps, due every 30 s, would commit transactions of their own inside the count.
    JOB_CONCURRENCY: '0',
    THROTTLE_ANON: '3/min',
  });
});

test.after(async () => {
  await cluster?.stop();
  await dropDatabase();
});

test(`${PROBES} /readyz probes cost PostgreSQL one transaction per worker per second at most`, async () => {
  await sleep(STATS_SETTLE_MS);
  const before = await committedTransactions();
  const started = Date.now();
  let sent = 0;
  const prober = async () => {
    while (sent < PROBES) {
      sent += 1;
      const answer = await request(cluster.base, 'GET', '/readyz');
      assert.is(answer.status, 200);
    }
  };
  await Promise.all(Array.from({ length: 25 }, prober));
  const seconds = Math.ceil((Date.now() - started) / 1000);
  await sleep(STATS_SETTLE_MS);
  const used = (await committedTransactions()) - before;
  // One check per worker per started second, and one more whose second straddles either end of the window.
  const bound = WORKERS * (seconds + 2);
  console.log(`# ${PROBES} probes in ${seconds} s: ${used} PostgreSQL transactions (bound ${bound})`);
  assert.ok(used <= bound, `${used} transactions for ${PROBES} probes over ${seconds} s, above ${bound}`);
});

test('the docs page names its files by version; they are immutable, tagged and answered 304', async () => {
  const page = await request(cluster.base, 'GET', '/api/docs/');
  assert.is(page.status, 200);
  assert.is(page.headers.get('cache-control'), 'no-cache');
  const again = await request(cluster.base, 'GET', '/api/docs/', {
    headers: { 'If-None-Match': page.headers.get('etag')! },
  });
  assert.is(again.status, 304);
  const files = [...page.text.matchAll(/(?:src|href)="([\w.-]+\?v=[\w-]+)"/g)].map((match) => match[1]!);
  assert.ok(
    files.some((file) => file.startsWith('swagger-ui-bundle.js?v=')),
    page.text,
  );
  for (const file of files) {
    const asset = await request(cluster.base, 'GET', `/api/docs/${file}`);
    assert.is(asset.status, 200, file);
    assert.is(asset.headers.get('cache-control'), 'public, max-age=31536000, immutable', file);
    const tag = asset.headers.get('etag')!;
    assert.match(tag, /^"[\w-]+"$/, 'a strong tag');
    const kept = await request(cluster.base, 'GET', `/api/docs/${file}`, { headers: { 'If-None-Match': tag } });
    assert.is(kept.status, 304, file);
  }
  const unversioned = await request(cluster.base, 'GET', '/api/docs/swagger-ui.css');
  assert.is(unversioned.headers.get('cache-control'), 'public, max-age=3600', 'an old or bare URL is kept an hour');
});

test('with the anonymous budget spent, the docs page, its files and the document still load', async () => {
  let status = 0;
  for (let i = 0; i < 10 && status !== 429; i += 1) status = (await request(cluster.base, 'GET', '/api/tasks/')).status;
  assert.is(status, 429, 'the anonymous budget is spent');
  for (const path of ['/api/docs/', '/api/docs/swagger-ui-bundle.js', '/api/docs/init.js', '/api/schema/']) {
    const answer = await request(cluster.base, 'GET', path);
    assert.is(answer.status, 200, path);
    assert.match(answer.headers.get('ratelimit-policy') ?? '', /docs/, `${path} counts under the docs scope`);
  }
  assert.is((await request(cluster.base, 'GET', '/api/tasks/')).status, 429, 'the anonymous budget stays spent');
});

test.run();
