import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { connectDatabase } from '../../db/connect.js';
import { migrateToLatest } from '../../db/migrate.js';
import { SERVICE_ROLE, SERVICE_ROLE_ATTRIBUTES } from '../../src/embedded/postgres-role.js';

/** The superuser URL the test runner provides: for creating and dropping databases, never for the service. */
export function adminUrl(): string {
  const url = process.env.TEST_DATABASE_URL;
  if (!url) throw new Error('TEST_DATABASE_URL is not set: run tests with `npm test`');
  return url;
}

/** The service role's password on the runner's PostgreSQL (test/runner/stores.ts gives it, as `npm start` does). */
function servicePassword(): string {
  const url = process.env.TEST_SERVICE_DATABASE_URL;
  if (!url) throw new Error('TEST_SERVICE_DATABASE_URL is not set: run tests with `npm test`');
  return decodeURIComponent(new URL(url).password);
}

/**
 * Creates a fresh database for one test file, owned by the service role as `npm start` sets its
 * database up (docs/testing.md "Stores as shipped"), migrates it as that role, and returns the
 * role's URL of it: a test talks to PostgreSQL with the privileges the service has, no more.
 * `drop()` removes it (terminating leftover connections first).
 */
export async function createTestDatabase(label = 'test'): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `paceline_${label.replace(/\W/g, '_').slice(0, 30)}_${randomBytes(4).toString('hex')}`;
  const template = migratedTemplateOn(adminUrl());
  const url = template
    ? await copyTemplate(adminUrl(), template, name, servicePassword())
    : await createMigratedDatabase(adminUrl(), name, servicePassword());
  return {
    url,
    drop: () =>
      withAdmin(adminUrl(), (client) =>
        client.query(`DROP DATABASE IF EXISTS ${client.escapeIdentifier(name)} WITH (FORCE)`),
      ).then(() => {}),
  };
}

/**
 * A database owned by the service role on the server of `admin` (a superuser's URL), migrated as that role: the role's
 * URL of it.
 */
export async function createMigratedDatabase(admin: string, name: string, password: string): Promise<string> {
  await withAdmin(admin, async (client) => {
    await ensureServiceRole(client, password);
    await client.query(`CREATE DATABASE ${client.escapeIdentifier(name)} OWNER ${SERVICE_ROLE}`);
  });
  const database = new URL(admin);
  database.pathname = `/${name}`;
  // PostgreSQL 15+ gives `public` to the database owner; an older server's needs handing over.
  await withAdmin(database.href, (client) => client.query(`ALTER SCHEMA public OWNER TO ${SERVICE_ROLE}`));
  const url = serviceRoleUrl(admin, name, password);
  const db = connectDatabase(url, 1);
  await migrateToLatest(db);
  await db.destroy();
  return url;
}

/** The service role's URL of database `name` on the server of `admin`. */
function serviceRoleUrl(admin: string, name: string, password: string): string {
  const url = new URL(admin);
  url.pathname = `/${name}`;
  url.username = SERVICE_ROLE;
  url.password = encodeURIComponent(password);
  return url.href;
}

/**
 * The runner's migrated template (TEST_TEMPLATE_DATABASE, made once per run by test/runner/stores.ts as
 * `createMigratedDatabase` makes any), when `admin` is the runner's server: a copy of it is the same database for a
 * fifth of the time. A test's own server has none.
 */
function migratedTemplateOn(admin: string): string | undefined {
  const template = process.env.TEST_TEMPLATE_DATABASE;
  const runner = process.env.TEST_SERVICE_DATABASE_URL;
  if (!template || !runner) return undefined;
  return new URL(runner).host === new URL(admin).host ? template : undefined;
}

/** A copy of `template` named `name`, owned by the service role (as its objects are): the role's URL of it. */
async function copyTemplate(admin: string, template: string, name: string, password: string): Promise<string> {
  await withAdmin(admin, (client) =>
    client.query(
      `CREATE DATABASE ${client.escapeIdentifier(name)} TEMPLATE ${client.escapeIdentifier(template)} OWNER ${SERVICE_ROLE}`,
    ),
  );
  return serviceRoleUrl(admin, name, password);
}

/**
 * The service role on a server the runner did not set up (a test's own primary): created as
 * src/embedded/postgres-role.ts creates it, with the runner's password. On the runner's server it exists.
 */
async function ensureServiceRole(client: pg.Client, password: string): Promise<void> {
  const found = await client.query('SELECT 1 FROM pg_roles WHERE rolname = $1', [SERVICE_ROLE]);
  if (found.rowCount !== 0) return;
  await client.query(
    `CREATE ROLE ${SERVICE_ROLE} WITH ${SERVICE_ROLE_ATTRIBUTES} PASSWORD ${client.escapeLiteral(password)}`,
  );
}

async function withAdmin<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}
