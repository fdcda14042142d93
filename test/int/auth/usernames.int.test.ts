import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { sql } from 'kysely';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { connectDatabase } from '../../../db/connect.js';
import { createUser } from '../../../src/auth/users.repository.js';
import { createTestDatabase } from '../../helpers/database.js';
import { ENTRY } from '../../helpers/cluster.js';

// docs/security.md "Login CPU budget": one account per case-folded name (trimmed, NFKC,
// lower-cased, as the login budget counts names). Creation refuses a variant, concurrent
// creations of two variants make one account, and `user:check` reports a pair made earlier by SQL.

const Names = suite<{ url: string; drop(): Promise<void> }>('one account per case-folded username');

Names.before(async (context) => {
  Object.assign(context, await createTestDatabase('usernames'));
});
Names.after(async ({ drop }) => drop?.());

/** Runs the CLI against `url` (stdin is /dev/null). */
async function runCli(url: string, env: Record<string, string>, ...args: string[]) {
  const child = spawn(process.execPath, [ENTRY.cli, ...args], {
    env: { ...process.env, DATABASE_URL: url, LOG_LEVEL: 'silent', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let [stdout, stderr] = ['', ''];
  child.stdout!.on('data', (chunk) => (stdout += chunk));
  child.stderr!.on('data', (chunk) => (stderr += chunk));
  const [code] = (await once(child, 'exit')) as [number];
  return { code, stdout, stderr };
}

Names('a name that differs from an existing one only by case is refused, naming the existing one', async ({ url }) => {
  const db = connectDatabase(url, 2);
  try {
    const first = await createUser(db, 'Alice', 'a-long-password');
    assert.ok(first.ok);
    assert.equal(await createUser(db, 'alice', 'another-password'), {
      ok: false,
      error: 'case-variant',
      existing: 'Alice',
    });
    assert.equal(await createUser(db, 'Alice', 'another-password'), { ok: false, error: 'taken' });
    // Two variants created at once: the creations take turns, one account results.
    const racing = await Promise.all([
      createUser(db, 'Zed', 'a-long-password'),
      createUser(db, 'ZED', 'a-long-password'),
      createUser(db, 'zed', 'a-long-password'),
    ]);
    assert.is(racing.filter((outcome) => outcome.ok).length, 1, JSON.stringify(racing));
  } finally {
    await db.destroy();
  }
});

Names('user:create refuses a case variant with a clear error', async ({ url }) => {
  const { code, stdout, stderr } = await runCli(url, { PASSWORD: 'carol-pass-123' }, 'user:create', 'ALICE');
  assert.is(code, 1, stdout);
  assert.is(
    stderr,
    'paceline: user "Alice" already exists and differs from "ALICE" only by case: one account per name, whatever its case\n',
  );
});

Names('user:check passes when no names fold alike, and reports a pair inserted directly', async ({ url }) => {
  const clean = await runCli(url, {}, 'user:check');
  assert.equal([clean.code, clean.stdout], [0, 'no usernames differ only by case\n'], clean.stderr);

  const db = connectDatabase(url, 1);
  try {
    await sql`insert into users (username, password_hash) values ('Bob', 'x'), ('bob', 'x'), ('BOB', 'x')`.execute(db);
    await sql`insert into users (username, password_hash) values (${'\uff43arol'}, 'x'), ('Carol', 'x')`.execute(db);
  } finally {
    await db.destroy();
  }
  const found = await runCli(url, {}, 'user:check');
  assert.is(found.code, 1, found.stderr);
  assert.is(found.stdout, 'differ only by case: "Bob", "bob", "BOB"\ndiffer only by case: "\uff43arol", "Carol"\n');
  assert.match(found.stderr, /2 group\(s\) of usernames differ only by case; they share one login budget/);
});

Names.run();
