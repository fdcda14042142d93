import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.js';
import { describeInstance, runningInstance } from '../cluster/instance-file.js';
import type { Config } from '../settings/config.js';

/**
 * The `application_name`s the service's processes connect with: web and job workers, and the
 * primary while it migrates. The CLI's own (`paceline-cli`) is not among them.
 */
const SERVICE_APPLICATIONS = ['paceline', 'paceline-migrate'];

/**
 * Why the service looks in use, if it does (docs/operations.md "Migrations"): a primary recorded
 * in DATA_DIR's instance file that is alive, or sessions of the service's processes on this
 * database. An idle web worker's pool closes its connections after 10 s, so the sessions show a
 * host that is working or was recently; stopping every host first is still the operator's part.
 */
export async function serviceInUse(
  db: Kysely<Database>,
  config: Pick<Config, 'DATA_DIR'>,
): Promise<string | undefined> {
  const running = runningInstance(config);
  if (running)
    return (
      `Paceline is running on DATA_DIR ${running.dataDir} (${describeInstance(running)}): ` +
      'stop it first (npm run cli -- stop)'
    );
  const { rows } = await sql<{ application: string; sessions: number }>`
    select application_name as application, count(*)::int as sessions from pg_stat_activity
    where datname = current_database() and pid <> pg_backend_pid() and application_name = any(${SERVICE_APPLICATIONS})
    group by application_name order by application_name`.execute(db);
  if (rows.length === 0) return undefined;
  const seen = rows.map((row) => `${row.sessions} of ${row.application}`).join(', ');
  return `the service is connected to this database (${seen} in pg_stat_activity): stop every host first`;
}
