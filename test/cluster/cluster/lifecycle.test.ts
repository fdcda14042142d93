import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { createServer, Socket, type AddressInfo } from 'node:net';
import { readFileSync, readlinkSync } from 'node:fs';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { createUser } from '../../../src/auth/users.repository.js';
import { connectDatabase } from '../../../db/connect.js';
import { ENTRY, childPids, startCluster, type RunningCluster } from '../../helpers/cluster.js';
import { testStoresEnv } from '../../helpers/test-stores-env.js';
import { createTestDatabase } from '../../helpers/database.js';
import { request } from '../../helpers/http.js';
import { isAlive } from '../../../src/cluster/processes.js';
import { NODE_MAJOR } from '../../../src/settings/node-runtime.js';
import { findFreePort } from '../../../src/embedded/ports.js';
import { join } from 'node:path';

// docs/architecture.md "Processes" on the real entry point: two web workers and a job worker as real processes; a
// killed worker is replaced while the service keeps answering; SIGHUP replaces the web workers
// with no failed request; SIGTERM lets in-flight requests finish and ends the whole tree with 0.

type Outcome = number | string; // a status, or the error code of a connection that failed

let cluster: RunningCluster;
let dropDatabase: () => Promise<void> = async () => {};
let token = '';

/** The primary's children by role, read from the environment the primary gave each of them. */
function children(role: 'web' | 'jobs'): number[] {
  return childPids(cluster.child.pid!).filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').includes(`PACELINE_CHILD_ROLE=${role}`);
    } catch {
      return false; // exited meanwhile
    }
  });
}

