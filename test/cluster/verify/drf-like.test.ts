import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { checkOf, runVerify, startFaulty, type VerifyRun } from '../../helpers/verify.js';

// docs/verify.md "Identity is checked" and "The limit, when the service states none": a service shaped like DRF
// (test/helpers/verify-drf-service.ts: no /api/events/, no RateLimit-Policy, anon 5 and user 10 per 2 s) is judged with
// `--auth-scheme Token` alone: the token is recognised from the anonymous budget, the user's limit is measured,
// an exact limiter holds and DRF's cache race is over the limit.

const tmp = process.env.TEST_TMP_DIR;
if (!tmp) throw new Error('TEST_TMP_DIR is not set: run tests with `npm test`');
const USERS = ['--user', 'alpha:alpha-pass', '--user', 'beta:beta-pass', '--checks', 'limits'];
const TOKEN = [...USERS, '--auth-scheme', 'Token'];
const test = suite('verify judges the user limit of a service shaped like DRF');

// The runs are independent services on their own ports: they run at once, and each test reads its own.
const RUNS = {
  exact: { service: 'drf', args: TOKEN },
  race: { service: 'drf-race', args: TOKEN },
  'identity path': { service: 'drf', args: [...TOKEN, '--identity-path', '/api/profile/'] },
  'public identity path': { service: 'drf', args: [...TOKEN, '--identity-path', '/api/tasks/'] },
  bearer: { service: 'drf', args: USERS },
};
let runs: Record<keyof typeof RUNS, VerifyRun & { history: { f: string; value: any }[] }>;

async function verifyAgainst(service: string, args: string[]) {
  const started = await startFaulty(service);
  const dir = join(tmp!, `verify-${service}-${randomBytes(3).toString('hex')}`);
  const historyFile = `${dir}-history.jsonl`;
  try {
    const run = await runVerify(started.base, [...args, '--history', historyFile], dir);
    const lines = (await readFile(historyFile, 'utf8').catch(() => '')).split('\n').filter((line) => line !== '');
    return { ...run, history: lines.map((line) => JSON.parse(line)) };
  } finally {
    await started.stop();
  }
}

test.before(async () => {
  const entries = await Promise.all(
    Object.entries(RUNS).map(async ([name, run]) => [name, await verifyAgainst(run.service, run.args)]),
  );
  runs = Object.fromEntries(entries);
});

/** Exit 2 and one line saying why, before any check: no stack trace, no verdict. */
function assertStops(run: VerifyRun, pattern: RegExp) {
  assert.is(run.code, 2, run.output);
  assert.not.match(run.output, /\n\s+at /, 'no stack trace');
  const errors = run.output.split('\n').filter((line) => line.startsWith('verify: '));
  assert.is(errors.length, 1, run.output);
  assert.match(errors[0]!, pattern);
  assert.not.match(run.output, /holds|violated/);
}

test('an exact limiter holds: the token is recognised by the anonymous budget and the limit measured', () => {
  const run = runs.exact;
  const limits = checkOf(run, 'limits');
  assert.is(limits.verdict, 'holds', run.output);
  assert.is(run.code, 0);
  assert.match(limits.evidence.identity, /anonymous budget spent .* admitted with the token/);
  assert.equal(limits.evidence.policy, { limit: 10, windowMs: 2_000 });
  assert.match(limits.summary, /^at most 10 admissions in any 2-second window \(limit 10, measured\)/);
});

test('DRF’s cache race over-admits the user: the admissions inside one window are counted', () => {
  const run = runs.race;
  const limits = checkOf(run, 'limits');
  assert.is(limits.verdict, 'violated', run.output);
  assert.is(run.code, 1);
  assert.equal(limits.evidence.policy, { limit: 10, windowMs: 2_000 });
  const [identity] = limits.evidence.identities;
  assert.is(identity.name, 'user beta');
  assert.ok(identity.findings.maxInWindow > 10, `at most ${identity.findings.maxInWindow} admissions in one window`);
  assert.match(limits.summary, new RegExp(`^user beta: ${identity.findings.maxInWindow} admissions inside one window`));
});

test('--identity-path: a path answered only to a signed-in user shows it, and no anonymous budget is spent', () => {
  const run = runs['identity path'];
  const limits = checkOf(run, 'limits');
  assert.is(limits.verdict, 'holds', run.output);
  assert.is(limits.evidence.identity, 'GET /api/profile/ answered 200 with the token and 401 without');
  const identity = run.history.filter((entry) => entry.f.startsWith('identity'));
  assert.ok(identity.length > 0);
  assert.ok(identity.every((entry) => entry.value.url === undefined || entry.value.url === '/api/profile/'));
});

test('--identity-path that anyone may read stops the run, naming it', () => {
  assertStops(
    runs['public identity path'],
    /^verify: the service did not take beta's token as that user \("Authorization: Token …": GET \/api\/tasks\/ answered 200 with it and 200 without\): check --identity-path/,
  );
});

test('a token the service does not recognise (Bearer, ignored by DRF) stops the run in one line', () => {
  assertStops(
    runs.bearer,
    /^verify: the service did not take beta's token as that user \("Authorization: Bearer …": with this address's anonymous budget spent \(\d+ anonymous requests to GET \/api\/tasks\/ admitted, then a 429\), GET \/api\/tasks\/ answered 429 with it too\): pass --auth-scheme NAME/,
  );
});

test.run();
