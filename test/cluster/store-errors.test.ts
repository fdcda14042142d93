import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { findFreePort } from '../../src/stores/ports.js';
import { startRedis } from '../../src/stores/redis.js';
import { createTestDatabase } from '../helpers/database.js';
import { ENTRY } from '../fixtures/cluster.js';

// A real start (the primary, one web and one jobs child) against a store it cannot use: a Redis
// on a closed port, a Redis that wants another password, a database name that does not exist
// (docs/operations.md "When a store is down"). What an operator reads is one line naming the
// setting, the cause and what to do, a banner that says the service is up without the store,
// /readyz naming the cause, and a stop that drains in time; never a stack trace.

const test = suite('a store the service cannot use is named in one line');
let database: { url: string; drop(): Promise<void> } | undefined;

interface Started {
  child: ChildProcess;
  base: string;
  output(): string;
}

function start(env: Record<string, string>, port: number): Started {
  const child = spawn(process.execPath, [ENTRY.main], {
    env: {
      ...process.env,
      LOG_LEVEL: 'info',
      WEB_CONCURRENCY: '1',
      JOB_CONCURRENCY: '1',
      PORT: String(port),
      HOST: '127.0.0.1',
      METRICS_PORT: '0',
      CURSOR_SECRET: 'store-errors-test-secret-0123456789',
      DATA_DIR: join(process.env.TEST_TMP_DIR ?? '/tmp', `store-errors-${port}`),
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (chunk) => (output += chunk));
  child.stderr!.on('data', (chunk) => (output += chunk));
  return { child, base: `http://127.0.0.1:${port}`, output: () => output };
}

/** Waits until the output matches `pattern` or the process exits; bounded. */
async function waitFor(started: Started, pattern: RegExp, timeoutMs = 90_000): Promise<void> {
  for (let waited = 0; !pattern.test(started.output()); waited += 200) {
    if (started.child.exitCode !== null || waited > timeoutMs)
      throw new Error(`no ${pattern} in:\n${started.output()}`);
    await sleep(200);
  }
}

async function stop(started: Started): Promise<number | null> {
  const exited = once(started.child, 'exit');
  started.child.kill('SIGTERM');
  const [code] = await exited;
  return code as number | null;
}

/** The log lines' messages (JSON lines, one per event). */
function messages(output: string): string[] {
  return output
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => {
      try {
        return String(JSON.parse(line).msg);
      } catch {
        return line;
      }
    });
}

function assertNoStack(output: string): void {
  assert.not.match(output, /\n\s+at [\w.<>]+ \(|"stack"/, 'no stack trace');
  assert.not.match(output, /Stream isn't writeable/, 'no raw client error');
  assert.not.match(output, /could not drain in time/, 'the children drained in time');
}

/** Starts with a Redis it cannot use, checks what is said, and stops it. */
async function startWithout(redisUrl: string, cause: RegExp): Promise<void> {
  const port = await findFreePort();
  const started = start({ DATABASE_URL: database!.url, REDIS_URL: redisUrl }, port);
  try {
    await waitFor(started, /Paceline is up WITHOUT Redis/);
    const ready = await fetch(`${started.base}/readyz`);
    assert.is(ready.status, 503);
    const body = (await ready.json()) as { checks: { redis: string }; causes?: { redis?: string } };
    assert.is(body.checks.redis, 'failing');
    assert.match(body.causes?.redis ?? '', cause, JSON.stringify(body));
    // The jobs child's workers keep reconnecting meanwhile; a few rounds of that must stay quiet.
    await sleep(3_000);
    assert.is(await stop(started), 0);
    const lines = messages(started.output()).filter((line) => line.includes('REDIS_URL'));
    assert.is(lines.length, 1, `one line names REDIS_URL:\n${started.output()}`);
    assert.match(lines[0]!, cause, started.output());
    assert.not.match(lines[0]!, /s3cret|other-password/, 'no password in the line');
    assertNoStack(started.output());
  } finally {
    started.child.kill('SIGKILL');
  }
}

test.before(async () => {
  database = await createTestDatabase('store-errors');
});
test.after(async () => {
  await database?.drop();
});

test('REDIS_URL on a closed port: one line, a banner without Redis, /readyz says why', async () => {
  const closed = await findFreePort();
  await startWithout(`redis://127.0.0.1:${closed}`, /connection refused.*start Redis there or correct REDIS_URL/);
});

test('a Redis that wants a password it was not given, or another one: one line, no stack', async () => {
  const redis = await startRedis({
    dataDir: join(process.env.TEST_TMP_DIR ?? '/tmp', 'store-errors-redis'),
    port: await findFreePort(),
    persistent: false,
    password: 's3cret',
  });
  try {
    // The embedded Redis has one user, `paceline`, and no default user: no credentials at all is NOAUTH.
    const url = new URL(redis.url);
    const user = url.username;
    url.username = '';
    url.password = '';
    await startWithout(url.href, /password was refused \(NOAUTH.*REDIS_PASSWORD/);
    url.username = user;
    url.password = 'other-password';
    await startWithout(url.href, /password was refused \(WRONGPASS.*REDIS_PASSWORD/);
  } finally {
    await redis.stop();
  }
});

test('a Redis that comes up later is said to answer again, once, and the service is ready', async () => {
  const redisPort = await findFreePort();
  const started = start(
    { DATABASE_URL: database!.url, REDIS_URL: `redis://127.0.0.1:${redisPort}` },
    await findFreePort(),
  );
  let redis: Awaited<ReturnType<typeof startRedis>> | undefined;
  try {
    await waitFor(started, /Paceline is up WITHOUT Redis/);
    redis = await startRedis({
      dataDir: join(process.env.TEST_TMP_DIR ?? '/tmp', 'store-errors-later'),
      port: redisPort,
      persistent: false,
    });
    await waitFor(started, /Redis answers again/, 60_000);
    let status = 0;
    for (let tries = 0; tries < 50 && status !== 200; tries++) {
      status = (await fetch(`${started.base}/readyz`)).status;
      if (status !== 200) await sleep(200);
    }
    assert.is(status, 200, 'ready once Redis answers');
    assert.is(await stop(started), 0);
    assert.is(messages(started.output()).filter((line) => line.includes('answers again')).length, 1);
    assertNoStack(started.output());
  } finally {
    started.child.kill('SIGKILL');
    await redis?.stop();
  }
});

test('a DATABASE_URL naming a database that does not exist stops the start in one line', async () => {
  const url = new URL(database!.url);
  url.pathname = '/no_such_database';
  const started = start({ DATABASE_URL: url.href, REDIS_URL: process.env.TEST_REDIS_URL ?? '' }, await findFreePort());
  const [code] = await once(started.child, 'exit');
  assert.is(code, 1);
  const lines = started.output().trim().split('\n');
  assert.is(lines.length, 1, started.output());
  assert.match(lines[0]!, /DATABASE_URL postgres:.*no_such_database: database "no_such_database" does not exist/);
  assert.match(lines[0]!, /create that database/);
  assert.not.match(lines[0]!, new URL(database!.url).password || 'never-matches');
});

test.run();
