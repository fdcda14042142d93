import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import * as assert from 'uvu/assert';
import { connectDatabase } from '../../db/connect.js';
import { createUser } from '../../src/auth/users.repository.js';
import { createTestDatabase } from './database.js';
import type { VerifyRun } from './verify.js';

// docs/verify.md: verify run against Paceline itself, where every check must hold. The user rate is short
// (60 per 3 s) so that the limits check sees several windows in seconds.

const tmp = process.env.TEST_TMP_DIR;
if (!tmp) throw new Error('TEST_TMP_DIR is not set: run tests with `npm test`');
export const scratch = join(tmp, `verify-paceline-${randomBytes(3).toString('hex')}`);
const CHECKS = ['limits', 'cursor', 'ryw', 'idempotency', 'feed'];
export const VERIFY_ARGS = [
  '--user',
  'walker:walker-pass-123',
  '--user',
  'pusher:pusher-pass-123',
  '--walk-seconds',
  '8',
];
export const VERIFY_SETTINGS = {
  THROTTLE_USER: '60/3s',
  THROTTLE_TIMEOUT_MS: '5000',
  DATABASE_POOL_SIZE: '4',
  ACCESS_LOG: 'off',
};

/** A test database with verify's two users. */
export async function databaseWithUsers(label: string) {
  const database = await createTestDatabase(label);
  const db = connectDatabase(database.url, 1);
  for (const name of ['walker', 'pusher']) {
    const made = await createUser(db, name, `${name}-pass-123`);
    if (!made.ok) throw new Error(`could not create ${name}`);
  }
  await db.destroy();
  return database;
}

export function assertAllHold(run: VerifyRun): void {
  assert.is(run.code, 0, run.output);
  assert.equal(
    run.report.checks.map((c) => [c.name, c.verdict]),
    CHECKS.map((name) => [name, 'holds']),
    run.output,
  );
}
