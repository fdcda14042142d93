import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { findFreePort } from '../../src/embedded/ports.js';
import { checkOf, runVerify } from '../helpers/verify.js';
import { scriptArgs } from '../helpers/node-script.js';

// docs/verify.md "It catches real faults": each small service under test/verify/ carries one seeded fault;
// verify must report the check that the fault breaks as violated, with the evidence, and exit 1.

const tmp = process.env.TEST_TMP_DIR;
if (!tmp) throw new Error('TEST_TMP_DIR is not set: run tests with `npm test`');
const USERS = ['--user', 'alpha:alpha-pass', '--user', 'beta:beta-pass'];
const test = suite('verify catches seeded faults');

/** Starts test/verify/faulty-service.ts with `fault`; resolves once it listens. */
async function startFaulty(fault: string): Promise<{ base: string; stop: () => Promise<void> }> {
  const port = await findFreePort();
  const child: ChildProcess = spawn(
    process.execPath,
    [...scriptArgs('test/verify/faulty-service.ts'), fault, String(port)],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const listening = new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', (chunk: Buffer) => chunk.toString().includes('listening') && resolve());
    child.once('exit', (code) => reject(new Error(`${fault} service exited with ${code}`)));
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  await listening;
  clearTimeout(timer);
  const stop = async () => {
    if (child.exitCode !== null) return;
    child.kill('SIGTERM');
    await once(child, 'exit');
  };
  return { base: `http://127.0.0.1:${port}`, stop };
}

async function verifyAgainst(fault: string, checks: string) {
  const service = await startFaulty(fault);
  try {
    const dir = join(tmp!, `verify-${fault}-${randomBytes(3).toString('hex')}`);
    return await runVerify(service.base, [...USERS, '--checks', checks, '--walk-seconds', '8'], dir);
  } finally {
    await service.stop();
  }
}

// The five runs are independent services on their own ports: they run at once, and each test reads its own.
const RUNS = {
  'fixed-window': 'limits',
  'per-process': 'limits',
  'offset-cursor': 'cursor',
  'ttl-cache': 'ryw',
  honest: 'limits,cursor,ryw,idempotency,feed',
} as const;
let runs: Record<keyof typeof RUNS, Awaited<ReturnType<typeof verifyAgainst>>>;

test.before(async () => {
  const entries = await Promise.all(
    Object.entries(RUNS).map(async ([fault, checks]) => [fault, await verifyAgainst(fault, checks)]),
  );
  runs = Object.fromEntries(entries);
});

test('a fixed-window limiter is over the limit at a window edge', async () => {
  const run = runs['fixed-window'];
  const limits = checkOf(run, 'limits');
  assert.is(limits.verdict, 'violated', run.output);
  assert.is(run.code, 1);
  const [beta] = limits.evidence.identities;
  assert.ok(beta.findings.maxInWindow > 10, `at most ${beta.findings.maxInWindow} admissions seen in one window`);
  assert.ok(beta.findings.overLimit.length > 10, 'the admissions that prove it are named');
});

test('per-process counters behind 2 workers admit the limit once per worker', async () => {
  const run = runs['per-process'];
  const limits = checkOf(run, 'limits');
  assert.is(limits.verdict, 'violated', run.output);
  assert.ok(limits.evidence.identities[0].findings.maxInWindow >= 15, run.output);
});

test('an OFFSET "cursor" skips or repeats tasks under concurrent writes', async () => {
  const run = runs['offset-cursor'];
  const cursor = checkOf(run, 'cursor');
  assert.is(cursor.verdict, 'violated', run.output);
  const broken = cursor.evidence.walks.filter(
    (w: any) => w.style.startsWith('cursor') && w.missing.length + w.duplicates.length > 0,
  );
  assert.ok(broken.length > 0, 'a cursor walk lost or repeated a task');
});

test('a read cache with a TTL on two hosts serves stale reads', async () => {
  const run = runs['ttl-cache'];
  const ryw = checkOf(run, 'ryw');
  assert.is(ryw.verdict, 'violated', run.output);
  assert.ok(
    ryw.evidence.stale.some((s: any) => s.after === 'update' || s.after === 'delete'),
    run.output,
  );
});

test('the same service without a fault: every check holds, exit 0 (no false alarm)', async () => {
  const run = runs.honest;
  assert.is(run.code, 0, run.output);
  assert.equal(
    run.report.checks.map((c) => [c.name, c.verdict]),
    ['limits', 'cursor', 'ryw', 'idempotency', 'feed'].map((name) => [name, 'holds']),
  );
});

test.run();
