// Needs: haproxy
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { findFreePort } from '../../../src/embedded/ports.js';
import { startCluster, type RunningCluster } from '../../fixtures/cluster.js';
import { startHaproxy, type RunningHaproxy } from '../../fixtures/haproxy.js';
import { testStoresEnv } from '../../helpers/test-stores-env.js';
import {
  assertAllHold,
  databaseWithUsers,
  scratch,
  VERIFY_ARGS,
  VERIFY_SETTINGS,
} from '../../helpers/verify-paceline.js';
import { runVerify } from '../../helpers/verify.js';

// docs/verify.md: two Paceline hosts behind HAProxy on one PostgreSQL and one Redis.

const balanced = suite('verify against two Paceline hosts behind HAProxy');
let hosts: RunningCluster[] = [];
let balancer: RunningHaproxy | undefined;
let dropBalancedDatabase = async () => {};

balanced.before(async () => {
  await mkdir(scratch, { recursive: true });
  const database = await databaseWithUsers('verify-balanced');
  dropBalancedDatabase = database.drop;
  const shared = { ...testStoresEnv('verify-balanced', database.url), ...VERIFY_SETTINGS, WEB_CONCURRENCY: '1' };
  hosts = await Promise.all(
    ['h1', 'h2'].map(async (name) =>
      startCluster({ ...shared, PORT: String(await findFreePort()), DATA_DIR: join(scratch, name) }, 120_000),
    ),
  );
  balancer = await startHaproxy(
    scratch,
    hosts.map((host, i) => ({ name: `host${i + 1}`, address: `127.0.0.1:${host.port}` })),
  );
});

balanced.after(async () => {
  await balancer?.stop();
  await Promise.allSettled(hosts.map((host) => host.stop()));
  await dropBalancedDatabase();
});

balanced('every check holds; the history and both report files are written', async () => {
  const dir = join(scratch, 'report-balanced');
  const history = join(scratch, 'history.jsonl');
  const run = await runVerify(balancer!.base, [...VERIFY_ARGS, '--history', history], dir);
  assertAllHold(run);
  assert.ok(run.report.requests > 100, `${run.report.requests} requests`);
  const lines = (await readFile(history, 'utf8'))
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line));
  assert.is(lines.filter((e) => e.type === 'invoke').length, run.report.requests, 'one invoke per request');
  assert.is(lines.filter((e) => e.type !== 'invoke').length, run.report.requests, 'one completion per request');
  assert.not.ok(
    lines.some((e) => JSON.stringify(e).includes('"token":"') && !JSON.stringify(e).includes('<redacted>')),
  );
  const html = await readFile(join(dir, 'report.html'), 'utf8');
  assert.match(html, /<svg/);
  assert.match(html, /Admissions in the trailing window/);
});

balanced.run();
