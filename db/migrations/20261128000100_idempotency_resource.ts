import { sql, type Kysely } from 'kysely';

/**
 * `idempotency_keys.resource`: a record keeps the resource its create made, as the domain left it
 * (a task's state, a pending report), instead of the HTTP answer. The route renders the first
 * answer and every replay from it, so the event store and the reports repository no longer run
 * HTTP code inside their transactions (src/idempotency/idempotency.ts). `status` and `body` become
 * nullable: a new record leaves them, and `resource_path`, null. Records written before keep their
 * rendered answer and replay it as stored; the check says every row holds one or the other.
 *
 * During a rolling deploy, a host of the release before this one that meets a new record (the
 * same key repeated within the rollout) finds no status to send and fails that request (500);
 * it never creates twice nor sends another answer, and the retry succeeds on a new host.
 */
export async function up(db: Kysely<any>): Promise<void> {
  // `json`, like `body`: kept as written.
  await db.schema.alterTable('idempotency_keys').addColumn('resource', 'json').execute();
  await db.schema
    .alterTable('idempotency_keys')
    .alterColumn('status', (c) => c.dropNotNull())
    .alterColumn('body', (c) => c.dropNotNull())
    .execute();
  await db.schema
    .alterTable('idempotency_keys')
    .addCheckConstraint(
      'idempotency_keys_answer_check',
      sql`resource is not null or (status is not null and body is not null)`,
    )
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  // The release before this one can replay only rendered answers: a record holding a resource is
  // forgotten, as if its 24 hours had passed (a repeat of its key creates again).
  await db.deleteFrom('idempotency_keys').where('resource', 'is not', null).execute();
  await db.schema.alterTable('idempotency_keys').dropConstraint('idempotency_keys_answer_check').ifExists().execute();
  await db.schema
    .alterTable('idempotency_keys')
    .alterColumn('status', (c) => c.setNotNull())
    .alterColumn('body', (c) => c.setNotNull())
    .execute();
  await db.schema.alterTable('idempotency_keys').dropColumn('resource').execute();
}
