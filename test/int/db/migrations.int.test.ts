import { sql } from 'kysely';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { connectDatabase } from '../../../db/connect.js';
import { migrateToLatest } from '../../../db/migrate.js';
import { migrationProvider } from '../../../db/migrations/index.js';
import { createTestDatabase } from '../../helpers/database.js';

// docs/scaling.md "Zero-downtime deploy": once a new release has migrated, a host of the release before it
// (whose primary migrates at every start) must still start on the newer schema; a database that
// lacks one of a release's own migrations is refused rather than served.

const test = suite('migrations during a rolling deploy');

/** This release's migrations but the last: the release before it. */
const previousRelease = {
  async getMigrations() {
    const all = await migrationProvider.getMigrations();
    const names = Object.keys(all).sort();
    return Object.fromEntries(names.slice(0, -1).map((name) => [name, all[name]!]));
  },
};

test('a database at this release: nothing to apply, nothing newer', async () => {
  const database = await createTestDatabase('migrations');
  const db = connectDatabase(database.url, 1);
  try {
    assert.equal(await migrateToLatest(db), { applied: [], newer: [] });
  } finally {
    await db.destroy();
    await database.drop();
  }
});

test('the previous release starts on the newer schema, applying nothing and naming what is newer', async () => {
  const database = await createTestDatabase('migrations');
  const db = connectDatabase(database.url, 1);
  try {
    const last = Object.keys(await migrationProvider.getMigrations())
      .sort()
      .at(-1)!;
    assert.equal(await migrateToLatest(db, previousRelease), { applied: [], newer: [last] });
  } finally {
    await db.destroy();
    await database.drop();
  }
});

test('a database missing one of the release’s migrations but holding an unknown one is refused', async () => {
  const database = await createTestDatabase('migrations');
  const db = connectDatabase(database.url, 1);
  try {
    const first = Object.keys(await migrationProvider.getMigrations()).sort()[0]!;
    await sql`delete from kysely_migration where name = ${first}`.execute(db);
    await sql`insert into kysely_migration (name, timestamp) values ('29991231000000_from_the_future', now()::text)`.execute(
      db,
    );
    const error = await migrateToLatest(db).then(
      () => undefined,
      (e: Error) => e,
    );
    assert.ok(
      error?.message.includes(first) && error.message.includes('29991231000000_from_the_future'),
      String(error),
    );
  } finally {
    await db.destroy();
    await database.drop();
  }
});

test.run();
