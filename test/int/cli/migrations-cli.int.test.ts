import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { sql } from 'kysely';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { connectDatabase } from '../../../db/connect.js';
import { migrationProvider } from '../../../db/migrations/index.js';
import { runCli } from '../../helpers/cli.js';
import { createTestDatabase } from '../../helpers/database.js';

const TMP = process.env.TEST_TMP_DIR;
if (!TMP) throw new Error('TEST_TMP_DIR is not set: run tests with `npm test`');

const test = suite<{ url: string; drop(): Promise<void>; dataDir: string; names: string[] }>('migrations from the CLI');

test.before(async (context) => {
  Object.assign(context, await createTestDatabase('migrate_cli'));
  context.dataDir = await mkdtemp(join(TMP, 'migrate-cli-'));
  context.names = Object.keys(await migrationProvider.getMigrations()).sort();
});

test.after(async ({ drop, dataDir }) => {
  await drop?.();
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

function cli(context: { url: string; dataDir: string }, ...args: string[]) {
  return runCli({ DATABASE_URL: context.url, DATA_DIR: context.dataDir }, args);
}

const APPLIED = /^applied {2}\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC {2}(\S+)$/;

test('migrate:status lists every migration as applied, with the time it was', async (context) => {
  const { code, stdout, stderr } = await cli(context, 'migrate:status');
  assert.is(code, 0, stderr);
  const lines = stdout.trim().split('\n');
  assert.equal(
    lines.slice(0, -1).map((line) => APPLIED.exec(line)?.[1]),
    context.names,
  );
  assert.is(lines.at(-1), `${context.names.length} applied, 0 pending`);
});

test('migrate:down without --yes shows what it would undo, undoes nothing and exits 1', async (context) => {
  const { code, stdout, stderr } = await cli(context, 'migrate:down');
  assert.is(code, 1);
  assert.match(stdout, new RegExp(`^would undo, newest first:\\n  applied .* ${context.names.at(-1)}\\n`));
  assert.match(stdout, /take a backup first \(npm run cli -- export\)/);
  assert.is(stderr, 'paceline: nothing undone: add --yes to undo 1 migration(s)\n');
  const status = await cli(context, 'migrate:status');
  assert.match(status.stdout, new RegExp(`${context.names.length} applied, 0 pending\\n$`));
});

test('migrate:down --yes undoes the last migration, then pending; migrate applies it again', async (context) => {
  const last = context.names.at(-1)!;
  const down = await cli(context, 'migrate:down', '--yes');
  assert.equal([down.code, down.stdout], [0, `undone: ${last}\n`], down.stderr);
  const status = await cli(context, 'migrate:status');
  assert.match(
    status.stdout,
    new RegExp(`\\npending {27}${last}\\n${context.names.length - 1} applied, 1 pending\\n$`),
  );
  const up = await cli(context, 'migrate');
  assert.equal([up.code, up.stdout], [0, `applied: ${last}\n`], up.stderr);
});

test('migrate:down --to NAME --yes undoes every migration after NAME, newest first', async (context) => {
  const [first, ...later] = context.names;
  const dry = await cli(context, 'migrate:down', '--to', first!);
  assert.is(dry.code, 1);
  assert.equal(
    dry.stdout
      .split('\n')
      .filter((line) => line.startsWith('  '))
      .map((line) => line.trim().split(/\s+/).at(-1)),
    [...later].reverse(),
  );
  const down = await cli(context, 'migrate:down', '--to', first!, '--yes');
  assert.equal([down.code, down.stdout], [0, `undone: ${[...later].reverse().join(', ')}\n`], down.stderr);
  const db = connectDatabase(context.url, 1);
  try {
    const { rows } = await sql<{ name: string }>`select name from kysely_migration`.execute(db);
    assert.equal(
      rows.map((row) => row.name),
      [first],
    );
    assert.is((await sql<{ r: string | null }>`select to_regclass('reports') as r`.execute(db)).rows[0]!.r, null);
  } finally {
    await db.destroy();
  }
  const nothing = await cli(context, 'migrate:down', '--to', first!, '--yes');
  assert.equal([nothing.code, nothing.stdout], [0, `nothing to undo: ${first} is the last applied migration\n`]);
  assert.is((await cli(context, 'migrate')).code, 0);
});

test('an unknown NAME or argument is one line and exit 1', async (context) => {
  const unknown = await cli(context, 'migrate:down', '--to', 'nope', '--yes');
  assert.is(unknown.code, 1);
  assert.match(
    unknown.stderr,
    /^paceline: "nope" is not an applied migration \(applied: 20261122000100_initial, [^\n]*\)\n$/,
  );
  const extra = await cli(context, 'migrate:down', '--now');
  assert.equal([extra.code, extra.stderr], [1, 'paceline: usage: migrate:down [--to NAME] [--yes]\n']);
});

test('migrate:down is refused while the service is connected to the database; its dry run is not', async (context) => {
  // A service process's session, as pg_stat_activity shows one: application_name "paceline".
  const service = connectDatabase(context.url, 1, 'paceline');
  try {
    await service.connection().execute(async (conn) => {
      await sql`select 1`.execute(conn);
      const dry = await cli(context, 'migrate:down');
      assert.is(dry.code, 1);
      assert.match(dry.stdout, new RegExp(`^would undo, newest first:\\n  applied .* ${context.names.at(-1)}\\n`));
      assert.is(
        dry.stderr,
        'paceline: nothing undone: the service is connected to this database (1 of paceline in pg_stat_activity): ' +
          'stop every host first, then add --yes to undo 1 migration(s)\n',
      );
      const refused = await cli(context, 'migrate:down', '--yes');
      assert.is(refused.code, 1);
      assert.is(
        refused.stderr,
        'paceline: migrate:down refused: the service is connected to this database (1 of paceline in ' +
          'pg_stat_activity): stop every host first\n',
      );
    });
  } finally {
    await service.destroy();
  }
  const status = await cli(context, 'migrate:status');
  assert.match(status.stdout, new RegExp(`${context.names.length} applied, 0 pending\\n$`));
});

test('migrate:down is refused while a Paceline runs on DATA_DIR; its dry run shows what it would undo', async (context) => {
  const primary = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
  try {
    const instance = { pid: primary.pid, dataDir: context.dataDir, ports: { PORT: 8000 }, startedAt: 'now' };
    await writeFile(join(context.dataDir, 'paceline.pid'), JSON.stringify(instance));
    const dry = await cli(context, 'migrate:down');
    assert.is(dry.code, 1);
    assert.match(dry.stdout, /^would undo, newest first:\n/);
    assert.is(
      dry.stderr,
      `paceline: nothing undone: Paceline is running on DATA_DIR ${context.dataDir} (primary PID ${primary.pid} ` +
        '(PORT 8000)): stop it first (npm run cli -- stop), then add --yes to undo 1 migration(s)\n',
    );
    const refused = await cli(context, 'migrate:down', '--yes');
    assert.is(refused.code, 1);
    assert.is(
      refused.stderr,
      `paceline: migrate:down refused: Paceline is running on DATA_DIR ${context.dataDir} (primary PID ` +
        `${primary.pid} (PORT 8000)): stop it first (npm run cli -- stop)\n`,
    );
  } finally {
    primary.kill('SIGKILL');
    await rm(join(context.dataDir, 'paceline.pid'), { force: true });
  }
});

test.run();
