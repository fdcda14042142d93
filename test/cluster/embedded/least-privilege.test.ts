import { execFileSync } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import { chmod, mkdtemp, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { connectDatabase } from '../../../db/connect.js';
import { migrateToLatest } from '../../../db/migrate.js';
import { ENTRY, childPids, startCluster, type RunningCluster } from '../../helpers/cluster.js';
import { redisSay } from '../../helpers/redis-say.js';
import { createUser } from '../../../src/auth/users.repository.js';
import { findFreePort } from '../../../src/embedded/ports.js';
import { startEmbeddedPostgres } from '../../../src/embedded/postgres.js';

// docs/security.md "Least privilege", on the real entry point with its embedded stores (no DATABASE_URL
// or REDIS_URL), started on a data directory as the previous release left it: tables owned by
// the superuser, no service role, a Redis without a password.

const TMP = process.env.TEST_TMP_DIR;
if (!TMP) throw new Error('TEST_TMP_DIR is not set: run tests with `npm test`');

const test = suite('least privilege of the embedded stores');
let dataDir: string;
let env: Record<string, string>;
let cluster: RunningCluster | undefined;
let output = ''; // everything every start printed

/** Starts the primary and waits for its banner (the job child is up too, then). */
async function start(): Promise<RunningCluster> {
  cluster = await startCluster(env, 120_000);
  for (const deadline = Date.now() + 120_000; !cluster.output().includes('Paceline is up'); await sleep(200)) {
    if (Date.now() > deadline) throw new Error(`no banner within 120 s:\n${cluster.output()}`);
  }
  return cluster;
}

async function stop(): Promise<void> {
  if (cluster === undefined) return;
  const code = await cluster.stop('SIGTERM', 60_000);
  output += cluster.output();
  cluster = undefined;
  assert.is(code, 0, 'the primary stopped cleanly');
}

/** The children of the primary: its workers and its stores, with their command lines. */
function children(): Array<{ pid: number; argv: string[] }> {
  return childPids(cluster!.child.pid!).map((pid) => ({
    pid,
    argv: readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean),
  }));
}

const redisServer = () => children().find(({ argv }) => argv[0]?.startsWith('redis-server'))!;
const uidOf = (pid: number) => Number(/^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]);
/** The value of `name` in a process's environment. */
const envOf = (pid: number, name: string) =>
  readFileSync(`/proc/${pid}/environ`, 'utf8')
    .split('\0')
    .find((entry) => entry.startsWith(`${name}=`))
    ?.slice(name.length + 1);

async function query<T extends pg.QueryResultRow>(url: string, text: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(text)).rows;
  } finally {
    await client.end();
  }
}

test.before(async () => {
  dataDir = await mkdtemp(join(TMP, 'least-privilege-'));
  await chmod(dataDir, 0o711); // run as root, the stores run as the postgres account
  const [pgPort, redisPort] = [await findFreePort(), await findFreePort()];
  // The previous release's data: migrated and written by the superuser, which owns every table.
  const old = await startEmbeddedPostgres({ dataDir: join(dataDir, 'pg'), port: pgPort, persistent: true });
  try {
    const db = connectDatabase(old.url, 1);
    await migrateToLatest(db);
    await createUser(db, 'olduser', 'old-user-pass-1');
    await db.destroy();
  } finally {
    await old.stop();
  }
  env = {
    DATA_DIR: dataDir,
    DATABASE_URL: '',
    REDIS_URL: '',
    CURSOR_SECRET: '',
    EMBEDDED_PG_PORT: String(pgPort),
    EMBEDDED_REDIS_PORT: String(redisPort),
    WEB_CONCURRENCY: '1',
    JOB_CONCURRENCY: '1',
    LOG_LEVEL: 'info',
  };
  await start();
});

