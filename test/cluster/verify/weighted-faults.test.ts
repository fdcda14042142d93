import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { checkOf, runVerify, startFaulty, type VerifyRun } from '../../helpers/verify.js';

// docs/verify.md "Weighted routes" and "Overrides and plans", against test/helpers/verify-weighted-service.ts (pages
// of 300 rows cost 3 units; beta, the limits user, has an override of 15 units per 2 s): an exact log in units holds
// and is judged in units; one that admits a request while a single unit is left is over the limit in units; one that
// states beta's override but counts beta by the settings' 30 is over the override's limit.

const tmp = process.env.TEST_TMP_DIR;
if (!tmp) throw new Error('TEST_TMP_DIR is not set: run tests with `npm test`');
const SERVICE = 'test/helpers/verify-weighted-service.ts';
const USERS = ['--user', 'alpha:alpha-pass', '--user', 'beta:beta-pass', '--checks', 'limits'];
const WEIGHTED = [...USERS, '--weighted-path', '/api/tasks/?page_size=300'];
const RUNS = { honest: WEIGHTED, 'one-unit-left': WEIGHTED, 'override-unenforced': USERS };
const test = suite('verify judges costs and overrides: seeded faults');
let runs: Record<keyof typeof RUNS, VerifyRun>;

async function verifyAgainst(fault: keyof typeof RUNS): Promise<VerifyRun> {
  const service = await startFaulty(fault, SERVICE);
  try {
    return await runVerify(service.base, RUNS[fault], join(tmp!, `verify-${fault}-${randomBytes(3).toString('hex')}`));
  } finally {
    await service.stop();
  }
}

test.before(async () => {
  const names = Object.keys(RUNS) as (keyof typeof RUNS)[];
  const done = await Promise.all(names.map(verifyAgainst));
  runs = Object.fromEntries(names.map((name, i) => [name, done[i]!])) as typeof runs;
});

/** The run of a fault, or, when the runs at once missed it (a loaded host spreads a burst), a second run alone. */
async function caught(fault: keyof typeof RUNS): Promise<VerifyRun> {
  const first = checkOf(runs[fault], 'limits');
  if (first.verdict === 'violated') return runs[fault];
  console.log(`# ${fault}: limits ${first.verdict} among three runs at once (${first.summary}); once more, alone`);
  return verifyAgainst(fault);
}

test('an exact log in units holds, judged in units', () => {
  const run = runs.honest;
  const limits = checkOf(run, 'limits');
  assert.is(run.code, 0, run.output);
  assert.is(limits.verdict, 'holds', run.output);
  assert.match(limits.summary, /^at most \d+ units admitted in any 2-second window \(limit 15; /);
  assert.match(limits.summary, 'GET /api/tasks/?page_size=300 costs 3 units');
  assert.equal(limits.evidence.identities[0].costs, { 'api/tasks/': 1, 'api/tasks/?page_size=300': 3 });
});

test('admitting a request while one unit is left is over the limit in units', async () => {
  const run = await caught('one-unit-left');
  const limits = checkOf(run, 'limits');
  assert.is(run.code, 1, run.output);
  assert.match(limits.summary, /^user beta: 1[6-7] units admitted inside one window \(limit 15\), exposed by /);
  assert.equal(limits.evidence.identities[0].findings.excess.limit, 15);
});

test('a service that states an override but counts by the settings is over the override’s limit', async () => {
  const run = await caught('override-unenforced');
  const limits = checkOf(run, 'limits');
  assert.is(run.code, 1, run.output);
  assert.match(limits.summary, /^user beta: \d+ admissions inside one window \(limit 15\), exposed by /);
  assert.ok(limits.evidence.identities[0].findings.maxInWindow > 15, run.output);
});

test.run();
