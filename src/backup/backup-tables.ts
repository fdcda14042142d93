import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/database.js';

/**
 * The tables a backup holds, in the order an import loads them (a table after those it
 * references). Nothing else can rebuild them: the event
 * log, the accounts with their password hashes, their tokens (hashes only) and the audit of changes
 * made to them, the overrides of their limits and the audit of those, the reports asked for
 * and their outcomes, and the answers kept for `Idempotency-Key` repeats (docs/operations.md
 * "Backup and restore").
 */
export const BACKED_UP = [
  { name: 'users' },
  { name: 'tokens' },
  { name: 'user_audit' },
  { name: 'limit_overrides' },
  { name: 'limit_audit' },
  { name: 'events' },
  { name: 'reports' },
  { name: 'idempotency_keys' },
] as const satisfies ReadonlyArray<{ name: keyof Database }>;

/** Projections of the event log: an import rebuilds them (`rebuildProjections`), a backup leaves them out. */
export const REBUILT: readonly string[] = [
  'tasks',
  'counters',
  'task_ranges',
  'owner_task_counts',
  'projection_checkpoints',
];

/** Kysely's record of the schema: an import recreates it by running the migrations the backup names. */
const SCHEMA_RECORDS: readonly string[] = ['kysely_migration', 'kysely_migration_lock'];

/**
 * Tables of the database that this release neither backs up nor rebuilds. A backup refuses to
 * run while there is one, rather than miss rows nobody could get back.
 */
export async function unclassifiedTables(db: Kysely<Database>): Promise<string[]> {
  const known = [...BACKED_UP.map((t) => t.name), ...REBUILT, ...SCHEMA_RECORDS];
  const { rows } = await sql<{ name: string }>`
    select table_name as name from information_schema.tables
    where table_schema = current_schema() and table_type = 'BASE TABLE'
    order by table_name`.execute(db);
  return rows.map((row) => row.name).filter((name) => !known.includes(name));
}

/** Each backed-up table's columns, in table order; generated columns are left out (PostgreSQL computes them). */
export async function tableColumns(db: Kysely<Database>): Promise<Record<string, string[]>> {
  const { rows } = await sql<{ table: string; column: string }>`
    select table_name as "table", column_name as "column" from information_schema.columns
    where table_schema = current_schema() and table_name = any(${BACKED_UP.map((t) => t.name)})
      and is_generated = 'NEVER'
    order by table_name, ordinal_position`.execute(db);
  const columns: Record<string, string[]> = {};
  for (const { table, column } of rows) (columns[table] ??= []).push(column);
  return columns;
}

/** Each backed-up table's primary key columns, in key order: the order a backup reads its rows in. */
export async function primaryKeys(db: Kysely<Database>): Promise<Record<string, string[]>> {
  const { rows } = await sql<{ table: string; column: string }>`
    select c.relname as "table", a.attname as "column"
    from pg_index i
    join pg_class c on c.oid = i.indrelid
    join pg_attribute a on a.attrelid = c.oid and a.attnum = any(i.indkey)
    where i.indisprimary and c.relnamespace = current_schema()::regnamespace
      and c.relname = any(${BACKED_UP.map((t) => t.name)})
    order by c.relname, array_position(i.indkey::int2[], a.attnum)`.execute(db);
  const keys: Record<string, string[]> = {};
  for (const { table, column } of rows) (keys[table] ??= []).push(column);
  return keys;
}

/**
 * The last value each sequence behind a backed-up column has issued (`users.id` → 12), 0 when
 * none yet. An import sets each no lower, so no id is issued twice, not even one whose row is gone.
 */
export async function sequenceValues(db: Kysely<Database>): Promise<Record<string, number>> {
  const { rows } = await sql<{ table: string; column: string; value: number }>`
    select table_name as "table", column_name as "column",
      coalesce(pg_sequence_last_value(sequence::regclass), 0)::bigint as value
    from information_schema.columns,
      lateral (select pg_get_serial_sequence(quote_ident(table_name), column_name) as sequence) s
    where table_schema = current_schema() and table_name = any(${BACKED_UP.map((t) => t.name)})
      and sequence is not null`.execute(db);
  return Object.fromEntries(rows.map((row) => [`${row.table}.${row.column}`, Number(row.value)]));
}

/** Sets each sequence of a backed-up column to at least `recorded` and its column's highest value. */
export async function restoreSequences(db: Kysely<Database>, recorded: Record<string, number>): Promise<void> {
  for (const [name, value] of Object.entries(await sequenceValues(db))) {
    const [table, column] = name.split('.') as [string, string];
    const { rows } = await sql<{ top: number | null }>`
      select max(${sql.ref(column)})::bigint as top from ${sql.table(table)}`.execute(db);
    const last = Math.max(value, recorded[name] ?? 0, Number(rows[0]?.top ?? 0));
    if (last > 0) await sql`select setval(pg_get_serial_sequence(${table}, ${column}), ${last})`.execute(db);
  }
}
