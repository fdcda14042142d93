import { join } from 'node:path';
import pg from 'pg';
import { readOrCreateSecret } from '../settings/secret-file.js';
import type { ServerAccount } from './server-account.js';

/** The role Paceline's processes connect to the embedded PostgreSQL as: it owns the schema, and is no superuser. */
export const SERVICE_ROLE = 'paceline';

/** What {@link SERVICE_ROLE} may do: log in and own its schema, nothing of a superuser's. */
export const SERVICE_ROLE_ATTRIBUTES = 'LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS';

// Next to the superuser's password file, in the cluster's directory.
const SERVICE_PASSWORD_FILE = '.paceline-service-password';
// Arbitrary constant: one setup at a time (the primary and a CLI command may start together).
const SETUP_LOCK = 7_310_002;

/**
 * Makes sure the database `adminUrl` names (a superuser's URL) belongs to {@link SERVICE_ROLE},
 * with everything in its `public` schema, and returns that database's URL as the role. The role
 * is created when missing (NOSUPERUSER NOCREATEDB NOCREATEROLE), with a password generated once
 * and kept in `dataDir` (0600, owned by `account` like the cluster). Idempotent: on a database
 * an earlier release created, whose tables the superuser owns, it hands them over; afterwards it
 * changes nothing but the role's attributes. See docs/security.md "Least privilege".
 */
export async function provideServiceRole(adminUrl: string, dataDir: string, account?: ServerAccount): Promise<string> {
  const { secret } = await readOrCreateSecret(join(dataDir, SERVICE_PASSWORD_FILE), account);
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    await client.query('BEGIN');
    await client.query('SELECT pg_advisory_xact_lock($1)', [SETUP_LOCK]);
    const role = client.escapeIdentifier(SERVICE_ROLE);
    const found = await client.query('SELECT 1 FROM pg_roles WHERE rolname = $1', [SERVICE_ROLE]);
    const attributes = `${SERVICE_ROLE_ATTRIBUTES} PASSWORD ` + `${client.escapeLiteral(secret)}`;
    await client.query(`${found.rowCount === 0 ? 'CREATE' : 'ALTER'} ROLE ${role} WITH ${attributes}`);
    const { rows } = await client.query<{ db: string }>('SELECT current_database() AS db');
    await client.query(`ALTER DATABASE ${client.escapeIdentifier(rows[0]!.db)} OWNER TO ${role}`);
    await client.query(`ALTER SCHEMA public OWNER TO ${role}`);
    await client.query(handOver(SERVICE_ROLE));
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {});
    throw error;
  } finally {
    await client.end();
  }
  const url = new URL(adminUrl);
  url.username = SERVICE_ROLE;
  url.password = encodeURIComponent(secret);
  return url.href;
}

/**
 * Gives `role` every table, view and sequence of `public`, and every function, that another
 * role owns. (`REASSIGN OWNED BY postgres` cannot be used: the bootstrap superuser owns the
 * system's objects too.) A sequence that belongs to a table follows the table.
 */
function handOver(role: string): string {
  const kinds =
    `CASE c.relkind WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW' WHEN 'S' THEN 'SEQUENCE' WHEN ` +
    `'f' THEN 'FOREIGN TABLE' ELSE 'TABLE' END`;
  return `DO $$
DECLARE item record;
BEGIN
  FOR item IN
    SELECT ${kinds} AS kind, c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
      AND pg_get_userbyid(c.relowner) <> '${role}'
      AND NOT (c.relkind = 'S' AND EXISTS (SELECT 1 FROM pg_depend d
        WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype IN ('a', 'i')))
    ORDER BY c.relkind = 'S'
  LOOP
    EXECUTE format('ALTER %s public.%I OWNER TO %I', item.kind, item.name, '${role}');
  END LOOP;
  FOR item IN
    SELECT p.oid::regprocedure AS name FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
    WHERE n.nspname = 'public' AND pg_get_userbyid(p.proowner) <> '${role}'
  LOOP
    EXECUTE format('ALTER ROUTINE %s OWNER TO %I', item.name, '${role}');
  END LOOP;
END $$`;
}
