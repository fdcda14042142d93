import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { findFreePort, findFreePorts } from '../../../src/embedded/ports.js';
import { newRedisPassword, startRedis } from '../../../src/embedded/redis.js';
import { embeddedRedisUrl } from '../../../src/stores/redis-service-user.js';
import { createTestDatabase } from '../../helpers/database.js';
import { ENTRY } from '../../helpers/cluster.js';

// A real start (the primary, one web and one jobs child) against a store it cannot use: a Redis
// or a Redis Cluster on a closed port, a Redis that wants another password, a database on a closed
// port, behind a wrong password, by a name that does not exist or on a server that never answers
// (docs/operations.md "When a store is down"). What an operator reads is one line naming the
// setting, the cause and what to do, said first and as soon as the stores are up (before the
// children's start, which waits seconds for a Redis that is down, or before the start gives up), a
// banner that says the service is up without the store, /readyz naming the cause, and a stop that
// drains in time; never a stack trace. No timing is asserted, only the order of the lines.

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

/** The log lines (JSON lines, one per event); a line that is not JSON (a failed start's last words) is an error. */
function entries(output: string): Array<{ level: number; msg: string }> {
  return output
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => {
      try {
        const { level, msg } = JSON.parse(line) as { level: number; msg: unknown };
        return { level, msg: String(msg) };
      } catch {
        return { level: 50, msg: line };
      }
    });
}

function messages(output: string): string[] {
  return entries(output).map((entry) => entry.msg);
}

/**
 * The first warning or error of the start names `setting`, and comes before the first line that
 * matches `later` (what the start does next: the children's start, or giving up).
 */
function assertNamedFirst(output: string, setting: string, later: RegExp): void {
  const lines = entries(output);
  const named = lines.findIndex((entry) => entry.msg.includes(setting));
  assert.ok(named >= 0, `a line names ${setting}:\n${output}`);
  const firstLoud = lines.findIndex((entry) => entry.level >= 40);
  assert.is(firstLoud, named, `the first warning or error names ${setting}:\n${output}`);
  const next = lines.findIndex((entry) => later.test(entry.msg));
  assert.ok(next > named, `${setting} is named before ${later}:\n${output}`);
}

