import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Kysely } from 'kysely';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { connectDatabase } from '../../../db/connect.js';
import type { Database } from '../../../db/database.js';
import { createUser } from '../../../src/auth/users.repository.js';
import { loadConfig } from '../../../src/settings/config.js';
import { buildDeps } from '../../../src/deps.js';
import { createApp } from '../../../src/api/app.js';
import { startCluster, type RunningCluster } from '../../helpers/cluster.js';
import { checkEventOrder } from '../../helpers/event-order.js';
import { createUnorderedBus, createUnorderedSequences } from '../../helpers/unordered-append.js';
import { testStoresEnv } from '../../helpers/test-stores-env.js';
import { createTestDatabase } from '../../helpers/database.js';
import { request } from '../../helpers/http.js';
import {
  checkWalk,
  pollIdVisibility,
  spawnWriters,
  walkWithCursor,
  type Walk,
  type WriterOptions,
} from '../../helpers/writers.js';

// docs/pagination.md "Guarantees under concurrent writes": "commit order = id order = event position order",
// checked on the real entry point (4 web workers) with writer processes
// POSTing over HTTP while cursor readers walk to the end; then the same checks against the
// plain-sequence append, which must fail them, so these checks are known to catch the bug.

// Throttling out of the way: off, rather than a huge rate (a sliding log of 100,000 slots per key
// makes every request move 800 kB in Redis, which would measure the throttle, not the writes).
const UNTHROTTLED = { THROTTLE_ENABLED: 'false' };
const SECRET = 'cursor-consistency-secret-0123456789';
const WRITERS = 3;
const READERS: Array<Walk['ordering']> = ['id', 'id', 'id', '-id'];
const PAGE_SIZE = 7;
const ROUNDS = 3;

interface Target {
  base: string;
  db: Kysely<Database>;
  tokens: string[];
}

interface RoundReport {
  created: number;
  walks: Walk[];
  polls: number;
  problems: string[];
}

/** Logs in one user per writer through the API under test. */
async function loginWriters(base: string, db: Kysely<Database>): Promise<string[]> {
  const tokens: string[] = [];
  for (let i = 0; i < WRITERS; i += 1) {
    const username = `writer${i}`;
    await createUser(db, username, `${username}-password`);
    const response = await request(base, 'POST', '/api/auth/token/', {
      body: { username, password: `${username}-password` },
    });
    if (response.status !== 200) throw new Error(`login ${username}: ${response.status} ${response.text}`);
    tokens.push(response.body.token as string);
  }
  return tokens;
}

/**
 * One round: the writer processes POST for a bounded time; meanwhile each reader walks the list
 * with the cursor to the end, again and again while writes go on, and a poller watches for an
 * id visible before a smaller one. Returns every broken promise found.
 */
async function runRound(target: Target, writing: WriterOptions): Promise<RoundReport> {
  const writers = spawnWriters(target.base, target.tokens, writing);
  let active = true;
  const finished = writers.finished.finally(() => (active = false));
  await writers.firstCreated;
  const polling = pollIdVisibility(target.db, () => !active);
  const readers = READERS.map(async (ordering, i) => {
    await sleep(i * 25);
    const walks: Walk[] = [];
    do walks.push(await walkWithCursor(target.base, target.db, ordering, PAGE_SIZE));
    while (active);
    return walks;
  });
  const [written, walksByReader, polled] = await Promise.all([finished, Promise.all(readers), polling]);
  const walks = walksByReader.flat();
  const problems = [
    ...written.failures,
    ...polled.problems,
    ...walks.flatMap((walk) => checkWalk(walk, written.created)),
  ];
  return { created: written.created.length, walks, polls: polled.polls, problems };
}

function describe(label: string, report: RoundReport): string {
  const count = (ordering: string) => report.walks.filter((w) => w.ordering === ordering).length;
  const pages = report.walks.reduce((sum, w) => sum + w.pages, 0);
  const longest = Math.max(...report.walks.map((w) => w.seen.length));
  return (
    `# ${label}: ${WRITERS} writer processes created ${report.created} tasks; ${READERS.length} readers made ${report.walks.length} walks ` +
    `(${count('id')} ascending, ${count('-id')} descending, ${pages} pages of ${PAGE_SIZE}, longest ${longest} tasks); ` +
    `${report.polls} visibility polls; ${report.problems.length} problems`
  );
}

const ordered = suite('cursor walks on a 4-worker cluster while writer processes POST');
let cluster: RunningCluster;
let clusterTarget: Target;
let dropClusterDb: () => Promise<void>;

