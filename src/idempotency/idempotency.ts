import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database } from '../../db/database.js';

/**
 * `Idempotency-Key` for creates (tasks and reports alike): a repeat of the same request by the
 * same user within the TTL gets the first answer again and creates nothing; the same key with
 * another request is a mismatch (see docs/architecture.md, "Idempotency").
 *
 * The record keeps the resource the create made, as its domain left it (a task's state, a pending
 * report), written in the create's own transaction. It keeps no HTTP answer: status, body and
 * `Location` are the route's, which renders the first answer and every replay from that resource
 * with one function, so a replay repeats the first answer's bytes however the resource changed
 * since. (What the record does not pin is that function: a release that changes how a task or a
 * report is shown renders the records of the release before it, within their 24 hours, its own
 * way.) Records written by 0.1.0, before migration 20261128000100, hold the answer as the route
 * rendered it then; they are replayed as stored. Such a record is live for IDEMPOTENCY_TTL_MS after
 * its create, like any other: a day after the last host of 0.1.0 stopped, none is live (an expired
 * record is never replayed and the sweep deletes it), and the release after this one reads them no more.
 */

/** Records older than this are forgotten: the key may be used again, and the sweep deletes them. */
const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;

/** An `Idempotency-Key` and a digest of the request it came with (route and validated body). */
export interface IdempotencyClaim {
  key: string;
  requestHash: string;
}

/** An answer as a route rendered it: status, body, and the path of the resource it names. */
export interface RenderedAnswer {
  status: number;
  body: unknown;
  resourcePath: string | null;
}

/**
 * What a repeat gets back: the resource the first create made, for the route to render as it
 * rendered the first answer; or, from a record written before 20261128000100, that answer itself.
 */
export type Replay<R> = { created: R; rendered?: undefined } | { rendered: RenderedAnswer; created?: undefined };

/** Reads a record's stored resource (parsed JSON) back into its owner's terms; throws on anything else. */
export type DecodeResource<R> = (json: unknown) => R;

/** A claim made for one user. */
export interface UserClaim extends IdempotencyClaim {
  userId: number;
}

export type ReplayDecision<R> = { ok: true; replay: Replay<R> } | { ok: false; error: 'idempotency_mismatch' };

/** A record as read: its request's digest, and its resource as stored JSON (or its rendered answer). */
export type IdempotencyRecord = Replay<unknown> & { requestHash: string };

/** The key of a claim among the records a transaction holds: one user's keys are their own. */
export function claimId(claim: { userId: number; key: string }): string {
  return `${claim.userId}:${claim.key}`;
}

/**
 * What an earlier record means for a claim: the first answer again, its resource read back by
 * `decode` (only then: a key used on another endpoint holds another kind of resource), or a
 * mismatch.
 */
export function decideReplay<R>(
  earlier: IdempotencyRecord,
  claim: IdempotencyClaim,
  decode: DecodeResource<R>,
): ReplayDecision<R> {
  if (earlier.requestHash !== claim.requestHash) return { ok: false, error: 'idempotency_mismatch' };
  const replay: Replay<R> =
    earlier.rendered === undefined ? { created: decode(earlier.created) } : { rendered: earlier.rendered };
  return { ok: true, replay };
}

const liveSince = () => sql<Date>`now() - ${`${IDEMPOTENCY_TTL_MS} milliseconds`}::interval`;

/**
 * The live records of `claims`, read in `trx`. The task append path calls this under its global
 * lock, so no other transaction can take one of these keys before it commits.
 */
export async function loadClaims(
  trx: Transaction<Database>,
  claims: ReadonlyArray<{ userId: number; key: string }>,
): Promise<Map<string, IdempotencyRecord>> {
  const records = new Map<string, IdempotencyRecord>();
  if (claims.length === 0) return records;
  const rows = await trx
    .selectFrom('idempotency_keys')
    .selectAll()
    .where('created_at', '>', liveSince())
    .where((eb) => eb.or(claims.map((c) => eb.and([eb('user_id', '=', c.userId), eb('key', '=', c.key)]))))
    .execute();
  for (const row of rows) records.set(claimId({ userId: row.user_id, key: row.key }), recordOf(row));
  return records;
}

/**
 * Stores the records of claims that created something, each with the resource it created (an
 * expired record of the key is replaced). Call it in the transaction that writes the resource.
 */
export async function storeClaims(
  trx: Transaction<Database>,
  claims: ReadonlyArray<UserClaim & { resource: unknown }>,
): Promise<void> {
  if (claims.length === 0) return;
  await trx
    .insertInto('idempotency_keys')
    .values(claims.map((claim) => rowOf(claim, claim.resource)))
    .onConflict((oc) => oc.columns(['user_id', 'key']).doUpdateSet(replaceAll))
    .execute();
}

/**
 * Takes the key in `trx` for a create of `resource`, or returns the live record that holds it.
 * Concurrent claims of one key serialise on its row: exactly one takes it, the others wait for its
 * transaction and then see its record.
 */
export async function takeClaim(
  trx: Transaction<Database>,
  claim: UserClaim,
  resource: unknown,
): Promise<IdempotencyRecord | undefined> {
  const taken = await trx
    .insertInto('idempotency_keys')
    .values(rowOf(claim, resource))
    .onConflict((oc) =>
      oc.columns(['user_id', 'key']).doUpdateSet(replaceAll).where('idempotency_keys.created_at', '<=', liveSince()),
    )
    .returning('key')
    .executeTakeFirst();
  if (taken) return undefined;
  const row = await trx
    .selectFrom('idempotency_keys')
    .selectAll()
    .where('user_id', '=', claim.userId)
    .where('key', '=', claim.key)
    .executeTakeFirstOrThrow();
  return recordOf(row);
}

/** Deletes up to `batchSize` records past the TTL; returns how many went. Small batches keep locks short. */
export async function sweepExpiredClaims(db: Kysely<Database>, batchSize: number): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    with gone as (
      delete from idempotency_keys where ctid in (
        select ctid from idempotency_keys where created_at <= ${liveSince()} limit ${batchSize}
      ) returning 1
    ) select count(*)::int as n from gone`.execute(db);
  return rows[0]?.n ?? 0;
}

/** A new record: the resource as JSON (dates as ISO strings), no rendered answer. */
function rowOf(claim: UserClaim, resource: unknown) {
  return {
    user_id: claim.userId,
    key: claim.key,
    request_hash: claim.requestHash,
    status: null,
    body: null,
    resource_path: null,
    resource: JSON.stringify(resource),
    created_at: sql<Date>`now()`,
  };
}

function recordOf(row: {
  request_hash: string;
  status: number | null;
  body: unknown;
  resource_path: string | null;
  resource: unknown;
}): IdempotencyRecord {
  const requestHash = row.request_hash;
  if (row.resource !== null) return { requestHash, created: row.resource };
  // A record from before 20261128000100: the answer as its route rendered it.
  if (row.status === null) throw new Error('an idempotency record holds neither a resource nor an answer');
  return { requestHash, rendered: { status: row.status, body: row.body, resourcePath: row.resource_path } };
}

/** On conflict: the new claim replaces the record entirely (an old record's answer included). */
const replaceAll = {
  request_hash: sql<string>`excluded.request_hash`,
  status: sql<number | null>`excluded.status`,
  body: sql<string | null>`excluded.body`,
  resource_path: sql<string | null>`excluded.resource_path`,
  resource: sql<string | null>`excluded.resource`,
  created_at: sql<Date>`excluded.created_at`,
};