test.after(async () => {
  await cluster?.stop('SIGTERM', 60_000); // the primary stops its stores
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

test('the passwords are generated into files only their owner can read', async () => {
  for (const file of ['redis-password', 'pg/.paceline-service-password', 'pg/.paceline-password']) {
    const { mode } = statSync(join(dataDir, file));
    assert.is((mode & 0o777).toString(8), '600', file);
    assert.ok((await readFile(join(dataDir, file), 'utf8')).trim().length >= 24, `${file} holds a long secret`);
  }
});

test('Redis refuses a client without the password, runs as an account of its own that owns its data, and gives the service no admin commands', async () => {
  const port = Number(env.EMBEDDED_REDIS_PORT);
  const password = (await readFile(join(dataDir, 'redis-password'), 'utf8')).trim();
  assert.match((await redisSay(port, 'PING\r\nSET stolen 1\r\n', 2)).join('\n'), /^-NOAUTH.*\n-NOAUTH/);
  const bulk = (text: string) => `$${Buffer.byteLength(text)}\r\n${text}\r\n`;
  const defaultAuth = `*2\r\n$4\r\nAUTH\r\n${bulk(password)}`;
  assert.match((await redisSay(port, defaultAuth, 1))[0]!, /^-WRONGPASS/, 'the default user is off');
  const auth = `*3\r\n$4\r\nAUTH\r\n${bulk('paceline')}${bulk(password)}`;
  assert.equal(await redisSay(port, `${auth}PING\r\n`, 2), ['+OK', '+PONG']);
  const [, flush, config, shutdown, size] = await redisSay(
    port,
    `${auth}FLUSHALL\r\nCONFIG GET dir\r\nSHUTDOWN\r\nDBSIZE\r\n`,
    5,
  );
  for (const [command, reply] of Object.entries({ FLUSHALL: flush, CONFIG: config, SHUTDOWN: shutdown }))
    assert.match(reply!, /^-NOPERM/, `${command} is refused to the service`);
  assert.ok(Number(size!.slice(1)) > 0, `the data is all there: DBSIZE ${size}`);

  const redis = redisServer();
  assert.not.ok(redis.argv.join(' ').includes(password), 'the password is not in its command line');
  const uid = uidOf(redis.pid);
  if (process.getuid!() === 0) {
    assert.is.not(uid, 0, 'redis-server does not run as root');
    assert.is.not(uid, Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' })), 'nor as PostgreSQL');
    assert.is(uid, Number(execFileSync('id', ['-u', 'paceline-redis'], { encoding: 'utf8' })));
    assert.is.not(statSync(join(dataDir, 'pg')).uid, uid, "PostgreSQL's files are not its own");
  } else {
    assert.is(uid, process.getuid!(), 'not root: it runs as the user who started Paceline');
  }
  assert.is(statSync(join(dataDir, 'redis')).uid, uid, 'its data directory is its own');
  assert.is((statSync(join(dataDir, 'redis')).mode & 0o777).toString(8), '700');

  const child = children().find(({ argv }) => !argv[0]!.startsWith('redis-server') && !argv[0]!.endsWith('postgres'))!;
  assert.is(
    envOf(child.pid, 'REDIS_URL'),
    `redis://paceline:${encodeURIComponent(password)}@127.0.0.1:${port}`,
    'children get the service user and its password in their REDIS_URL',
  );
});

test('the service connects to PostgreSQL as a role that is no superuser and owns every table, the old ones too', async () => {
  const web = children().find(({ argv }) => argv.some((arg) => arg.endsWith(ENTRY.main)))!;
  const serviceUrl = envOf(web.pid, 'DATABASE_URL')!;
  assert.is(new URL(serviceUrl).username, 'paceline');
  const [role] = await query<{ rolsuper: boolean; rolcreatedb: boolean; rolcreaterole: boolean }>(
    serviceUrl,
    'SELECT rolsuper, rolcreatedb, rolcreaterole FROM pg_roles WHERE rolname = current_user',
  );
  assert.equal(role, { rolsuper: false, rolcreatedb: false, rolcreaterole: false });
  const tables = await query<{ tablename: string; tableowner: string }>(
    serviceUrl,
    "SELECT tablename, tableowner FROM pg_tables WHERE schemaname = 'public'",
  );
  assert.ok(tables.length >= 10 && tables.some((t) => t.tablename === 'users'), tables.map((t) => t.tablename).join());
  assert.equal(
    tables.filter((t) => t.tableowner !== 'paceline'),
    [],
    'every table belongs to the service role',
  );
  // Read as the superuser: the service role sees its own sessions only.
  const adminUrl = Object.assign(new URL(serviceUrl), { username: 'postgres' });
  adminUrl.password = encodeURIComponent((await readFile(join(dataDir, 'pg/.paceline-password'), 'utf8')).trim());
  const sessions = await query<{ usename: string }>(
    adminUrl.href,
    "SELECT DISTINCT usename FROM pg_stat_activity WHERE application_name LIKE 'paceline%'",
  );
  assert.equal(
    sessions.map((s) => s.usename),
    ['paceline'],
    'every connection of the workers is the service role',
  );
  const [owner] = await query<{ owner: string }>(
    serviceUrl,
    'SELECT pg_get_userbyid(datdba) AS owner FROM pg_database WHERE datname = current_database()',
  );
  assert.is(owner!.owner, 'paceline');
  try {
    await query(serviceUrl, 'CREATE ROLE intruder SUPERUSER');
    assert.unreachable('the service role created a superuser');
  } catch (error) {
    assert.match((error as Error).message, /permission denied/);
  }

  // The user the previous release wrote signs in through the service.
  const signIn = await fetch(`${cluster!.base}/api/auth/token/`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ username: 'olduser', password: 'old-user-pass-1' }),
  });
  assert.is(signIn.status, 200, await signIn.text());
});

test('a restart reuses every password, and no password appears in the output or in `cli status`', async () => {
  const files = ['redis-password', 'pg/.paceline-service-password', 'pg/.paceline-password'];
  const secrets = await Promise.all(files.map(async (file) => (await readFile(join(dataDir, file), 'utf8')).trim()));
  await stop();
  await start();
  assert.equal(
    await Promise.all(files.map(async (file) => (await readFile(join(dataDir, file), 'utf8')).trim())),
    secrets,
    'the same passwords',
  );
  const signIn = await fetch(`${cluster!.base}/api/auth/token/`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ username: 'olduser', password: 'old-user-pass-1' }),
  });
  assert.is(signIn.status, 200, 'the service works on the kept passwords');

  const status = execFileSync(process.execPath, [ENTRY.cli, 'status'], {
    encoding: 'utf8',
    env: { ...process.env, ...env },
  });
  assert.match(status, /^Paceline is running on DATA_DIR/);
  await stop();
  assert.match(output, /"msg":"Paceline is up/, 'the banner is in the output');
  for (const [index, secret] of secrets.entries()) {
    assert.not.ok(output.includes(secret), `${files[index]} appears in the output`);
    assert.not.ok(status.includes(secret), `${files[index]} appears in cli status`);
  }
});

test.run();
