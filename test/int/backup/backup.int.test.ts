import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { gunzipSync, gzipSync } from 'node:zlib';
import { sql } from 'kysely';
import pg from 'pg';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { connectDatabase } from '../../../db/connect.js';
import { createUser } from '../../../src/auth/users.repository.js';
import { setOverride, setUserPlan } from '../../../src/limits/overrides.repository.js';
import type { Actor } from '../../../src/events/domain/task.events.js';
import { startTestApp, type TestApp } from '../../helpers/app.js';
import { runCli } from '../../helpers/cli.js';
import { adminUrl, createTestDatabase } from '../../helpers/database.js';
import { request } from '../../helpers/http.js';
import { random } from '../../helpers/random.js';
import { catchUpReadModel } from '../../helpers/read-model.js';

// docs/operations.md "Backup and restore": a backup taken while writers append holds the service
// as of one position; imported into an empty database, every answer up to that position is the
// source's.

const TMP = process.env.TEST_TMP_DIR ?? '';
if (!TMP) throw new Error('TEST_TMP_DIR is not set: run tests with `npm test`');
const ENV = { PAGE_SIZE: '7' };
const NAMES = ['alice', 'bob', 'carol'];

let source: TestApp;
let dir: string;
/** The database the quiet backup went into (then no service is connected to it). */
let restoredUrl: string;
const tokens: Record<string, string> = {};
const actors: Actor[] = [];
const cleanups: Array<() => Promise<void>> = [];

function cli(env: Record<string, string>, ...args: string[]) {
  return runCli({ DATA_DIR: dir, ...env }, args);
}

