import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { connectDatabase } from '../../../db/connect.js';
import type { Database } from '../../../db/database.js';
import { migrateToLatest } from '../../../db/migrate.js';
import { issueToken } from '../../../src/auth/tokens.js';
import { createUser } from '../../../src/auth/users.repository.js';
import { openEmbeddedDatabase } from '../../../src/embedded/embedded-database.js';
import { rebuildProjections } from '../../../src/events/projections/rebuild.js';
import { loadConfig } from '../../../src/settings/config.js';
import { progressBar } from './progress.js';
import { secondsSince } from './run.js';

interface BenchUser {
  id: number;
  username: string;
  token: string;
}

export interface Seeded {
  /** Owns the seeded tasks; reads with its token. */
  reader: BenchUser;
  /** Writes during the benchmark, under a budget of its own. */
  writer: BenchUser;
  eventsSeconds: number;
  rebuildSeconds: number;
  vacuumSeconds: number;
}

/** Events inserted per statement: one step of the progress bar. */
const CHUNK = 100_000;
/** Events the rebuild reads and applies at a time. */
const REBUILD_BATCH = 20_000;

/**
 * Seeds `tasks` tasks on an empty, migrated database as the append path would have written them (a TaskCreated per
 * task, positions and ids 1..tasks, every third created completed) by generate_series, then every projection by
 * the rebuild of `npm run rebuild`, and VACUUM ANALYZE, as autovacuum would leave a table that old. Two users with
 * tokens: the reader, who owns the tasks, and the writer.
 */
async function seedTasks(db: Kysely<Database>, tasks: number): Promise<Seeded> {
  const reader = await benchUser(db, 'bench-reader');
  const writer = await benchUser(db, 'bench-writer');

  const events = progressBar('events');
  events.update(0, tasks);
  for (let from = 1; from <= tasks; from += CHUNK) {
    const to = Math.min(from + CHUNK - 1, tasks);
    // recorded_at: one task a millisecond, the last one now.
    await sql`
      insert into events (position, stream_id, version, type, data, metadata, recorded_at)
      select i, i, 1, 'TaskCreated',
        jsonb_build_object('title', 'Task ' || i, 'description', 'Seeded for the read-path benchmark', 'completed', i % 3 = 0,
          'owner_id', ${reader.id}::bigint, 'owner', ${reader.username}::text),
        jsonb_build_object('actor', ${reader.username}::text, 'actor_id', ${reader.id}::bigint),
        now() - (${tasks}::bigint - i) * interval '1 millisecond'
      from generate_series(${from}::bigint, ${to}::bigint) i`.execute(db);
    events.update(to, tasks);
  }
  const eventsSeconds = events.finish();

  const rebuild = progressBar('rebuild');
  const summary = await rebuildProjections(db, {
    batchSize: REBUILD_BATCH,
    onProgress: (done, total) => rebuild.update(done, total),
  });
  const rebuildSeconds = rebuild.finish();
  if (summary.tasks !== tasks) throw new Error(`the rebuild made ${summary.tasks} tasks of ${tasks} events`);

  const vacuumStarted = Date.now();
  await sql`vacuum analyze`.execute(db);
  return { reader, writer, eventsSeconds, rebuildSeconds, vacuumSeconds: secondsSince(vacuumStarted) };
}

/** {@link seedTasks} on the database at `url`, through a connection of its own. */
export async function seedDatabase(url: string, tasks: number): Promise<Seeded> {
  const db = connectDatabase(url, 2);
  return seedTasks(db, tasks).finally(() => db.destroy());
}

export interface EmbeddedSeeding extends Seeded {
  startSeconds: number;
  migrateSeconds: number;
  totalSeconds: number;
  /** What PostgreSQL said while seeding (VACUUM's warnings about tables the service's role may not vacuum). */
  notices: string[];
  userTables: number;
  vacuumed: number;
  analyzed: number;
}

/**
 * {@link seedTasks} on the embedded database of a fresh DATA_DIR (`settings`), reached as a command of the CLI
 * reaches it (PostgreSQL initialised and started, the service's role made), migrated first; stopped after. Run
 * before the service's first start, so that its projection follower cannot race the rebuild.
 */
export async function seedEmbedded(settings: Record<string, string>, tasks: number): Promise<EmbeddedSeeding> {
  const began = Date.now();
  const database = await openEmbeddedDatabase(loadConfig(settings));
  const startSeconds = secondsSince(began);
  const notices: string[] = [];
  const pool = new pg.Pool({ connectionString: database.url, max: 2, application_name: 'verify-million-seed' });
  pool.on('error', () => {});
  pool.on('connect', (client) =>
    client.on('notice', (notice) => notices.push(`${notice.severity}: ${notice.message}`)),
  );
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  try {
    const migrating = Date.now();
    await migrateToLatest(db);
    const migrateSeconds = secondsSince(migrating);
    const seeded = await seedTasks(db, tasks);
    const { rows } = await sql<{ userTables: number; vacuumed: number; analyzed: number }>`
      select count(*)::int as "userTables", count(last_vacuum)::int as vacuumed, count(last_analyze)::int as analyzed
      from pg_stat_user_tables`.execute(db);
    return { ...seeded, startSeconds, migrateSeconds, totalSeconds: secondsSince(began), notices, ...rows[0]! };
  } finally {
    await db.destroy();
    await database.stop();
  }
}

/** The seconds each phase of the seeding took, as a report says them. */
export const describeSeeding = (s: Seeded): string =>
  `events by generate_series ${s.eventsSeconds.toFixed(1)} s, projections by the rebuild ${s.rebuildSeconds.toFixed(1)} s, ` +
  `VACUUM ANALYZE ${s.vacuumSeconds.toFixed(1)} s`;

/** Users named `names` on the database at `url`, each with the password `<name>-password` and a token. */
export async function createBenchUsers<N extends string[]>(
  url: string,
  ...names: N
): Promise<{ [K in keyof N]: BenchUser }> {
  const db = connectDatabase(url, 1);
  try {
    const users: BenchUser[] = [];
    for (const name of names) users.push(await benchUser(db, name));
    return users as { [K in keyof N]: BenchUser };
  } finally {
    await db.destroy();
  }
}

async function benchUser(db: Kysely<Database>, username: string): Promise<BenchUser> {
  const password = `${username}-password`;
  const created = await createUser(db, username, password);
  if (!created.ok) throw new Error(`could not create the user ${username}`);
  const issued = await issueToken(db, username, password, 7 * 86_400_000, new Date());
  if (!issued) throw new Error(`could not issue a token to ${username}`);
  return { id: created.user.id, username, token: issued.token };
}
