import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import pg from 'pg';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { findFreePort } from '../../../src/embedded/ports.js';
import { startEmbeddedPostgres } from '../../../src/embedded/postgres.js';
import type { RunningService } from '../../../src/embedded/service.js';
import { ENTRY } from '../../helpers/cluster.js';

const TMP = process.env.TEST_TMP_DIR;
if (!TMP) throw new Error('TEST_TMP_DIR is not set: run tests with `npm test`');

const Cli = suite<{ dataDir: string; server: RunningService }>('cli');

Cli.before(async (context) => {
  context.dataDir = await mkdtemp(join(TMP, 'cli-'));
  await chmod(context.dataDir, 0o711); // run as root, the server runs as the postgres user
  // As `npm start` leaves it: the embedded server running on its data directory, on a port of its choosing.
  context.server = await startEmbeddedPostgres({
    dataDir: join(context.dataDir, 'pg'),
    port: await findFreePort(),
    persistent: true,
  });
});

Cli.after(async ({ dataDir, server }) => {
  await server?.stop();
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

async function runCli(env: Record<string, string>, ...args: string[]) {
  return runCliWithInput(undefined, env, ...args);
}

/** Runs the CLI with `input` piped on its stdin (none: stdin is /dev/null). */
async function runCliWithInput(input: string | undefined, env: Record<string, string>, ...args: string[]) {
  const child = spawn(process.execPath, [ENTRY.cli, ...args], {
    env: { ...process.env, DATABASE_URL: '', LOG_LEVEL: 'silent', ...env },
    stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
  });
  if (input !== undefined) child.stdin!.end(input);
  let [stdout, stderr] = ['', ''];
  child.stdout!.on('data', (chunk) => (stdout += chunk));
  child.stderr!.on('data', (chunk) => (stderr += chunk));
  const [code] = (await once(child, 'exit')) as [number];
  return { code, stdout, stderr };
}

Cli(
  'user:create finds the running embedded server on its data directory, whatever EMBEDDED_PG_PORT says',
  async ({ dataDir, server }) => {
    const { code, stdout, stderr } = await runCli(
      { DATA_DIR: dataDir, EMBEDDED_PG_PORT: String(await findFreePort()), PASSWORD: 'carol-pass-123' },
      'user:create',
      'carol',
    );
    assert.is(code, 0, stderr);
    assert.match(stdout, /^created user "carol" \(id \d+\)\n$/);
    const client = new pg.Client({ connectionString: server.url });
    await client.connect();
    try {
      const { rows } = await client.query<{ username: string }>('select username from users');
      assert.equal(
        rows.map((row) => row.username),
        ['carol'],
      );
    } finally {
      await client.end();
    }
  },
);

Cli('a second user:create of the same name says so and fails', async ({ dataDir }) => {
  const { code, stderr } = await runCli({ DATA_DIR: dataDir, PASSWORD: 'carol-pass-123' }, 'user:create', 'carol');
  assert.is(code, 1);
  assert.is(stderr, 'paceline: user "carol" already exists\n');
});

Cli('the password can be piped on stdin; an empty stdin says how to give one', async ({ dataDir, server }) => {
  const env: Record<string, string> = { DATA_DIR: dataDir };
  const piped = await runCliWithInput('dave-pass-123\n', env, 'user:create', 'dave');
  assert.is(piped.code, 0, piped.stderr);
  assert.match(piped.stdout, /^created user "dave"/);
  const empty = await runCliWithInput('', env, 'user:create', 'erin');
  assert.equal(
    [empty.code, empty.stderr],
    [1, 'paceline: no password: set PASSWORD, type it at the prompt, or pipe it on stdin\n'],
  );
  const client = new pg.Client({ connectionString: server.url });
  await client.connect();
  try {
    const { rows } = await client.query<{ password_hash: string }>(
      "select password_hash from users where username = 'dave'",
    );
    assert.is(rows.length, 1);
  } finally {
    await client.end();
  }
});

Cli('status, reload and stop find the primary through DATA_DIR/paceline.pid and signal it', async ({ dataDir }) => {
  const notRunning = await runCli({ DATA_DIR: dataDir }, 'status');
  assert.equal([notRunning.code, notRunning.stdout], [3, `Paceline is not running on DATA_DIR ${dataDir}\n`]);
  // A stand-in primary that reports the signals it gets.
  const primary = spawn(
    process.execPath,
    [
      '-e',
      "for (const s of ['SIGHUP', 'SIGTERM']) process.on(s, () => { console.log(s); if (s === 'SIGTERM') process.exit(0); }); setInterval(() => {}, 1000); console.log('up');",
    ],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const exited = once(primary, 'exit');
  let seen = '';
  primary.stdout.on('data', (chunk) => (seen += chunk));
  try {
    while (!seen.includes('up')) await new Promise((resolve) => setTimeout(resolve, 20));
    const instance = {
      pid: primary.pid,
      dataDir,
      ports: { PORT: 8000, METRICS_PORT: 9464 },
      startedAt: '2026-11-26T12:00:00.000Z',
    };
    await writeFile(join(dataDir, 'paceline.pid'), JSON.stringify(instance));
    const status = await runCli({ DATA_DIR: dataDir }, 'status');
    assert.is(status.code, 0, status.stderr);
    const [running, lastChange, ...rest] = status.stdout.split('\n');
    assert.is(
      running,
      `Paceline is running on DATA_DIR ${dataDir}: primary PID ${primary.pid} (PORT 8000, METRICS_PORT 9464), since 2026-11-26T12:00:00.000Z`,
    );
    // The users created above are the last changes of user:audit (docs/operations.md "Users").
    assert.match(lastChange!, /^last user change: \S+Z created "dave" by \S+@\S+ \(npm run cli -- user:audit\)$/);
    assert.equal(rest, ['']);
    // A primary of an earlier release records no reload's outcome: signalled, and not waited for.
    const reload = await runCli({ DATA_DIR: dataDir }, 'reload');
    assert.equal(
      [reload.code, reload.stdout],
      [
        0,
        `sent SIGHUP to Paceline's primary (PID ${primary.pid})\n` +
          'a primary of an earlier release records no outcome: its log says how the reload ends\n',
      ],
    );
    // A primary that does not record SIGUSR2 among its answers would be ended by it: not sent.
    const throttled = await runCli({ DATA_DIR: dataDir }, 'throttled');
    assert.is(throttled.code, 1);
    assert.match(throttled.stderr, /is of a release without the throttled command/);
    const stop = await runCli({ DATA_DIR: dataDir }, 'stop');
    assert.is(stop.code, 0, stop.stderr);
    await exited;
    assert.equal(seen.trim().split('\n'), ['up', 'SIGHUP', 'SIGTERM']);
  } finally {
    primary.kill('SIGKILL');
    await rm(join(dataDir, 'paceline.pid'), { force: true });
  }
});

Cli('help, -h and --help print the usage and succeed; an unknown command says so and exits 2', async () => {
  for (const word of ['help', '-h', '--help']) {
    const { code, stdout } = await runCli({}, word);
    assert.is(code, 0, word);
    assert.match(stdout, /^usage: npm run cli -- <command>/);
    assert.match(stdout, /user:create NAME/);
  }
  const unknown = await runCli({}, 'frobnicate');
  assert.is(unknown.code, 2);
  assert.match(unknown.stderr, /^paceline: unknown command "frobnicate"\nusage:/);
});

Cli.run();
