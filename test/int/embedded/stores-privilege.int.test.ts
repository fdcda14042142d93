import { execFileSync } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import fsp, { chmod, mkdir, mkdtemp, readdir } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { findFreePort } from '../../../src/embedded/ports.js';
import { startEmbeddedPostgres } from '../../../src/embedded/postgres.js';
import { startRedis } from '../../../src/embedded/redis.js';
import { redisSay } from '../../helpers/redis-say.js';

// docs/security.md "Least privilege": the embedded PostgreSQL's superuser password is never in a file
// another local user can read, not even while initdb runs; the service's Redis user may run what
// the service runs (scripts, data, pub/sub, BullMQ) and none of the admin commands; as root the
// embedded Redis runs as an account of its own, neither root nor PostgreSQL's.

const TMP = process.env.TEST_TMP_DIR;
const REDIS_URL = process.env.TEST_REDIS_URL;
if (!TMP || !REDIS_URL) throw new Error('TEST_TMP_DIR and TEST_REDIS_URL are not set: run tests with `npm test`');

const asRoot = process.getuid!() === 0;
const uidOfAccount = (name: string) => Number(execFileSync('id', ['-u', name], { encoding: 'utf8' }));

/** Whether a user who is neither the owner nor in the group could read `path`: o+x on every parent, o+r on it. */
function readableByOthers(path: string): boolean {
  for (let dir = dirname(path); ; dir = dirname(dir)) {
    if ((statSync(dir).mode & 0o001) === 0) return false;
    if (dir === dirname(dir)) break;
  }
  return (statSync(path).mode & 0o004) !== 0;
}

const Postgres = suite("the embedded PostgreSQL's superuser password");

Postgres('is never in a file another user can read, not even while initdb runs', async () => {
  const root = await mkdtemp(join(TMP, 'pg-secret-'));
  await chmod(root, 0o755);
  // A shared, world-writable TMPDIR like /tmp, where the package used to put the password file.
  const shared = join(root, 'tmp');
  await mkdir(shared);
  await chmod(shared, 0o1777);
  const dataDir = join(root, 'data', 'pg');
  const seen: Array<{ path: string; readable: boolean }> = [];
  // Every file the package writes, inspected the moment it is written (before initdb reads it).
  const writeFile = fsp.writeFile;
  fsp.writeFile = (async (...args: Parameters<typeof writeFile>) => {
    await writeFile(...args);
    const path = String(args[0]);
    if (basename(path).startsWith('pg-password-')) seen.push({ path, readable: readableByOthers(path) });
  }) as typeof writeFile;
  const previous = process.env.TMPDIR;
  process.env.TMPDIR = shared;
  try {
    const server = await startEmbeddedPostgres({ dataDir, port: await findFreePort(), persistent: false });
    await server.stop();
  } finally {
    fsp.writeFile = writeFile;
    process.env.TMPDIR = previous;
  }
  assert.is(seen.length, 1, 'the package wrote its password file once (the watch sees it)');
  assert.not.ok(seen[0]!.readable, `${seen[0]!.path} could be read by another user`);
  assert.not.ok(seen[0]!.path.startsWith(shared), 'not in the shared TMPDIR');
  assert.equal(await readdir(shared), [], 'nothing was left in TMPDIR');
  const beside = (await readdir(dirname(dataDir))).filter((name) => name !== 'pg');
  assert.equal(beside, [], 'nothing was left beside the data directory');
});

const Acl = suite("the service's Redis user");

Acl('runs what the service runs: data, scripts, pub/sub, INFO and a BullMQ job', async () => {
  assert.is(new URL(REDIS_URL).username, 'paceline', 'the service connects as its own user');
  const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
  const prefix = `test:acl:${process.pid}:`;
  try {
    assert.is(await redis.set(`${prefix}k`, '1', 'PX', 60_000), 'OK');
    assert.is(await redis.eval("return redis.call('INCR', KEYS[1])", 1, `${prefix}k`), 2);
    const sha = (await redis.script('LOAD', "return redis.call('GET', KEYS[1])")) as string;
    assert.is(await redis.evalsha(sha, 1, `${prefix}k`), '2');
    assert.is(await redis.publish(`${prefix}channel`, 'hi'), 0);
    assert.match(await redis.info('server'), /redis_version:/);
    await redis.del(`${prefix}k`);
  } finally {
    redis.disconnect();
  }
  const connection = { url: REDIS_URL };
  const queue = new Queue('acl-check', { connection, prefix });
  const worker = new Worker('acl-check', async (job) => (job.data as { n: number }).n * 2, { connection, prefix });
  try {
    const done = new Promise<unknown>((resolve, reject) => {
      worker.on('completed', (_job, value) => resolve(value));
      worker.on('failed', (_job, error) => reject(error));
      worker.on('error', reject);
    });
    await queue.add('double', { n: 21 });
    assert.is(await done, 42);
  } finally {
    await worker.close();
    await queue.obliterate({ force: true });
    await queue.close();
  }
});

Acl('is refused FLUSHALL, FLUSHDB, CONFIG, KEYS, SHUTDOWN, DEBUG, ACL, MONITOR and SCRIPT FLUSH', async () => {
  const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
  try {
    for (const args of [
      ['FLUSHALL'],
      ['FLUSHDB'],
      ['CONFIG', 'GET', 'dir'],
      ['CONFIG', 'SET', 'dir', '/tmp'],
      ['KEYS', '*'],
      ['SHUTDOWN', 'NOSAVE'],
      ['DEBUG', 'SLEEP', '0'],
      ['ACL', 'LIST'],
      ['MONITOR'],
      ['SCRIPT', 'FLUSH'],
      ['CLIENT', 'KILL', 'TYPE', 'normal'],
    ]) {
      try {
        await redis.call(args[0]!, ...args.slice(1));
        assert.unreachable(`${args.join(' ')} was run`);
      } catch (error) {
        // DEBUG is also switched off by the server itself (enable-debug-command no).
        assert.match((error as Error).message, /^NOPERM|^ERR DEBUG command not allowed/, args.join(' '));
      }
    }
    assert.is(await redis.ping(), 'PONG', 'the server is still there');
  } finally {
    redis.disconnect();
  }
  // The password alone (the `default` user) is no way in: that user is switched off.
  const password = decodeURIComponent(new URL(REDIS_URL).password);
  const port = Number(new URL(REDIS_URL).port);
  const reply = (await redisSay(port, `AUTH ${JSON.stringify(password)}\r\nFLUSHALL\r\n`, 2)).join('\n');
  assert.match(reply, /^-WRONGPASS[^\n]*\n-NOAUTH/, reply);
});

Acl('as root, the embedded Redis runs as an account of its own: not root, not PostgreSQL', async () => {
  const dataDir = join(await mkdtemp(join(TMP, 'redis-account-')), 'redis');
  await chmod(dirname(dataDir), 0o755);
  const redis = await startRedis({
    dataDir,
    port: await findFreePort(),
    persistent: false,
    password: 'acl-test-pass-0123',
  });
  try {
    const uid = Number(/^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${redis.pid}/status`, 'utf8'))![1]);
    if (asRoot) {
      assert.is(uid, uidOfAccount('paceline-redis'));
      assert.is.not(uid, 0);
      assert.is.not(uid, uidOfAccount('postgres'));
    } else {
      assert.is(uid, process.getuid!(), 'not root: it runs as the user who started it');
    }
    assert.is(statSync(dataDir).uid, uid, 'its data directory is its own');
  } finally {
    await redis.stop();
  }
});

Postgres.run();
Acl.run();
