import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { findFreePort } from '../../../src/embedded/ports.js';
import { scriptArgs } from '../../helpers/node-script.js';
import { checkOf, runVerify } from '../../helpers/verify.js';

// docs/verify.md "The zoo": its shortest member in the suite. express-rate-limit's memory store behind
// node:cluster with two workers keeps one count per process; verify's default anonymous command finds twice
// the limit in one window.

const tmp = process.env.TEST_TMP_DIR;
if (!tmp) throw new Error('TEST_TMP_DIR is not set: run tests with `npm test`');
const test = suite('verify:zoo, express-rate-limit behind node:cluster');

test('per-process memory stores are over the limit; the schedule that exposed it is named', async () => {
  const port = await findFreePort();
  const child = spawn(process.execPath, [...scriptArgs('ops/verify-zoo/express-cluster.ts'), String(port)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  try {
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (chunk: Buffer) => chunk.toString().includes('listening') && resolve());
      child.once('exit', (code) => reject(new Error(`express-cluster exited with ${code}`)));
    });
    const run = await runVerify(`http://127.0.0.1:${port}`, ['--anonymous'], join(tmp, 'verify-zoo-express'));
    const limits = checkOf(run, 'limits');
    assert.is(run.code, 1, run.output);
    assert.is(limits.verdict, 'violated', run.output);
    assert.ok(limits.evidence.identities[0].findings.maxInWindow > 10, run.output);
    assert.match(limits.summary, /admissions inside one window \(limit 10\), exposed by /);
  } finally {
    child.kill('SIGTERM');
    if (child.exitCode === null) await once(child, 'exit');
  }
});

test.run();