function assertNoStack(output: string): void {
  assert.not.match(output, /\n\s+at [\w.<>]+ \(|"stack"/, 'no stack trace');
  assert.not.match(output, /Stream isn't writeable/, 'no raw client error');
  assert.not.match(output, /could not drain in time/, 'the children drained in time');
}

/**
 * Starts on `port` with a Redis it cannot use (`REDIS_URL`, or `REDIS_CLUSTER_NODES` in `env`),
 * checks what is said and in which order, and stops it. `readyz`: what /readyz says of the cause.
 * Starts that run side by side take their ports from one findFreePorts call, so no two get the same.
 */
async function startWithout(
  port: number,
  env: ({ REDIS_URL: string } | { REDIS_CLUSTER_NODES: string }) & { LOG_LEVEL?: string },
  cause: RegExp,
  readyz = cause,
): Promise<string> {
  const setting = 'REDIS_URL' in env ? 'REDIS_URL' : 'REDIS_CLUSTER_NODES';
  const started = start({ DATABASE_URL: database!.url, ...env }, port);
  try {
    await waitFor(started, /Paceline is up WITHOUT Redis/);
    const ready = await fetch(`${started.base}/readyz`);
    assert.is(ready.status, 503);
    const body = (await ready.json()) as { checks: { redis: string }; causes?: { redis?: string } };
    assert.is(body.checks.redis, 'failing');
    assert.match(body.causes?.redis ?? '', readyz, JSON.stringify(body));
    // The jobs child's workers keep reconnecting meanwhile; a few rounds of that must stay quiet.
    await sleep(3_000);
    assert.is(await stop(started), 0);
    const lines = messages(started.output()).filter((line) => line.includes(setting));
    // On a loaded host a check of the store can go unanswered in time: the service says so, and names the cause
    // again once the store answers. Those lines are the host's timeouts, counted apart; any other is a repeat.
    const timedOut = (line: string | undefined) => line !== undefined && line.includes(': no answer in time:');
    const timeouts = lines.filter((line) => timedOut(line)).length;
    const again = (line: string, i: number) => timedOut(lines[i - 1]) && lines.indexOf(line) < i;
    const said = lines.filter((line, i) => !timedOut(line) && !again(line, i));
    assert.is(
      said.length,
      1,
      `one line names ${setting} (besides ${timeouts} check(s) timed out and the cause named again after each):\n${started.output()}`,
    );
    assert.match(said[0]!, cause, started.output());
    for (const line of lines) assert.not.match(line, /s3cret|other-password/, 'no password in the line');
    // Said before the children start (each waits seconds for Redis), not with the banner after them.
    assertNamedFirst(started.output(), setting, /job processors started|Paceline is up/);
    assertNoStack(started.output());
    return started.output();
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

test('REDIS_URL or REDIS_CLUSTER_NODES on a closed port: one line, said first; a banner without Redis', async () => {
  const [closed, node1, node2, ...ports] = await findFreePorts(5);
  await Promise.all([
    startWithout(
      ports[0]!,
      { REDIS_URL: `redis://127.0.0.1:${closed}` },
      /connection refused.*start Redis there or correct REDIS_URL/,
    ),
    startWithout(
      ports[1]!,
      { REDIS_CLUSTER_NODES: `127.0.0.1:${node1},127.0.0.1:${node2}` },
      /REDIS_CLUSTER_NODES 127\.0\.0\.1:\d+,127\.0\.0\.1:\d+: connection refused \(127\.0\.0\.1:\d+\): start Redis/,
      /REDIS_CLUSTER_NODES/,
    ),
  ]);
});

test('a Unix socket that is not there: one line naming it; every process logs its reconnections at debug, no stack', async () => {
  const port = await findFreePort();
  const socket = join(process.env.TEST_TMP_DIR ?? '/tmp', 'store-errors-no-such.sock');
  const output = await startWithout(
    port,
    { REDIS_URL: `unix://${socket}`, LOG_LEVEL: 'debug' },
    /REDIS_URL unix:\/\/\/.*: no socket at \/.*no-such\.sock: start Redis there or correct REDIS_URL/,
    /no socket at/,
  );
  // The jobs child's BullMQ worker and queue keep reconnecting: each attempt one debug line with its cause.
  const reconnects = entries(output).filter((entry) => /^(reports worker|report queue): Redis/.test(entry.msg));
  assert.ok(reconnects.length > 0, `the jobs child's reconnections are logged:\n${output}`);
  assert.ok(
    reconnects.every((entry) => entry.level === 20),
    `at debug:\n${reconnects.map((e) => e.msg).join('\n')}`,
  );
});

test('a Redis that wants a password it was not given, or another one: one line, no stack', async () => {
  const [redisPort, ...ports] = await findFreePorts(3);
  const redis = await startRedis({
    dataDir: join(process.env.TEST_TMP_DIR ?? '/tmp', 'store-errors-redis'),
    port: redisPort!,
    persistent: false,
    password: 's3cret',
  });
  try {
    // The embedded Redis has one user, `paceline`, and no default user: no credentials at all is NOAUTH.
    const bare = new URL(redis.url);
    bare.username = '';
    bare.password = '';
    const wrong = new URL(redis.url);
    wrong.password = 'other-password';
    await Promise.all([
      startWithout(ports[0]!, { REDIS_URL: bare.href }, /refused \(NOAUTH.*redis:\/\/USER:PASSWORD@.*REDIS_PASSWORD/),
      startWithout(
        ports[1]!,
        { REDIS_URL: wrong.href },
        /password was refused \(WRONGPASS.*redis:\/\/paceline:PASSWORD@/,
      ),
    ]);
  } finally {
    await redis.stop();
  }
});

test('a Redis that comes up later is said to answer again, once, and the service is ready', async () => {
  const redisPort = await findFreePort();
  const password = newRedisPassword();
  const started = start(
    { DATABASE_URL: database!.url, REDIS_URL: embeddedRedisUrl(redisPort, password) },
    await findFreePort(),
  );
  let redis: Awaited<ReturnType<typeof startRedis>> | undefined;
  try {
    await waitFor(started, /Paceline is up WITHOUT Redis/);
    redis = await startRedis({
      dataDir: join(process.env.TEST_TMP_DIR ?? '/tmp', 'store-errors-later'),
      port: redisPort,
      persistent: false,
      password,
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

/** Starts on `port` with a DATABASE_URL it cannot use, and resolves with what it said once it gave up (exit 1). */
async function startUnable(port: number, databaseUrl: string): Promise<string> {
  const started = start({ DATABASE_URL: databaseUrl, REDIS_URL: process.env.TEST_REDIS_URL ?? '' }, port);
  const [code] = await once(started.child, 'exit');
  assert.is(code, 1, started.output());
  return started.output();
}

/** A server that takes connections and never answers: what one behind a firewall that drops packets looks like. */
async function startSilentServer(): Promise<{ port: number; close(): void }> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket.on('error', () => {}));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    close: () => {
      for (const socket of sockets) socket.destroy();
      server.close();
    },
  };
}

test('a DATABASE_URL the start cannot use: one line; one that never answers: said while the start waits', async () => {
  const silent = await startSilentServer();
  const [closed, ...ports] = await findFreePorts(5);
  const changed = (change: (url: URL) => unknown) => {
    const url = new URL(database!.url);
    change(url);
    return url.href;
  };
  // A server that never answers keeps the start waiting for its connection timeout (10 s), then it
  // stops as for a refused one; only the wait is watched here, to keep this test short.
  const unanswered = changed((url) => (url.host = `127.0.0.1:${silent.port}`));
  const waiting = start({ DATABASE_URL: unanswered, REDIS_URL: process.env.TEST_REDIS_URL ?? '' }, ports[3]!);
  try {
    const [missing, refused, refusedPassword] = await Promise.all([
      startUnable(
        ports[0]!,
        changed((url) => (url.pathname = '/no_such_database')),
      ),
      startUnable(
        ports[1]!,
        changed((url) => (url.port = String(closed))),
      ),
      startUnable(
        ports[2]!,
        changed((url) => (url.password = 'other-password')),
      ),
      waitFor(waiting, /waiting for PostgreSQL/, 30_000),
    ]);
    const causes: Array<[string, RegExp]> = [
      [missing, /no_such_database: database "no_such_database" does not exist: create that database/],
      [refused, /: connection refused \([^)]*:\d+\): start PostgreSQL there or correct DATABASE_URL/],
      [refusedPassword, /: the password was refused \(.*\): put the right user and password in DATABASE_URL/],
    ];
    for (const [output, cause] of causes) {
      // One line, which names the setting and what is wrong, and ends the start.
      const lines = output.trim().split('\n');
      assert.is(lines.length, 1, output);
      assert.match(lines[0]!, /^paceline: could not start: DATABASE_URL postgres:/);
      assert.match(lines[0]!, cause);
    }
    // What the start waits for is its first line, said while it still waits.
    assert.not.match(waiting.output(), /could not start/);
    assert.match(
      messages(waiting.output())[0]!,
      /^waiting for PostgreSQL at DATABASE_URL postgres:\/\/\S+:\*\*\*@127\.0\.0\.1:\d+\/\S+: no answer yet/,
    );
    for (const output of [missing, refused, refusedPassword, waiting.output()]) {
      assert.not.match(output, new URL(database!.url).password || 'never-matches');
      assert.not.match(output, /other-password/);
      assertNoStack(output);
    }
  } finally {
    waiting.child.kill('SIGKILL');
    silent.close();
  }
});

test.run();
