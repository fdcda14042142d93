import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { connectDatabase } from '../../db/connect.js';
import { migrateToLatest } from '../../db/migrate.js';
import { createUser } from '../../src/auth/users.repository.js';
import { applyRange } from '../../src/events/read-model.js';
import { rebuildProjections } from '../../src/events/rebuild.js';
import { findFreePort } from '../embedded/ports.js';
import { startEmbeddedPostgres } from '../embedded/postgres.js';
import { seedCompletedHistory } from './seed-events.js';
const scratch = await mkdtemp(join(tmpdir(), 'exp-'));
await chmod(scratch, 0o755);
const postgres = await startEmbeddedPostgres({ dataDir: join(scratch, 'pg'), port: await findFreePort(), persistent: false });
const db = connectDatabase(postgres.url, 2);
try {
  await migrateToLatest(db);
  const user = await createUser(db, 'alice', 'alice-pass-123');
  if (!user.ok) throw new Error();
  await seedCompletedHistory(db, { tasks: 133334, owner: user.user, start: new Date('2026-10-01T00:00:00Z'), spanMs: 30 * 86400000 });
  await sql`analyze`.execute(db);
  let t = Date.now();
  await db.transaction().execute(async (trx) => { for (let a = 0; a < 200000; a += 10000) await applyRange(trx, a, a + 10000); throw new Error('rollback'); }).catch(() => {});
  console.log('applyRange only', (Date.now() - t) / 1000);
  t = Date.now();
  await db.transaction().execute(async (trx) => { await trx.deleteFrom('tasks').execute(); throw new Error('rollback'); }).catch(() => {});
  console.log('delete only', (Date.now() - t) / 1000);
  t = Date.now();
  await rebuildProjections(db, process.stdout);
} finally {
  await db.destroy();
  await postgres.stop();
  await rm(scratch, { recursive: true, force: true });
}
