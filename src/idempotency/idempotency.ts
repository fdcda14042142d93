import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database } from '../../db/database.js';

/**
 * `Idempotency-Key` for creates (tasks and reports alike): a repeat of the same request by the
 * same user within the TTL gets the first answer again and creates nothing; the same key with
 * another request is a mismatch. The record stores the answer as the route rendered it, so a
 * replay sends the very bytes of the original response (see docs/architecture.md, "Idempotency").
 */

/** Records older than this are forgotten: the key may be used again, and the sweep deletes them. */
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;

/** An `Idempotency-Key` and a digest of the request it came with (route and validated body). */
export interface IdempotencyClaim {
  key: string;
  requestHash: string;
}

/** The answer a create gave, as stored for replays. */
export interface StoredAnswer {
  status: number;
  body: unknown;
  resourcePath: string | null;
}

/** How the route renders the created resource into the answer a replay will repeat. */
export type RenderAnswer<R> = (resource: R) => StoredAnswer;

/** A claim made for one user, with what to store should the create go ahead. */
export interface UserClaim extends IdempotencyClaim {
  userId: number;
}

export type ReplayDecision = { ok: true; replay: StoredAnswer } | { ok: false; error: 'idempotency_mismatch' };

export interface IdempotencyRecord extends StoredAnswer {
  requestHash: string;
}

/** The key of a claim among the records a transaction holds: one user's keys are their own. */
export function claimId(claim: { userId: number; key: string }): string {
  return `${claim.userId}:${claim.key}`;
}

/** What an earlier record means for a claim: the first answer again, or a mismatch. */
export function decideReplay(earlier: IdempotencyRecord, claim: IdempotencyClaim): ReplayDecision {
  if (earlier.requestHash !== claim.requestHash) return { ok: false, error: 'idempotency_mismatch' };
  return { ok: true, replay: { status: earlier.status, body: earlier.body, resourcePath: earlier.resourcePath } };
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

/** Stores the answers of claims that created something (an expired record of the key is replaced). */
export async function storeClaims(
  trx: Transaction<Database>,
  claims: ReadonlyArray<UserClaim & StoredAnswer>,
): Promise<void> {
  if (claims.length === 0) return;
  await trx
    .insertInto('idempotency_keys')
    .values(claims.map(rowOf))
    .onConflict((oc) => oc.columns(['user_id', 'key']).doUpdateSet(replaceAll))
    .execute();
}

/**
 * Takes the key for `answer` in `trx`, or returns the live record that holds it. Concurrent
 * claims of one key serialise on its row: exactly one takes it, the others wait for its
 * transaction and then see its record.
 */
export async function takeClaim(
  trx: Transaction<Database>,
  claim: UserClaim,
  answer: StoredAnswer,
): Promise<IdempotencyRecord | undefined> {
  const taken = await trx
    .insertInto('idempotency_keys')
    .values(rowOf({ ...claim, ...answer }))
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

function rowOf(claim: UserClaim & StoredAnswer) {
  return {
    user_id: claim.userId,
    key: claim.key,
    request_hash: claim.requestHash,
    status: claim.status,
    body: JSON.stringify(claim.body),
    resource_path: claim.resourcePath,
    created_at: sql<Date>`now()`,
  };
}

function recordOf(row: {
  request_hash: string;
  status: number;
  body: unknown;
  resource_path: string | null;
}): IdempotencyRecord {
  return { requestHash: row.request_hash, status: row.status, body: row.body, resourcePath: row.resource_path };
}

/** On conflict: the new claim replaces the record entirely. */
const replaceAll = {
  request_hash: sql<string>`excluded.request_hash`,
  status: sql<number>`excluded.status`,
  body: sql<string>`excluded.body`,
  resource_path: sql<string | null>`excluded.resource_path`,
  created_at: sql<Date>`excluded.created_at`,
};