/** A database with nothing in it, not even the schema. */
async function emptyDatabase(label: string): Promise<string> {
  const name = `paceline_${label}_${Date.now().toString(36)}`;
  const admin = new pg.Client({ connectionString: adminUrl() });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${admin.escapeIdentifier(name)}`);
  cleanups.push(async () => {
    const again = new pg.Client({ connectionString: adminUrl() });
    await again.connect();
    await again.query(`DROP DATABASE IF EXISTS ${again.escapeIdentifier(name)} WITH (FORCE)`);
    await again.end();
  });
  await admin.end();
  const url = new URL(adminUrl());
  url.pathname = `/${name}`;
  return url.href;
}

/** Random task commands (creations, changes, deletions) through the live command bus, until `stop()` says so. */
async function writeRandomly(seed: number, stop: () => boolean, most = 10_000): Promise<number> {
  const next = random(seed);
  const live: Array<{ id: number; owner: Actor }> = [];
  let done = 0;
  for (; done < most && !stop(); done += 1) {
    const roll = next();
    const target = live[Math.floor(next() * live.length)];
    const actor = target?.owner ?? actors[Math.floor(next() * actors.length)]!;
    if (!target || roll < 0.4) {
      const fields = {
        title: `task ${seed}.${done}`,
        description: next() < 0.5 ? 'more' : '',
        completed: next() < 0.2,
      };
      const outcome = await source.deps.commands.execute({ type: 'CreateTask', actor, fields });
      if (outcome.ok && outcome.task) live.push({ id: outcome.task.id, owner: actor });
    } else if (roll < 0.85) {
      const fields = next() < 0.5 ? { completed: next() < 0.6 } : { title: `edited ${seed}.${done}` };
      await source.deps.commands.execute({ type: 'ChangeTask', actor, taskId: target.id, fields });
    } else {
      await source.deps.commands.execute({ type: 'DeleteTask', actor, taskId: target.id });
      live.splice(live.indexOf(target), 1);
    }
    if (done % 25 === 24) await createUser(source.deps.db, `late${seed}x${done}`, 'a-long-password');
  }
  return done;
}

/** An answer as text with the app's own address replaced, so two apps' answers compare. */
async function answer(app: TestApp, path: string, token?: string) {
  const response = await request(app.base, 'GET', path, { token });
  return { path, status: response.status, body: response.text.replaceAll(app.base, 'BASE') };
}

/** Every page of a list, following `next` links. */
async function walk(app: TestApp, first: string, token?: string) {
  const pages = [];
  for (let path: string | null = first; path !== null && pages.length < 200;) {
    const page = await answer(app, path, token);
    pages.push(page);
    const nextLink = page.status === 200 ? (JSON.parse(page.body).next as string | null) : null;
    path = nextLink && nextLink.replace('BASE', '');
  }
  return pages;
}

/** The whole feed a user sees, as parsed events. */
async function feed(app: TestApp, token: string) {
  const events = [];
  for (let after = 0; ;) {
    const page = await request(app.base, 'GET', `/api/events/?after=${after}&limit=100`, { token });
    if (page.body.results.length === 0) return events;
    events.push(...page.body.results);
    after = page.body.results.at(-1).position;
  }
}

const Backup = suite('backup and restore');

/** Three users with tokens, a random history, an idempotent create and a report each. */
async function seed() {
  dir = await mkdtemp(join(TMP, 'backup-'));
  source = await startTestApp(ENV, 'backup_src');
  for (const name of NAMES) tokens[name] = await source.login(name);
  const users = await source.deps.db.selectFrom('users').select(['id', 'username']).orderBy('id').execute();
  actors.push(...users.map((u) => ({ userId: u.id, username: u.username })));
  await writeRandomly(1, () => false, 120);
  for (const [i, name] of NAMES.entries()) {
    const created = await request(source.base, 'POST', '/api/tasks/', {
      token: tokens[name],
      body: { title: `kept ${name}` },
      headers: { 'Idempotency-Key': `key-${i}` },
    });
    assert.is(created.status, 201, created.text);
    const report = await request(source.base, 'POST', '/api/reports/', {
      token: tokens[name],
      body: { from: '2026-11-01', to: '2026-12-31' },
    });
    assert.is(report.status, 202, report.text);
  }
}

Backup.before(seed);

/** The source's newest event position. */
async function lastPosition(): Promise<number> {
  const { rows } = await sql<{ last: string | null }>`select max(position) as last from events`.execute(source.deps.db);
  return Number(rows[0]?.last ?? 0);
}

Backup.after(async () => {
  await source?.close();
  for (const cleanup of cleanups.reverse()) await cleanup();
  if (dir) await rm(dir, { recursive: true, force: true });
});

Backup('a backup taken while writers append holds every answer up to its position', async () => {
  let stopped = false;
  const writers = [writeRandomly(2, () => stopped), writeRandomly(3, () => stopped)];
  const file = join(dir, 'under-writes.jsonl.gz');
  let exported: Awaited<ReturnType<typeof cli>>;
  try {
    exported = await cli({ DATABASE_URL: source.databaseUrl }, 'export', file);
    // On a loaded host the export can end before a writer's next commit: the writers go on until
    // one lands past the backup's position (bounded), so the restore is held against later writes.
    const reached = Number(/consistent at event position (\d+) /.exec(exported.stderr)?.[1]);
    for (let waited = 0; waited < 10_000 && (await lastPosition()) <= reached; waited += 50) await sleep(50);
  } finally {
    stopped = true;
  }
  const written = (await Promise.all(writers)).reduce((a, b) => a + b, 0);
  assert.is(exported.code, 0, exported.stderr);
  const position = Number(/consistent at event position (\d+) /.exec(exported.stderr)?.[1]);
  assert.ok(written > 0 && position > 0, exported.stderr);

  const target = await createTestDatabase('backup_dst1');
  cleanups.push(target.drop);
  const imported = await cli({ DATABASE_URL: target.url }, 'import', file);
  assert.is(imported.code, 0, imported.stderr);
  assert.match(imported.stderr, new RegExp(`consistent at event position ${position} `));
  const restored = await startTestApp({ ...ENV, DATABASE_URL: target.url }, 'backup_dst1');
  try {
    const { rows: deletedLater } = await sql<{ id: number }>`
      select stream_id as id from events where type = 'TaskDeleted' and position > ${position}`.execute(source.deps.db);
    const changedLater = new Set(
      (
        await sql<{ id: number }>`select distinct stream_id as id from events where position > ${position}`.execute(
          source.deps.db,
        )
      ).rows.map((row) => row.id),
    );
    assert.ok(changedLater.size > 0, 'no write landed after the backup’s position');
    const hidden = new Set(deletedLater.map((row) => row.id));
    for (const name of NAMES) {
      const mine = await feed(restored, tokens[name]!);
      const theirs = (await feed(source, tokens[name]!)).filter((e) => e.position <= position);
      assert.is(mine.length, position);
      // A task deleted after the position shows others only that its events happened, at the source.
      const shape = (e: { task_id: number; data: unknown; metadata: unknown }) =>
        hidden.has(e.task_id) ? { ...e, data: undefined, metadata: undefined } : e;
      assert.equal(mine.map(shape), theirs.map(shape), name);
    }
    const { rows: tasks } = await sql<{ id: number; owner: string }>`
      select stream_id as id, data ->> 'owner' as owner from events where type = 'TaskCreated'`.execute(
      restored.deps.db,
    );
    for (const { id, owner } of tasks) {
      const history = `/api/tasks/${id}/events/?page_size=100`;
      const mine = (await request(restored.base, 'GET', history, { token: tokens[owner] })).body.results;
      const theirs = (await request(source.base, 'GET', history, { token: tokens[owner] })).body.results;
      assert.equal(
        mine,
        theirs.filter((e: { position: number }) => e.position <= position),
      );
      if (!changedLater.has(id))
        assert.equal(await answer(restored, `/api/tasks/${id}/`), await answer(source, `/api/tasks/${id}/`));
    }
    const users = (db: typeof source.deps.db) =>
      db.selectFrom('users').select(['id', 'username', 'password_hash']).orderBy('id').execute();
    const restoredUsers = await users(restored.deps.db);
    assert.equal(restoredUsers, (await users(source.deps.db)).slice(0, restoredUsers.length));
  } finally {
    await restored.close();
  }
});

Backup('restored from a quiet instance, every answer is the source’s, and what comes next too', async () => {
  await catchUpReadModel(source.deps.db);
  // Plans and overrides are in the backup too (docs/throttling.md "Plans and overrides").
  const change = { actor: 'ops@test', reason: 'launch week' };
  assert.ok((await setUserPlan(source.deps.db, 'alice', 'partner', change)).ok);
  const now = new Date();
  assert.ok(
    await setOverride(
      source.deps.db,
      { kind: 'user', name: 'bob' },
      { user: '1000/min' },
      new Date(now.getTime() + 3_600_000),
      change,
      now,
    ),
  );
  assert.ok(
    await setOverride(
      source.deps.db,
      { kind: 'address', address: '203.0.113.0/24' },
      { anon: '60/min' },
      new Date(now.getTime() + 3_600_000),
      change,
      now,
    ),
  );
  const file = join(dir, 'quiet.jsonl.gz');
  const exported = await cli({ DATABASE_URL: source.databaseUrl }, 'export', file);
  assert.is(exported.code, 0, exported.stderr);
  const url = (restoredUrl = await emptyDatabase('backup_dst2'));
  const imported = await cli({ DATABASE_URL: url }, 'import', file);
  assert.is(imported.code, 0, imported.stderr);
  assert.match(imported.stderr, /\nrebuilt from \d+ events in /);
  const restored = await startTestApp({ ...ENV, DATABASE_URL: url }, 'backup_dst2');
  try {
    const policies = async (app: TestApp) => [
      await app.deps.db.selectFrom('users').select(['username', 'plan']).orderBy('id').execute(),
      await app.deps.db.selectFrom('limit_overrides').selectAll().orderBy('id').execute(),
      await app.deps.db.selectFrom('limit_audit').selectAll().orderBy('id').execute(),
    ];
    const kept = await policies(restored);
    assert.equal(kept, await policies(source));
    assert.equal([(kept[1] as unknown[]).length, (kept[2] as unknown[]).length], [2, 3]);
    const last = Number((await request(source.base, 'GET', '/api/tasks/stats/')).body.last_position);
    const { value: lastId } = await source.deps.db
      .selectFrom('counters')
      .select('value')
      .where('name', '=', 'tasks.last_id')
      .executeTakeFirstOrThrow();
    const both = async (read: (app: TestApp) => Promise<unknown>) =>
      assert.equal(await read(restored), await read(source));
    for (const token of [undefined, tokens.alice]) {
      await both((app) => walk(app, '/api/tasks/', token));
      await both((app) => walk(app, '/api/tasks/?limit=7&offset=0', token));
      await both((app) => walk(app, '/api/tasks/?cursor=', token));
      await both((app) => walk(app, '/api/tasks/?ordering=-id&cursor=', token));
      for (let id = 1; id <= lastId + 1; id += 1) {
        await both((app) => answer(app, `/api/tasks/${id}/`, token));
        await both((app) => walk(app, `/api/tasks/${id}/events/`, token));
      }
    }
    for (const name of NAMES) {
      await both((app) => feed(app, tokens[name]!));
      await both((app) => walk(app, '/api/reports/', tokens[name]));
    }
    await both((app) => answer(app, '/api/tasks/stats/'));
    await both((app) => answer(app, '/api/tasks/stats/?owner=alice'));
    assert.is(JSON.parse((await answer(restored, '/api/tasks/stats/')).body).as_of_position, last);

    // What comes next: the same task id and event position, a replayed Idempotency-Key, the old
    // token, the next user id.
    const create = (app: TestApp) =>
      request(app.base, 'POST', '/api/tasks/', { token: tokens.bob, body: { title: 'after the restore' } });
    const [fromRestored, fromSource] = [await create(restored), await create(source)];
    assert.equal([fromRestored.status, fromRestored.body.id], [201, fromSource.body.id]);
    const head = (app: TestApp) => answer(app, `/api/events/?after=${last}`, tokens.bob);
    assert.is(JSON.parse((await head(restored)).body).results[0].position, last + 1);
    const replay = (app: TestApp) =>
      request(app.base, 'POST', '/api/tasks/', {
        token: tokens.carol,
        body: { title: 'kept carol' },
        headers: { 'Idempotency-Key': 'key-2' },
      });
    const [again, original] = [await replay(restored), await replay(source)];
    assert.equal(
      [again.status, again.text.replaceAll(restored.base, '')],
      [original.status, original.text.replaceAll(source.base, '')],
    );
    const [nextUser, sourceUser] = [
      await createUser(restored.deps.db, 'dave', 'a-long-password'),
      await createUser(source.deps.db, 'dave', 'a-long-password'),
    ];
    assert.equal(nextUser.ok && nextUser.user.id, sourceUser.ok && sourceUser.user.id);
  } finally {
    await restored.close();
  }
});

Backup(
  'a truncated, cut or altered backup, a connected service or a database that is not empty is refused in one line',
  async () => {
    const file = join(dir, 'quiet.jsonl.gz');
    const whole = await readFile(file);
    const lines = gunzipSync(whole).toString('utf8').split('\n');
    const firstEvent = lines.findIndex((line) => line.startsWith('{"table":"events"'));
    const damaged = {
      truncated: whole.subarray(0, Math.floor(whole.length / 2)),
      cut: gzipSync(lines.slice(0, -2).join('\n') + '\n'),
      altered: gzipSync(
        lines.map((line, i) => (i === firstEvent ? line.replace(/"title": ?"/, '$&X') : line)).join('\n'),
      ),
    };
    const url = await emptyDatabase('backup_dst3');
    const expected: Record<string, RegExp> = {
      truncated: /it is damaged or truncated \(unexpected end of file\); nothing was imported$/,
      cut: /it ends after \d+ lines without its trailer: the file is truncated; nothing was imported$/,
      altered: /its checksum does not match its lines: the file was altered; nothing was imported$/,
    };
    for (const [kind, bytes] of Object.entries(damaged)) {
      const path = join(dir, `${kind}.jsonl.gz`);
      await writeFile(path, bytes);
      const refused = await cli({ DATABASE_URL: url }, 'import', path);
      assert.is(refused.code, 1, kind);
      assert.is(refused.stderr.split('\n').length, 2, refused.stderr);
      assert.match(refused.stderr, new RegExp(`^paceline: ${path} was not imported: `), kind);
      assert.match(refused.stderr.trim(), expected[kind]!, kind);
    }
    const db = connectDatabase(url, 1);
    try {
      assert.equal(await db.selectFrom('users').select('id').execute(), []);
    } finally {
      await db.destroy();
    }
    // A session of the service on the empty database (application_name "paceline") refuses the import.
    const service = connectDatabase(url, 1, 'paceline');
    try {
      await service.connection().execute(async (conn) => {
        await sql`select 1`.execute(conn);
        const refused = await cli({ DATABASE_URL: url }, 'import', file);
        assert.equal(
          [refused.code, refused.stderr],
          [
            1,
            'paceline: import refused: the service is connected to this database ' +
              '(1 of paceline in pg_stat_activity): stop every host first\n',
          ],
        );
      });
    } finally {
      await service.destroy();
    }
    const occupied = await cli({ DATABASE_URL: restoredUrl }, 'import', file);
    assert.is(occupied.code, 1);
    assert.match(occupied.stderr, /^paceline: \S+ was not imported: the database is not empty /);
    assert.ok(
      occupied.stderr.endsWith(
        '(rows in users, tokens, limit_overrides, limit_audit, events, reports, idempotency_keys, tasks): import into a new, empty database\n',
      ),
      occupied.stderr,
    );
  },
);

Backup.run();
