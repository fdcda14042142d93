import { join, resolve } from 'node:path';
import pg from 'pg';
import type { Config } from '../settings/config.js';
import { startEmbeddedPostgres } from './postgres.js';
import { readPassword, servingPort } from './postgres-data-dir.js';
import { provideServiceRole } from './postgres-role.js';
import { findServerAccount } from './server-account.js';

/**
 * The embedded database under DATA_DIR for a command of the CLI, as the service's role, which is
 * no superuser (docs/security.md "Least privilege"). A server already running on the data
 * directory (`npm start`'s) is used on whatever port it has; otherwise one is started, and `stop`
 * stops it (else `stop` does nothing). A failed start stops what it started.
 */
export async function openEmbeddedDatabase(
  config: Pick<Config, 'DATA_DIR' | 'EMBEDDED_PG_PORT'>,
): Promise<{ url: string; stop(): Promise<void> }> {
  const dataDir = join(resolve(config.DATA_DIR), 'pg');
  let stop = async () => {};
  let adminUrl = await embeddedUrlIfRunning(dataDir, servingPort(dataDir) ?? config.EMBEDDED_PG_PORT);
  if (!adminUrl) {
    const server = await startEmbeddedPostgres({ dataDir, port: config.EMBEDDED_PG_PORT, persistent: true });
    adminUrl = server.url;
    stop = () => server.stop();
  }
  try {
    return { url: await provideServiceRole(adminUrl, dataDir, findServerAccount()), stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

async function embeddedUrlIfRunning(dataDir: string, port: number): Promise<string | null> {
  let password: string;
  try {
    password = await readPassword(dataDir);
  } catch {
    return null;
  }
  const url = `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/paceline`;
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  try {
    await client.connect();
    return url;
  } catch {
    return null;
  } finally {
    await client.end().catch(() => {});
  }
}