ordered.before(async () => {
  const database = await createTestDatabase('cursor-consistency');
  dropClusterDb = database.drop;
  const db = connectDatabase(database.url, 4, 'cursor-consistency-test');
  cluster = await startCluster({
    ...testStoresEnv('cursor-consistency', database.url),
    CURSOR_SECRET: SECRET,
    WEB_CONCURRENCY: '4',
    DATABASE_POOL_SIZE: '8',
    ...UNTHROTTLED,
  });
  clusterTarget = { base: cluster.base, db, tokens: await loginWriters(cluster.base, db) };
  for (let n = 0; n < 20; n += 1) {
    await request(cluster.base, 'POST', '/api/tasks/', {
      token: clusterTarget.tokens[0],
      body: { title: `seed ${n}` },
    });
  }
});

ordered.after(async () => {
  await cluster?.stop();
  await clusterTarget?.db.destroy();
  await dropClusterDb?.();
});

ordered(
  'every walk sees each task that existed at its start once, in strict order, and ascending walks every acknowledged task',
  async () => {
    for (let round = 1; round <= ROUNDS; round += 1) {
      const report = await runRound(clusterTarget, { durationMs: 2_500, concurrency: 4, maxPosts: 3_000 });
      console.log(describe(`round ${round}`, report));
      assert.equal(report.problems, [], `round ${round}`);
      assert.ok(report.created > 0 && report.walks.length >= READERS.length);
    }
  },
);

ordered('event positions are 1..N and TaskCreated positions follow task id order', async () => {
  const { events, problems } = await checkEventOrder(clusterTarget.db);
  const tasks = await clusterTarget.db
    .selectFrom('tasks')
    .select(({ fn }) => [fn.countAll<number>().as('n'), fn.max('id').as('top')])
    .executeTakeFirstOrThrow();
  console.log(`# events table: ${events} events for ${tasks.n} tasks, ${problems.length} problems`);
  assert.equal(problems, []);
  assert.is(events, Number(tasks.n));
  assert.is(Number(tasks.top), Number(tasks.n), 'task ids are gapless');
});

ordered.run();

const unordered = suite('the same checks catch a plain-sequence append');
let server: Server;
let variantTarget: Target;
let closeVariant: () => Promise<void>;

unordered.before(async () => {
  const database = await createTestDatabase('cursor-unordered');
  const config = loadConfig({
    ...testStoresEnv('cursor-unordered', database.url),
    CURSOR_SECRET: SECRET,
    LOG_LEVEL: 'silent',
    DATABASE_POOL_SIZE: '20',
    ...UNTHROTTLED,
  });
  const { deps, close } = await buildDeps(config, 'unordered-test');
  await createUnorderedSequences(deps.db);
  // A few ms between drawing the id and committing makes out-of-order commits certain.
  const variantBus = createUnorderedBus(deps.db, { delayMs: () => 2 + Math.random() * 8 });
  deps.commands = variantBus;
  server = createServer(createApp(deps).callback());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const db = connectDatabase(database.url, 4, 'cursor-unordered-test');
  variantTarget = { base, db, tokens: await loginWriters(base, db) };
  closeVariant = async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await variantBus.close();
    await close();
    await db.destroy();
    await database.drop();
  };
});

unordered.after(async () => {
  await closeVariant?.();
});

unordered('readers or the visibility poll see an id before a smaller one, and positions leave id order', async () => {
  // A loaded host may make too few creates in one round for two commits to cross: up to three rounds, until they do.
  let report = await runRound(variantTarget, { durationMs: 2_000, concurrency: 4, maxPosts: 3_000 });
  for (let round = 2; round <= 3 && report.problems.length === 0; round += 1) {
    console.log(describe(`plain-sequence append, round ${round - 1} (no crossing seen)`, report));
    report = await runRound(variantTarget, { durationMs: 2_000, concurrency: 4, maxPosts: 3_000 });
  }
  console.log(describe('plain-sequence append', report));
  console.log(`# e.g. ${report.problems.slice(0, 3).join(' | ')}`);
  assert.ok(report.problems.length > 0, 'the reader/poller check must fail for the plain-sequence append');
  const events = await checkEventOrder(variantTarget.db);
  console.log(
    `# events table: ${events.events} events, ${events.problems.length}+ problems, e.g. ${events.problems[0]}`,
  );
  assert.ok(events.problems.length > 0, 'the event order check must fail for the plain-sequence append');
});

unordered.run();
