import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { loadConfig } from '../../../src/settings/config.js';
import { CommandTimeoutError, GroupCommitter } from '../../../src/events/store/group-commit.js';
import type { CommandOutcome, TaskCommand } from '../../../src/events/domain/task.events.js';

const command = (title: string) =>
  ({ type: 'CreateTask', actor: { userId: 1, username: 'alice' }, fields: { title } }) as unknown as TaskCommand;
const titleOf = (c: TaskCommand) => (c as unknown as { fields: { title: string } }).fields.title;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const lockWaitOver = Object.assign(new Error('canceling statement due to lock timeout'), { code: '55P03' });

const Commit = suite('group commit: a command waits no longer than its deadline');

Commit('a command still queued at its deadline leaves the queue and is never run', async () => {
  const ran: string[] = [];
  let release!: () => void;
  const slow = new Promise<void>((resolve) => (release = resolve));
  const committer = new GroupCommitter(
    async (batch) => {
      ran.push(...batch.map(titleOf));
      if (ran.length === 1) await slow;
      return batch.map(() => ({ ok: true }) as unknown as CommandOutcome);
    },
    10,
    () => {},
    { waitMs: 50 },
  );
  const first = committer.execute(command('first'));
  const queued = committer.execute(command('queued'));
  const started = performance.now();
  const error = await queued.catch((e: unknown) => e);
  assert.instance(error, CommandTimeoutError);
  assert.ok(performance.now() - started < 500);
  release();
  await first;
  await committer.close();
  assert.equal(ran, ['first'], 'the timed-out command was never handed to the database');
});

Commit('a batch not granted the lock in time: the expired are refused, the others queue again', async () => {
  const calls: { titles: string[]; lockWaitMs?: number }[] = [];
  const committer = new GroupCommitter(
    async (batch, lockWaitMs) => {
      calls.push({ titles: batch.map(titleOf), lockWaitMs });
      if (calls.length === 1) {
        // PostgreSQL's lock_timeout starts when the statement asks for the lock, after the batch began, so
        // it ends after the deadline; a bare timer of lockWaitMs may fire a little before it on a busy loop.
        await sleep(lockWaitMs! + 20);
        throw lockWaitOver;
      }
      return batch.map(() => ({ ok: true }) as unknown as CommandOutcome);
    },
    10,
    () => {},
    { waitMs: 400, isLockWaitOver: (e) => e === lockWaitOver },
  );
  const early = committer.execute(command('early'));
  await sleep(200);
  // Arrives while the first batch waits for the lock: goes in the next batch.
  const late = committer.execute(command('late'));
  assert.instance(await early.catch((e: unknown) => e), CommandTimeoutError);
  assert.ok(((await late) as { ok: boolean }).ok);
  await committer.close();
  assert.equal(calls[0]!.titles, ['early']);
  assert.ok(calls[0]!.lockWaitMs! <= 400 && calls[0]!.lockWaitMs! >= 1);
  assert.equal(calls.at(-1)!.titles, ['late'], 'the late command ran, alone, within its own deadline');
});

Commit('a batch failing with its lock wait over re-queues a command still within its deadline', async () => {
  let calls = 0;
  const committer = new GroupCommitter(
    async (batch) => {
      calls += 1;
      if (calls === 1) throw lockWaitOver;
      return batch.map(() => ({ ok: true }) as unknown as CommandOutcome);
    },
    10,
    () => {},
    { waitMs: 1_000, isLockWaitOver: (e) => e === lockWaitOver },
  );
  assert.ok(((await committer.execute(command('again'))) as { ok: boolean }).ok);
  assert.is(calls, 2);
  await committer.close();
});

Commit('without waitMs nothing changes: no lock wait is asked for', async () => {
  const seen: (number | undefined)[] = [];
  const committer = new GroupCommitter(async (batch, lockWaitMs) => {
    seen.push(lockWaitMs);
    return batch.map(() => ({ ok: true }) as unknown as CommandOutcome);
  }, 10);
  await committer.execute(command('plain'));
  await committer.close();
  assert.equal(seen, [undefined]);
});

Commit.run();

const Settings = suite('bounded-work settings are validated');

Settings('defaults, and values as given', () => {
  const config = loadConfig({});
  assert.is(config.DATABASE_STATEMENT_TIMEOUT_MS, 5_000);
  assert.is(config.DATABASE_WAIT_MS, 5_000);
  assert.is(config.HTTP_HEADERS_TIMEOUT_MS, 10_000);
  assert.is(config.HTTP_REQUEST_TIMEOUT_MS, 30_000);
  assert.is(config.HTTP_MAX_CONNECTIONS, 10_000);
  assert.is(loadConfig({ HTTP_MAX_CONNECTIONS: '64' }).HTTP_MAX_CONNECTIONS, 64);
});

Settings('a bad value stops the start with one line naming it', () => {
  assert.throws(() => loadConfig({ DATABASE_WAIT_MS: '0' }), /invalid DATABASE_WAIT_MS="0"/);
  assert.throws(
    () => loadConfig({ DATABASE_STATEMENT_TIMEOUT_MS: 'soon' }),
    /invalid DATABASE_STATEMENT_TIMEOUT_MS="soon": expected a whole number/,
  );
  assert.throws(() => loadConfig({ HTTP_MAX_CONNECTIONS: '0' }), /invalid HTTP_MAX_CONNECTIONS="0"/);
  assert.throws(
    () => loadConfig({ HTTP_HEADERS_TIMEOUT_MS: '20000', HTTP_REQUEST_TIMEOUT_MS: '10000' }),
    /invalid HTTP_HEADERS_TIMEOUT_MS="20000": must not exceed HTTP_REQUEST_TIMEOUT_MS \(10000\)/,
  );
});

Settings.run();
