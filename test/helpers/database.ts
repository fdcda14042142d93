import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { connectDatabase } from '../../db/connect.js';
import { migrateToLatest } from '../../db/migrate.js';

/** The superuser URL the test runner provides. */
export function adminUrl(): string {
  const url = process.env.TEST_DATABASE_URL;
  if (!url) throw new Error('TEST_DATABASE_URL is not set: run tests with `npm test`');
  return url;
}

/**
 * Creates a fresh, migrated database for one test file and returns its URL. `drop()` removes it
 * (terminating leftover connections first).
 */
export async function createTestDatabase(label = 'test'): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `paceline_${label.replace(/\W/g, '_').slice(0, 30)}_${randomBytes(4).toString('hex')}`;
  await withAdmin((client) => client.query(`CREATE DATABASE ${client.escapeIdentifier(name)}`));
  const url = new URL(adminUrl());
  url.pathname = `/${name}`;
  const db = connectDatabase(url.href, 1);
  await migrateToLatest(db);
  await db.destroy();
  return {
    url: url.href,
    drop: () =>
      withAdmin((client) => client.query(`DROP DATABASE IF EXISTS ${client.escapeIdentifier(name)} WITH (FORCE)`)).then(
        () => {},
      ),
  };
}

async function withAdmin<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: adminUrl() });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}
