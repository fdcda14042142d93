import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { runCli } from '../../helpers/cli.js';
import { startCluster, type RunningCluster } from '../../helpers/cluster.js';
import { testStoresEnv } from '../../helpers/test-stores-env.js';
import { databaseWithUsers, scratch, VERIFY_SETTINGS } from '../../helpers/verify-paceline.js';
import { checkOf, runVerify, type VerifyRun } from '../../helpers/verify.js';

// docs/verify.md "Overrides and plans" and "Weighted routes": one Paceline host (two web workers) whose user rate is
// 60 per 3 s and whose pages may hold 500 rows (a page of 300 costs 3 units). pusher is given an override of 24 per
// 3 s with the CLI before the host starts; verify's limits check judges pusher against 24, and walker, with
// --weighted-path, in units.

const OVERRIDE = 24;
const WEIGHTED = '/api/tasks/?page_size=300';
const [WALKER, PUSHER] = ['walker:walker-pass-123', 'pusher:pusher-pass-123'];
/** verify's limits check alone, with `last` the user it pushes past its limit. */
function limitsCheck(first: string, last: string, ...more: string[]): string[] {
  return ['--user', first, '--user', last, '--checks', 'limits', ...more];
}
const test = suite('verify against Paceline: a user under an override, and a weighted route');
let host: RunningCluster | undefined;
let dropDatabase = async () => {};
let runs: { override: VerifyRun; weighted: VerifyRun };

test.before(async () => {
  await mkdir(scratch, { recursive: true });
  const database = await databaseWithUsers('verify-units');
  dropDatabase = database.drop;
  const env = {
    ...testStoresEnv('verify-units', database.url),
    ...VERIFY_SETTINGS,
    WEB_CONCURRENCY: '2',
    MAX_PAGE_SIZE: '500',
  };
  // Read by every worker at start (docs/throttling.md "Plans and overrides"): nothing to wait for.
  const rates = `user=${OVERRIDE}/3s`;
  const set = await runCli(env, ['limit:override', 'user', 'pusher', rates, '--until', '10m', '--reason', 'verify']);
  assert.is(set.code, 0, set.stderr);
  host = await startCluster(env, 180_000);
  // The limits user is the last --user: pusher under the override, walker on the settings' rate. Their budgets are
  // their own, so the two runs go at once.
  const [override, weighted] = await Promise.all([
    runVerify(host.base, limitsCheck(WALKER, PUSHER), join(scratch, 'report-override')),
    runVerify(host.base, limitsCheck(PUSHER, WALKER, '--weighted-path', WEIGHTED), join(scratch, 'report-weighted')),
  ]);
  runs = { override, weighted };
});

test.after(async () => {
  await host?.stop();
  await dropDatabase();
});

test('a user under an override is judged against the override’s limit, and holds', () => {
  const run = runs.override;
  const limits = checkOf(run, 'limits');
  assert.is(run.code, 0, run.output);
  assert.is(limits.verdict, 'holds', run.output);
  assert.match(limits.summary, `admissions in any 3-second window (limit ${OVERRIDE})`);
  const [identity] = limits.evidence.identities;
  assert.is(identity.name, 'user pusher');
  assert.equal(identity.policy, { limit: OVERRIDE, windowMs: 3_000 });
  assert.equal(Object.keys(identity.limitsStated), [String(OVERRIDE)], 'every answer stated the override');
  // Refusals once 24 were in a window are justified only by the override: against 60 they would be under-admission.
  assert.ok(identity.findings.maxInWindow <= OVERRIDE, `${identity.findings.maxInWindow}`);
  assert.ok(identity.findings.judged > 0, 'refusals were judged against it');
  assert.equal(identity.findings.unjustified, []);
});

test('a weighted route taking turns with a page of one unit holds, counted in units', () => {
  const run = runs.weighted;
  const limits = checkOf(run, 'limits');
  assert.is(run.code, 0, run.output);
  assert.is(limits.verdict, 'holds', run.output);
  assert.match(limits.summary, /^at most \d+ units admitted in any 3-second window \(limit 60; /);
  assert.match(limits.summary, `GET ${WEIGHTED} costs 3 units`);
  const [identity] = limits.evidence.identities;
  assert.is(identity.name, 'user walker');
  assert.equal(identity.costs, { 'api/tasks/': 1, [WEIGHTED.slice(1)]: 3 });
  const weighted = identity.perPath[WEIGHTED.slice(1)];
  assert.ok(weighted.admitted > 0 && weighted.refused > 0, JSON.stringify(identity.perPath));
  assert.ok(identity.findings.maxInWindow <= 60, `${identity.findings.maxInWindow}`);
});

test.run();