/** Polls until `check` returns a value, for at most `timeoutMs`. */
async function waitFor<T>(
  what: string,
  check: () => T | undefined | Promise<T | undefined>,
  timeoutMs = 60_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}\n${cluster.output().slice(-3000)}`);
    await sleep(100);
  }
}

/** GET on a connection of its own, so the primary hands successive requests to different workers. */
function getOnNewConnection(path: string, requestId: string): Promise<Outcome> {
  return new Promise((resolve) => {
    const req = httpRequest(
      new URL(path, cluster.base),
      { agent: false, headers: { 'X-Request-Id': requestId }, timeout: 10_000 },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
        res.on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? 'response error'));
      },
    );
    req.on('timeout', () => req.destroy(Object.assign(new Error('timeout'), { code: 'TIMEOUT' })));
    req.on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
    req.end();
  });
}

/** GET through fetch's keep-alive pool, as most clients send them. */
const getKeepAlive = (path: string, requestId: string): Promise<Outcome> =>
  fetch(new URL(path, cluster.base), {
    headers: { 'X-Request-Id': requestId },
    signal: AbortSignal.timeout(10_000),
  }).then(
    async (response) => (await response.arrayBuffer(), response.status),
    (error: Error & { cause?: { code?: string } }) => error.cause?.code ?? error.name,
  );

/**
 * Five clients (four with a new connection per request, one keep-alive) looping GET /api/tasks/ with request
 * ids `<tag>-<n>` until `done()` or `maxMs`, recording each outcome with its start time.
 */
async function loopRequests(
  tag: string,
  done: () => boolean,
  maxMs: number,
): Promise<Array<{ at: number; outcome: Outcome }>> {
  const results: Array<{ at: number; outcome: Outcome }> = [];
  const deadline = Date.now() + maxMs;
  const client = async (send: (path: string, requestId: string) => Promise<Outcome>) => {
    while (!done() && Date.now() < deadline) {
      const at = Date.now();
      results.push({ at, outcome: await send('/api/tasks/', `${tag}-${results.length}`) });
    }
  };
  // Several clients on new connections: each is handed to a web child by the primary, and a
  // reload must not leave one in the hands of a child that has gone (docs/architecture.md "Processes").
  await Promise.all([
    client(getOnNewConnection),
    client(getOnNewConnection),
    client(getOnNewConnection),
    client(getOnNewConnection),
    client(getKeepAlive),
  ]);
  return results;
}

/** The request ids of `lines` (the tree's JSON log) mapped to the pid that logged them. */
function servedBy(prefix: string): Map<string, number> {
  const served = new Map<string, number>();
  for (const line of cluster.output().split('\n')) {
    if (!line.includes(prefix)) continue;
    try {
      const entry = JSON.parse(line) as { requestId?: string; pid?: number; msg?: string };
      if (entry.msg === 'request' && entry.requestId?.startsWith(prefix)) served.set(entry.requestId, entry.pid!);
    } catch {
      // not a log line
    }
  }
  return served;
}

/** A POST whose headers the server has read (it answered 100 Continue) and whose body is still to come. */
function startSlowPost(
  body: string,
): Promise<{ finish(): Promise<{ status: number; body: string } | { error: string }> }> {
  return new Promise((resolveStarted, rejectStarted) => {
    let settle: (value: { status: number; body: string } | { error: string }) => void = () => {};
    const finished = new Promise<{ status: number; body: string } | { error: string }>((resolve) => (settle = resolve));
    const req = httpRequest(new URL('/api/tasks/', cluster.base), {
      method: 'POST',
      agent: false,
      headers: {
        'Content-Type': 'application/json',
        'Content-Length': Buffer.byteLength(body),
        Expect: '100-continue',
        Authorization: `Bearer ${token}`,
      },
    });
    req.on('continue', () => resolveStarted({ finish: () => (req.end(body), finished) }));
    req.on('response', (res: IncomingMessage) => {
      let text = '';
      res.on('data', (chunk) => (text += chunk));
      res.on('end', () => settle({ status: res.statusCode ?? 0, body: text }));
    });
    req.on('error', (error: NodeJS.ErrnoException) => {
      settle({ error: error.code ?? error.message });
      rejectStarted(error);
    });
    req.flushHeaders();
  });
}

const Lifecycle = suite('the process tree: serve, survive a crash, reload, drain');

Lifecycle.before(async () => {
  const database = await createTestDatabase('lifecycle');
  dropDatabase = database.drop;
  const db = connectDatabase(database.url, 1);
  await createUser(db, 'alice', 'alice-pass-123');
  await db.destroy();
  cluster = await startCluster({
    ...testStoresEnv('lifecycle', database.url),
    WEB_CONCURRENCY: '2',
    JOB_CONCURRENCY: '1',
    LOG_LEVEL: 'info',
    // Throttling is tested elsewhere; a huge rate here would make every request move a large log in Redis.
    THROTTLE_ENABLED: 'false',
    SHUTDOWN_TIMEOUT_MS: '15000',
  });
  await waitFor('two web workers and a job worker', () =>
    children('web').length === 2 && children('jobs').length === 1 ? true : undefined,
  );
  const login = await request(cluster.base, 'POST', '/api/auth/token/', {
    body: { username: 'alice', password: 'alice-pass-123' },
  });
  assert.is(login.status, 200, login.text);
  token = login.body.token;
});

Lifecycle.after(async () => {
  await cluster?.stop('SIGKILL');
  await dropDatabase();
});

Lifecycle(`every process of the tree runs on Node.js ${NODE_MAJOR}, the line package.json names`, () => {
  const tree = [cluster.child.pid!, ...children('web'), ...children('jobs')];
  assert.is(tree.length, 4, 'the primary, two web workers and a job worker');
  for (const pid of tree) {
    const runtime = readlinkSync(`/proc/${pid}/exe`);
    const version = execFileSync(runtime, ['-p', 'process.versions.node'], { encoding: 'utf8' }).trim();
    assert.is(version.split('.')[0], String(NODE_MAJOR), `pid ${pid} runs ${runtime}, Node.js ${version}`);
  }
});

Lifecycle('both web workers serve: requests on new connections are answered by two distinct pids', async () => {
  // They accept from one socket, the first with time to spare taking what waits (docs/throttling.md "Past capacity:
  // admission and shedding"): a burst may go to one of them, so bursts are sent until both have answered.
  const web = children('web');
  let sent = 0;
  let pids = new Set<number>();
  while (sent < 240 && pids.size < 2) {
    const batch = Array.from({ length: 12 }, (_, i) => getOnNewConnection('/api/tasks/', `lc-serve-${sent + i}`));
    sent += batch.length;
    assert.equal([...new Set(await Promise.all(batch))], [200]);
    const served = await waitFor(
      'the request log lines',
      () => {
        const seen = servedBy('lc-serve-');
        return seen.size === sent ? seen : undefined;
      },
      10_000,
    );
    pids = new Set(served.values());
  }
  assert.equal([...pids].sort(), [...web].sort(), `after ${sent} requests`);
});

Lifecycle('a SIGKILLed web worker is replaced by a new process and the service answers throughout', async () => {
  const [victim, survivor] = children('web') as [number, number];
  const notices = () => cluster.output().split('child exited unexpectedly').length;
  const noticesBefore = notices();
  let replacement: number | undefined;
  let noticedAt = Infinity;
  const polling = loopRequests('lc-kill', () => replacement !== undefined, 60_000);
  process.kill(victim, 'SIGKILL');
  replacement = await waitFor('a replacement web worker serving requests', () => {
    if (noticedAt === Infinity && notices() > noticesBefore) noticedAt = Date.now();
    const fresh = children('web').find((pid) => pid !== victim && pid !== survivor);
    return fresh !== undefined && [...servedBy('lc-kill-').values()].includes(fresh) ? fresh : undefined;
  });
  const results = await polling;
  assert.ok(!isAlive(victim));
  assert.equal(children('web').sort(), [survivor, replacement].sort());
  // A request the killed worker had already accepted dies with it; once the primary has noticed
  // the death (its log says so), no request fails.
  const afterNotice = results.filter((r) => r.at > noticedAt);
  assert.ok(afterNotice.length > 10, `only ${afterNotice.length} requests after the primary noticed`);
  const failed = afterNotice.filter((r) => r.outcome !== 200);
  assert.equal(failed, [], `${failed.length} of ${afterNotice.length} requests failed after the primary noticed`);
});

Lifecycle('SIGHUP, even twice in a row, replaces the web workers one at a time with no failed request', async () => {
  const primary = cluster.child.pid!;
  const old = children('web');
  const jobs = children('jobs');
  const reloadsDone = () => cluster.output().split('web workers replaced').length;
  const doneBefore = reloadsDone();
  let settled = false;
  const polling = loopRequests('lc-reload', () => settled, 120_000);
  await sleep(200);
  process.kill(primary, 'SIGHUP');
  // A second signal while the first reload runs extends it: it must not run a second one beside it.
  const first = await waitFor('the first new web worker', () => children('web').find((pid) => !old.includes(pid)));
  process.kill(primary, 'SIGHUP');
  await waitFor('both reloads to finish', () => (reloadsDone() >= doneBefore + 2 ? true : undefined), 120_000);
  settled = true;
  const results = await polling;
  const web = children('web');
  assert.is(web.length, 2, `web workers after two reloads: ${web.join(', ')}`);
  assert.ok(
    web.every((pid) => !old.includes(pid) && pid !== first),
    'every web worker was started after the last signal',
  );
  assert.ok(
    [...old, first].every((pid) => !isAlive(pid)),
    'the replaced web workers exited',
  );
  const failed = results.filter((r) => r.outcome !== 200);
  assert.ok(results.length > 20, `only ${results.length} requests during the reload`);
  assert.equal(failed, [], `${failed.length} of ${results.length} requests failed during the reload`);
  assert.equal(children('jobs'), jobs, 'the job worker is left alone');
});

Lifecycle('SIGTERM: in-flight requests complete, then the whole tree exits 0 leaving no process behind', async () => {
  const tree = [...children('web'), ...children('jobs')];
  assert.is(tree.length, 3);
  const slow = await Promise.all(
    Array.from({ length: 10 }, (_, i) => startSlowPost(JSON.stringify({ title: `in flight ${i}` }))),
  );
  const drainsBefore = cluster.output().split('"msg":"draining"').length;
  const stopped = cluster.stop('SIGTERM');
  await waitFor(
    'both web workers to drain',
    () => (cluster.output().split('"msg":"draining"').length >= drainsBefore + 2 ? true : undefined),
    30_000,
  );
  await waitFor(
    'new connections to be refused',
    async () => ((await getOnNewConnection('/healthz', 'lc-late')) === 'ECONNREFUSED' ? true : undefined),
    10_000,
  );
  const answers = await Promise.all(slow.map((s) => s.finish()));
  assert.equal(
    answers.map((a) => ('status' in a ? a.status : a.error)),
    answers.map(() => 201),
  );
  assert.is(await stopped, 0, cluster.output().slice(-3000));
  assert.equal(tree.filter(isAlive), [], 'children left running');
  assert.equal(children('web').length + children('jobs').length, 0);
  const errors = cluster
    .output()
    .split('\n')
    .filter((line) => /"level":(50|60)/.test(line));
  assert.equal(errors, [], 'errors were logged');
});

Lifecycle.run();

const ProcessManager = suite('npm start under a process manager');

ProcessManager('SIGTERM to the PID of `npm start` stops the service and everything it started', async () => {
  const database = await createTestDatabase('lifecycle-npm');
  let started: number[] = [];
  try {
    cluster = await startCluster(
      { ...testStoresEnv('lifecycle-npm', database.url), WEB_CONCURRENCY: '1', THROTTLE_ENABLED: 'false' },
      60_000,
      true,
    );
    const primary = childPids(cluster.child.pid!);
    assert.is(primary.length, 1, 'npm runs the service as its child');
    const web = childPids(primary[0]!);
    started = [...primary, ...web];
    assert.ok(web.length >= 1, 'the primary has its web worker');
    assert.is(await cluster.stop('SIGTERM'), 0, cluster.output().slice(-3000));
    await waitFor(
      'the primary and its workers to exit',
      () => ([...primary, ...web].some(isAlive) ? undefined : true),
      20_000,
    );
    assert.is(await getOnNewConnection('/healthz', 'lc-npm-late'), 'ECONNREFUSED');
  } finally {
    await cluster?.stop('SIGKILL');
    // npm does not pass SIGKILL on: end what it started, so a failure leaves nothing running
    for (const pid of started.filter(isAlive)) process.kill(pid, 'SIGKILL');
    await database.drop();
  }
});

ProcessManager.run();

const Refusal = suite('a start that cannot succeed ends at once with one line');

Refusal(
  'PORT held by another process: exit 1 with one line naming PORT, no worker forked, no stack trace',
  async () => {
    const database = await createTestDatabase('lifecycle-port');
    const holder = createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    const port = (holder.address() as AddressInfo).port;
    try {
      const child = spawn(process.execPath, [ENTRY.main], {
        env: {
          ...process.env,
          ...testStoresEnv('lifecycle-port', database.url),
          LOG_LEVEL: 'warn',
          HOST: '127.0.0.1',
          PORT: String(port),
          METRICS_PORT: '0',
          METRICS_HOST: '127.0.0.1',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let output = '';
      child.stdout.on('data', (chunk) => (output += chunk));
      child.stderr.on('data', (chunk) => (output += chunk));
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      const [code] = await once(child, 'exit');
      clearTimeout(timer);
      assert.is(code, 1, output);
      assert.is(
        output.trim(),
        `paceline: could not start: PORT ${port} on 127.0.0.1 cannot be served: another process is listening on it`,
      );
    } finally {
      holder.close();
      await database.drop();
    }
  },
);

Refusal.run();

const Bounded = suite('a stop, embedded stores included, ends within SHUTDOWN_TIMEOUT_MS');

Bounded(
  "a connection that never finishes its request holds the drain to its limit, yet npm start's tree (stores too) exits 0 in time",
  async () => {
    const tmp = process.env.TEST_TMP_DIR;
    if (!tmp) throw new Error('TEST_TMP_DIR is not set: run tests with `npm test`');
    const dataDir = await mkdtemp(join(tmp, 'lifecycle-bounded-'));
    await chmod(dataDir, 0o711); // run as root, the embedded PostgreSQL runs as the postgres user
    const socket = new Socket();
    try {
      cluster = await startCluster({
        DATABASE_URL: '',
        REDIS_URL: '',
        DATA_DIR: dataDir,
        CURSOR_SECRET: 'lifecycle-bounded-secret-0123456789',
        EMBEDDED_PG_PORT: String(await findFreePort()),
        EMBEDDED_REDIS_PORT: String(await findFreePort()),
        WEB_CONCURRENCY: '1',
        JOB_CONCURRENCY: '1',
        SHUTDOWN_TIMEOUT_MS: '6000',
        DATABASE_STATEMENT_TIMEOUT_MS: '2000',
      });
      await new Promise<void>((resolve) => socket.connect(cluster.port, '127.0.0.1', resolve));
      socket.on('error', () => {});
      socket.write('GET /api/tasks/ HTTP/1.1\r\nHost: x\r\n'); // headers never finished
      await sleep(200);
      const started = Date.now();
      const code = await cluster.stop('SIGTERM', 30_000);
      const took = Date.now() - started;
      assert.is(code, 0, cluster.output().slice(-3000));
      assert.ok(took < 6_000, `stopped in ${took} ms`);
      assert.is(childPids(cluster.child.pid!).length, 0);
    } finally {
      socket.destroy();
      await cluster?.stop('SIGKILL');
      await rm(dataDir, { recursive: true, force: true });
    }
  },
);

Bounded.run();
