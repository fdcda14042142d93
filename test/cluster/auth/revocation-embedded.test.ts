import { randomUUID } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { startCluster, type RunningCluster } from '../../helpers/cluster.js';
import { runCli } from '../../helpers/cli.js';
import { findFreePort } from '../../../src/embedded/ports.js';

// docs/operations.md "Users": revocation on the stores exactly as `npm start` runs them (no DATABASE_URL
// or REDIS_URL: the embedded PostgreSQL through its service role, the embedded Redis with its password
// and its one ACL user, `default` switched off). The CLI reaches that Redis as the service does.

const TMP = process.env.TEST_TMP_DIR;
if (!TMP) throw new Error('TEST_TMP_DIR is not set: run tests with `npm test`');

const test = suite('revocation on the embedded stores, as npm start runs them');
const WORKERS = 2;
let dataDir: string;
let env: Record<string, string>;
let cluster: RunningCluster;

interface Answer {
  status: number;
  /** The web worker that answered, by the pid on its access line. */
  pid: number | undefined;
}

/** GET /api/tasks/ with `token` on a connection of its own, so the primary hands it to the next worker. */
async function ask(token: string): Promise<Answer> {
  const id = randomUUID();
  const status = await new Promise<number>((resolve, reject) => {
    const sent = httpRequest(
      `${cluster.base}/api/tasks/`,
      { agent: false, headers: { Authorization: `Bearer ${token}`, 'X-Request-Id': id, Connection: 'close' } },
      (response) => {
        response.resume();
        response.on('end', () => resolve(response.statusCode!));
      },
    );
    sent.on('error', reject);
    sent.end();
  });
  for (let tries = 0; tries < 20; tries++) {
    const line = cluster
      .output()
      .split('\n')
      .find((text) => text.includes(`"requestId":"${id}"`));
    if (line) return { status, pid: (JSON.parse(line) as { pid: number }).pid };
    await sleep(50);
  }
  return { status, pid: undefined };
}

/** Uses `token` until every web worker has served it (and so remembers it): at most 40 requests. */
async function useOnEveryWorker(token: string): Promise<void> {
  const served = new Set<number>();
  for (let sent = 0; served.size < WORKERS && sent < 40; sent++) {
    const answer = await ask(token);
    assert.is(answer.status, 200, 'the live token is served');
    if (answer.pid !== undefined) served.add(answer.pid);
  }
  assert.is(served.size, WORKERS, `every worker served the token (${[...served].join(', ')})`);
}

/**
 * Every worker refuses `token` right after the command: bursts of 8 fresh connections, all 401, until both
 * workers have answered (they accept from one socket, and a burst may all go to one of them). Each worker
 * remembers a token it served for up to 60 s, so a worker that was not told would still answer 200 here.
 */
async function assertRefusedEverywhere(token: string): Promise<void> {
  const answers: Array<{ status: number; pid?: number }> = [];
  while (answers.length < 80 && new Set(answers.map((answer) => answer.pid)).size < WORKERS)
    answers.push(...(await Promise.all(Array.from({ length: 8 }, () => ask(token)))));
  assert.equal(
    answers.map((answer) => answer.status),
    Array(answers.length).fill(401),
    'the revoked token is refused on every connection',
  );
  assert.is(new Set(answers.map((answer) => answer.pid)).size, WORKERS, 'both workers answered');
}

async function login(): Promise<string> {
  const response = await fetch(`${cluster.base}/api/auth/token/`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ username: 'alice', password: 'alice-pass-123' }),
  });
  const body = (await response.json()) as { token?: string };
  assert.is(response.status, 200, JSON.stringify(body));
  return body.token!;
}

test.before(async () => {
  dataDir = await mkdtemp(join(TMP, 'revocation-embedded-'));
  await chmod(dataDir, 0o711); // run as root, the stores run as accounts of their own
  env = {
    DATA_DIR: dataDir,
    DATABASE_URL: '',
    REDIS_URL: '',
    REDIS_CLUSTER_NODES: '',
    CURSOR_SECRET: '',
    EMBEDDED_PG_PORT: String(await findFreePort()),
    EMBEDDED_REDIS_PORT: String(await findFreePort()),
    WEB_CONCURRENCY: String(WORKERS),
    JOB_CONCURRENCY: '0',
    LOG_LEVEL: 'info',
    ACCESS_LOG: 'all',
    // Refused tokens count against the address's anonymous budget: bursts until both workers answer may pass 20.
    THROTTLE_ANON: '1000/min',
  };
  cluster = await startCluster(env, 120_000);
  const created = await runCli({ ...env, PASSWORD: 'alice-pass-123' }, ['user:create', 'alice']);
  assert.is(created.code, 0, created.stderr);
});

test.after(async () => {
  await cluster?.stop('SIGTERM', 60_000); // the primary stops its stores
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

for (const command of ['token:revoke', 'user:disable']) {
  test(`${command} exits 0 and every worker refuses the token at once`, async () => {
    const token = await login();
    await useOnEveryWorker(token);
    const run = await runCli(env, [command, 'alice']);
    assert.is(run.code, 0, run.stderr);
    assert.match(run.stdout, /every server looks its remembered tokens up again\n$/);
    await assertRefusedEverywhere(token);
  });
}

test.run();
