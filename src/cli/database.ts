import type { Kysely } from 'kysely';
import { connectDatabase } from '../../db/connect.js';
import type { Database } from '../../db/database.js';
import type { Config } from '../settings/config.js';

/**
 * Runs `work` on DATABASE_URL; without it, on the embedded database (starting it if it is down)
 * as the service's role, which is no superuser (docs/security.md "Least privilege"). src/embedded/
 * is loaded only then.
 */
export async function withDatabase(config: Config, work: (db: Kysely<Database>) => Promise<number>): Promise<number> {
  let url = config.DATABASE_URL;
  let stop = async () => {};
  if (!url) {
    const { openEmbeddedDatabase } = await import('../embedded/embedded-database.js');
    ({ url, stop } = await openEmbeddedDatabase(config));
  }
  const db = connectDatabase(url, 2, 'paceline-cli');
  try {
    return await work(db);
  } finally {
    await db.destroy();
    await stop();
  }
}
