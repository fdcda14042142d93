import { mkdtemp } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { connectDatabase } from '../../../db/connect.js';
import { issueToken } from '../../../src/auth/tokens.js';
import { createUser } from '../../../src/auth/users.repository.js';
import { findFreePort } from '../../../src/embedded/ports.js';
import { startCluster, type RunningCluster } from '../../helpers/cluster.js';
import { runCli, type CliRun } from '../../helpers/cli.js';
import { createTestDatabase } from '../../helpers/database.js';
import { request } from '../../helpers/http.js';
import { testStoresEnv } from '../../helpers/test-stores-env.js';

// docs/throttling.md "Find them": `npm run cli -- throttled` names each refused client's plan and the override in
// force for it, read from PostgreSQL. In scope user: ada (plan partner), bob (an override of his own) and cy
// (neither); in scope anon: an address of a prefix with an override, and one without. When the CLI cannot reach
// the database it prints the clients as before, and one line that says so.

const test = suite('cli throttled: plans and overrides');
let host: RunningCluster | undefined;
let env: Record<string, string> = {};
let dropDatabase: () => Promise<void> = async () => {};
const users: Record<string, { id: number; token: string }> = {};
/** The overrides set, as `limit:override` printed them. */
const overrides: Record<string, { id: string; until: string }> = {};
const PARTNER_ADDRESS = '203.0.113.7';
const OTHER_ADDRESS = '198.51.100.9';

async function cli(...args: string[]): Promise<CliRun> {
  const run = await runCli(env, args);
  assert.is(run.code, 0, `cli ${args.join(' ')}: ${run.stderr}`);
  return run;
}

/** `override #4 for user bob: user=5/min until 2026-12-02T12:00:00.000Z`: its id and end. */
function madeOverride(run: CliRun): { id: string; until: string } {
  const [, id, until] = /override #(\d+) for .* until (\S+)/.exec(run.stdout) ?? [];
  assert.ok(id && until, run.stdout);
  return { id: id!, until: until! };
}

/** `throttled`, as an operator runs it on the primary's host, with `changed` settings. */
async function throttled(changed: Record<string, string> = {}): Promise<CliRun> {
  const run = await runCli({ ...env, ...changed }, ['throttled', '--pid', String(host!.child.pid)]);
  assert.is(run.code, 0, `${run.stdout}${run.stderr}`);
  assert.is(run.stderr, '');
  return run;
}

/** The line that names `ident`, from its pseudonym on. */
function lineOf(run: CliRun, ident: string): string {
  const line = run.stdout.split('\n').find((l) => l.includes(`  ${ident}  `));
  assert.ok(line, `no line for ${ident}:\n${run.stdout}`);
  return line!.slice(line!.indexOf(ident) + ident.length).trim();
}

test.before(async () => {
  const database = await createTestDatabase('cli-throttled');
  dropDatabase = database.drop;
  env = {
    ...testStoresEnv('cli-throttled', database.url),
    DATA_DIR: resolve(await mkdtemp(join(process.env.TEST_TMP_DIR!, 'cli-throttled-'))),
    WEB_CONCURRENCY: '1',
    TRUST_PROXY_HOPS: '1',
    TRUSTED_PROXIES: '127.0.0.1',
    THROTTLE_ANON: '3/min',
    THROTTLE_USER: '4/min',
    THROTTLE_PLANS: 'partner: user=6/min',
    THROTTLE_TIMEOUT_MS: '5000',
  };
  host = await startCluster(env, 120_000);
  const db = connectDatabase(database.url, 1);
  for (const name of ['ada', 'bob', 'cy']) {
    const created = await createUser(db, name, 'a-long-password');
    assert.ok(created.ok, name);
    const issued = await issueToken(db, name, 'a-long-password', 3_600_000, new Date());
    users[name] = { id: created.ok ? created.user.id : 0, token: issued!.token };
  }
  await db.destroy();
  await cli('plan:set', 'ada', 'partner', '--reason', 'signed');
  overrides.bob = madeOverride(
    await cli('limit:override', 'user', 'bob', 'user=5/min', '--until', '1h', '--reason', 'launch'),
  );
  overrides.prefix = madeOverride(
    await cli('limit:override', '203.0.113.0/24', 'anon=4/min', '--until', '1h', '--reason', 'partner NAT'),
  );
  // Every worker applies a change within 1 s (docs/throttling.md "Plans and overrides").
  await sleep(1_000);
  const clients = [
    ...Object.values(users).map(({ token }) => ({ Authorization: `Bearer ${token}` })),
    { 'X-Forwarded-For': PARTNER_ADDRESS },
    { 'X-Forwarded-For': OTHER_ADDRESS },
  ];
  // Ten requests each: more than any of their limits, so every client is refused.
  for (const headers of clients)
    for (let n = 0; n < 10; n += 1) await request(host.base, 'GET', '/api/tasks/', { headers });
});

test.after(async () => {
  await host?.stop();
  await dropDatabase();
});

test('a refused user shows its plan, and the override in force for it', async () => {
  const run = await throttled();
  assert.match(run.stdout, /^user: \d+ refused in the window$/m);
  assert.is(lineOf(run, `user:${users.ada!.id}`), `user:${users.ada!.id}  plan partner`);
  assert.is(lineOf(run, `user:${users.cy!.id}`), `user:${users.cy!.id}  plan default`);
  const { id, until } = overrides.bob!;
  assert.is(
    lineOf(run, `user:${users.bob!.id}`),
    `user:${users.bob!.id}  plan default  override #${id} user=5/min until ${until}`,
  );
});

test('an anonymous client shows no plan, and the override of the prefix that holds its address', async () => {
  const run = await throttled();
  assert.match(run.stdout, /^anon: \d+ refused in the window$/m);
  assert.match(lineOf(run, `ip:${OTHER_ADDRESS}`), /^c-[0-9a-f]{16} {2}no plan$/);
  const { id, until } = overrides.prefix!;
  assert.match(
    lineOf(run, `ip:${PARTNER_ADDRESS}`),
    new RegExp(`^c-[0-9a-f]{16}  no plan  override #${id} anon=4/min until ${until.replaceAll('.', '\\.')}$`),
  );
});

test('without the database the clients are printed as before, and one line says why plans are missing', async () => {
  const closed = `postgres://paceline:unused@127.0.0.1:${await findFreePort()}/paceline`;
  const run = await throttled({ DATABASE_URL: closed });
  assert.match(lineOf(run, `ip:${OTHER_ADDRESS}`), /^c-[0-9a-f]{16}$/);
  assert.is(lineOf(run, `user:${users.ada!.id}`), `user:${users.ada!.id}`);
  const lines = run.stdout.trim().split('\n');
  assert.match(lines.at(-1)!, /^plans and overrides could not be read: connection refused \(127\.0\.0\.1:\d+\)$/);
  assert.is(lines.filter((line) => line.includes('could not be read')).length, 1, run.stdout);
});

test.run();
