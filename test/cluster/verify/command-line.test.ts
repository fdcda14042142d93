import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { findFreePort } from '../../../src/embedded/ports.js';
import { runVerify, startFaulty, type VerifyRun } from '../../helpers/verify.js';

// docs/verify.md "Exit status": what a user gets wrong, or a service that cannot be reached or refuses the
// login, ends the run with one line and exit 2, never a stack trace and never 1 (which means "violated").

const tmp = process.env.TEST_TMP_DIR;
if (!tmp) throw new Error('TEST_TMP_DIR is not set: run tests with `npm test`');
const USERS = ['--user', 'alpha:alpha-pass', '--user', 'beta:beta-pass'];
const test = suite('verify stops with one line and exit 2');
let service: Awaited<ReturnType<typeof startFaulty>>;

test.before(async () => {
  service = await startFaulty('honest');
});
test.after(async () => {
  await service.stop();
});

function assertOneLine(run: VerifyRun, pattern: RegExp) {
  assert.is(run.code, 2, run.output);
  assert.not.match(run.output, /\n\s+at /, 'no stack trace');
  const errors = run.output.split('\n').filter((line) => line.startsWith('verify: '));
  assert.is(errors.length, 1, run.output);
  assert.match(errors[0]!, pattern);
}

test('a --history path in a folder that does not exist', async () => {
  const run = await runVerify(service.base, [...USERS, '--history', join(tmp, 'no-such-folder', 'h.jsonl')], tmp);
  assertOneLine(run, /--history .*its folder does not exist/);
});

test('a --report path under a file', async () => {
  const file = join(tmp, 'verify-a-file');
  await writeFile(file, '');
  const run = await runVerify(service.base, USERS, join(file, 'report'));
  assertOneLine(run, /--report .*ENOTDIR/);
});

test('a base URL where nothing listens', async () => {
  const run = await runVerify(`http://127.0.0.1:${await findFreePort()}`, USERS, tmp);
  assertOneLine(run, /nothing answers at http:\/\/127\.0\.0\.1:\d+\/ \(ECONNREFUSED\)/);
});

test('a login refused', async () => {
  const run = await runVerify(service.base, ['--user', 'alpha:wrong'], tmp);
  assertOneLine(run, /logging in as alpha was refused: 400/);
});

test('no user and no --anonymous', async () => {
  const run = await runVerify(service.base, [], tmp);
  assert.is(run.code, 2, run.output);
  assert.match(run.output, /verify: at least one --user NAME:PASSWORD is required \(or --anonymous/);
});

test.run();
