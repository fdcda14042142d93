// Needs: haproxy
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import {
  assertAllHold,
  scratch,
  startBalanced,
  VERIFY_ARGS,
  type VerifyDeployment,
} from '../../helpers/verify-paceline.js';
import { runVerify } from '../../helpers/verify.js';

// docs/verify.md: two Paceline hosts behind HAProxy on one PostgreSQL and one Redis.

const balanced = suite('verify against two Paceline hosts behind HAProxy');
let deployment: VerifyDeployment | undefined;

balanced.before(async () => {
  deployment = await startBalanced();
});

balanced.after(async () => {
  await deployment?.stop();
});

balanced('every check holds; the history and both report files are written', async () => {
  const dir = join(scratch, 'report-balanced');
  const history = join(scratch, 'history.jsonl');
  const run = await runVerify(deployment!.base, [...VERIFY_ARGS, '--history', history], dir);
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
  // The caption whole, in plain ASCII: one with a typographic apostrophe was read cut off at it.
  assert.match(
    html,
    '<figcaption>Walk coverage: for each walk, the tasks that existed when it started and how many it listed</figcaption>',
  );
});

balanced.run();
