import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { sql } from 'kysely';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { rebuildWithProgress } from '../../../src/cli/progress.js';
import { rebuildProjections } from '../../../src/events/projections/rebuild.js';
import type { Actor, CommandOutcome } from '../../../src/events/domain/task.events.js';
import { startTestApp, type TestApp } from '../../helpers/app.js';
import { random } from '../../helpers/random.js';
import { catchUpReadModel } from '../../helpers/read-model.js';
import { ENTRY } from '../../helpers/cluster.js';

let app: TestApp;

/**
 * `count` random commands through the live command bus (group commit, one transaction per
 * batch) by `lanes` concurrent clients of 6 actors: creations, edits, completions, reopenings,
 * deletions, plus commands that are refused (someone else's task, a stale version).
 */
async function randomHistory(count: number, lanes: number, seed: number): Promise<number> {
  const next = random(seed);
  const actors: Actor[] = Array.from({ length: 6 }, (_, i) => ({ userId: i + 1, username: `user${i + 1}` }));
  const live: Array<{ id: number; owner: Actor; version: number }> = [];
  let issued = 0;
  const track = (outcome: CommandOutcome, owner: Actor) => {
    if (!outcome.ok || outcome.replayed || !outcome.task) return;
    const known = live.find((t) => t.id === outcome.task!.id);
    if (known) known.version = outcome.task.version;
    else live.push({ id: outcome.task.id, owner, version: outcome.task.version });
  };
  const lane = async () => {
    while (issued < count) {
      issued += 1;
      const roll = next();
      const target = live.length > 0 ? live[Math.floor(next() * live.length)]! : undefined;
      const actor = target && roll < 0.9 ? target.owner : actors[Math.floor(next() * actors.length)]!;
      if (!target || roll < 0.35) {
        const outcome = await app.deps.commands.execute({
          type: 'CreateTask',
          actor,
          fields: { title: `task ${issued}`, description: '', completed: next() < 0.2 },
        });
        track(outcome, actor);
      } else if (roll < 0.8) {
        const fields =
          next() < 0.5
            ? { completed: next() < 0.6 }
            : { title: `edited ${issued}`, description: next() < 0.5 ? 'more' : '' };
        const expectedVersion = next() < 0.1 ? target.version - 1 : undefined;
        track(
          await app.deps.commands.execute({ type: 'ChangeTask', actor, taskId: target.id, fields, expectedVersion }),
          actor,
        );
      } else {
        const outcome = await app.deps.commands.execute({ type: 'DeleteTask', actor, taskId: target.id });
        if (outcome.ok) live.splice(live.indexOf(target), 1);
      }
    }
  };
  await Promise.all(Array.from({ length: lanes }, lane));
  return issued;
}

/** Every projection, as rows a test can compare. */
async function snapshot() {
  const db = app.deps.db;
  return {
    tasks: await db.selectFrom('tasks').selectAll().orderBy('id').execute(),
    counters: await db.selectFrom('counters').select(['name', 'value']).orderBy('name').execute(),
    taskRanges: await db.selectFrom('task_ranges').selectAll().orderBy('range_id').execute(),
    ownerCounts: await db.selectFrom('owner_task_counts').selectAll().orderBy('owner').execute(),
    checkpoint: await db.selectFrom('projection_checkpoints').select(['name', 'position']).orderBy('name').execute(),
  };
}

function captureTerminal() {
  let text = '';
  return { isTTY: true, columns: 100, write: (chunk: string) => ((text += chunk), true), text: () => text };
}

const Rebuild = suite('npm run rebuild');

Rebuild.before(async () => {
  app = await startTestApp({ APPEND_BATCH_MAX: '64' }, 'rebuild');
});
Rebuild.after(() => app.close());

Rebuild('after 10,000 random commands, a rebuild from the log gives tables identical to the live ones', async () => {
  assert.ok((await randomHistory(10_000, 24, 20261122)) >= 10_000);
  await catchUpReadModel(app.deps.db);
  const live = await snapshot();
  const events = live.counters.find((c) => c.name === 'events.last_position')!.value;
  assert.ok(live.tasks.length > 500 && events >= 6_000, `a rich history: ${live.tasks.length} tasks, ${events} events`);

  // Damage every projection, so the rebuild has to produce them rather than leave them be.
  await sql`delete from tasks where id % 7 = 0`.execute(app.deps.db);
  await sql`update tasks set title = 'wrong', version = version + 1 where id % 5 = 0`.execute(app.deps.db);
  await sql`update counters set value = 0`.execute(app.deps.db);
  await sql`update task_ranges set live = live + 2 where range_id % 2 = 0`.execute(app.deps.db);
  await sql`insert into task_ranges (range_id, live) values (1000000, 5)`.execute(app.deps.db);
  await sql`update owner_task_counts set open = open + 3`.execute(app.deps.db);
  await sql`update projection_checkpoints set position = 17`.execute(app.deps.db);

  const terminal = captureTerminal();
  const summary = await rebuildWithProgress(app.deps.db, terminal, 1_000);
  assert.equal(await snapshot(), live);
  assert.is(summary.tasks, live.tasks.length);
  assert.match(terminal.text(), /\r\[#+\] 100% \d+\/\d+ events/);
  assert.match(
    terminal.text(),
    new RegExp(`rebuilt from ${summary.events} events in [0-9.]+ s: tasks ${live.tasks.length} live`),
  );
});

Rebuild('writers that arrive during a rebuild wait for it, then append on top of the rebuilt tables', async () => {
  const actor = { userId: 1, username: 'user1' };
  const rebuilding = rebuildProjections(app.deps.db, { batchSize: 500 });
  const created = await Promise.all(
    Array.from({ length: 20 }, (_, i) =>
      app.deps.commands.execute({
        type: 'CreateTask',
        actor,
        fields: { title: `during ${i}`, description: '', completed: false },
      }),
    ),
  );
  await rebuilding;
  assert.ok(created.every((o) => o.ok && o.task));
  await catchUpReadModel(app.deps.db);
  const live = await snapshot();
  await rebuildProjections(app.deps.db);
  assert.equal(await snapshot(), live);
});

Rebuild('the CLI rebuilds and prints a summary', async () => {
  const child = spawn(process.execPath, [ENTRY.cli, 'rebuild'], {
    env: { ...process.env, DATABASE_URL: app.databaseUrl, LOG_LEVEL: 'silent' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (chunk) => (stderr += chunk));
  const [code] = await once(child, 'exit');
  assert.is(code, 0, stderr);
  assert.match(
    stderr,
    /^rebuilt from \d+ events in [0-9.]+ s: tasks \d+ live \(last id \d+\), owner_task_counts \d+ owners, checkpoint \d+\n$/,
  );
});

Rebuild.run();
