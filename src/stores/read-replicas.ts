import { sql, type Kysely, type Transaction } from 'kysely';
import type { Logger } from 'pino';
import { connectDatabase } from '../../db/connect.js';
import type { Database } from '../../db/database.js';
import type { Config } from '../settings/config.js';
import { COUNTER_NAMES } from '../events/store/batch-state.js';
import type { Metrics } from '../base/metrics.js';

/**
 * Reads answered by streaming replicas when they provably hold every acknowledged write
 * (docs/architecture.md, "Read replicas"). A read knows the published head P (raised before
 * every commit, so at or above the position of every acknowledged write). A replica answers from
 * one REPEATABLE READ snapshot whose own head, read first in that snapshot, is at or above P:
 * positions commit in order and replay applies commits in that order, so the snapshot holds every
 * event up to its head, hence every acknowledged write. Anything else is read on the primary.
 */

/** Why a read went where it did: the `reason` of `paceline_db_reads_total`. */
const READ_REASONS = {
  replica: ['current'],
  primary: ['no_replica', 'head_unknown', 'lagging', 'unhealthy', 'error'],
} as const;
type PrimaryReason = (typeof READ_REASONS.primary)[number];

/** Work done on one snapshot, told that snapshot's head; an expected refusal (a 404) is a value it returns. */
export type SnapshotWork<T> = (trx: Transaction<Database>, head: number) => Promise<T>;

interface Replica {
  /** `replica 1`, `replica 2`…: for logs, never the URL (it carries a password). */
  name: string;
  db: Kysely<Database>;
  /** The highest head seen replayed on it; -1 until known. */
  applied: number;
  downUntil: number;
  failures: number;
  probing?: Promise<void>;
}

/** The first time a failing replica is left alone, doubled on each failure in a row up to the most. */
const DOWN_FIRST_MS = 1_000;
const DOWN_MOST_MS = 30_000;

export class ReplicaSet {
  readonly #replicas: Replica[];
  #next = 0;
  #highest = -1;

  constructor(
    urls: readonly string[],
    config: Pick<Config, 'DATABASE_POOL_SIZE' | 'DATABASE_STATEMENT_TIMEOUT_MS' | 'DATABASE_REPLICA_WAIT_MS'>,
    private readonly metrics: Metrics,
    private readonly logger: Logger,
  ) {
    this.#replicas = urls.map((url, index) => ({
      name: `replica ${index + 1}`,
      // A replica that stopped answering is given up on after its statement time and the wait.
      db: connectDatabase(url, config.DATABASE_POOL_SIZE, 'paceline-replica', {
        statementTimeoutMs: config.DATABASE_STATEMENT_TIMEOUT_MS,
        connectionTimeoutMs: config.DATABASE_REPLICA_WAIT_MS,
        answerDeadlineMs: config.DATABASE_STATEMENT_TIMEOUT_MS + config.DATABASE_REPLICA_WAIT_MS,
      }),
      applied: -1,
      downUntil: 0,
      failures: 0,
    }));
    for (const target of ['replica', 'primary'] as const) {
      for (const reason of READ_REASONS[target])
        if (reason !== 'no_replica') metrics.dbReads.inc({ target, reason }, 0);
    }
  }

  /**
   * `work` on a replica's snapshot whose head is at or above `head` (the published head), when one
   * is up and has replayed that far; else on the primary's. Whatever `work` throws on a replica is
   * taken for that replica's failure and sends the read to the primary, so an answer that refuses
   * (a 404) is a value `work` returns, and its caller's to answer.
   */
  async read<T>(primary: Kysely<Database>, head: number | null, work: SnapshotWork<T>): Promise<T> {
    if (head === null) return this.#onPrimary(primary, 'head_unknown', work);
    // The head only rises; one seen lower than before means Redis lost writes, so the higher one stays required.
    const published = (this.#highest = Math.max(this.#highest, head));
    const now = Date.now();
    const up = this.#replicas.filter((replica) => replica.downUntil <= now);
    if (up.length === 0) return this.#onPrimary(primary, 'unhealthy', work);
    let current = up.filter((replica) => replica.applied >= published);
    if (current.length === 0) {
      await Promise.all(up.map((replica) => this.#probe(replica)));
      current = up.filter((replica) => replica.downUntil <= now && replica.applied >= published);
      if (current.length === 0)
        return this.#onPrimary(primary, up.some((replica) => replica.downUntil <= now) ? 'lagging' : 'error', work);
    }
    const replica = current[this.#next++ % current.length]!;
    try {
      const result = await snapshot(
        replica.db,
        (applied) => {
          replica.applied = Math.max(replica.applied, applied);
          return applied >= published;
        },
        work,
      );
      this.#recovered(replica);
      if (result.ok) this.metrics.dbReads.inc({ target: 'replica', reason: 'current' });
      return result.ok ? result.value : this.#onPrimary(primary, 'lagging', work);
    } catch (error) {
      this.#failed(replica, error);
      return this.#onPrimary(primary, 'error', work);
    }
  }

  async close(): Promise<void> {
    await Promise.allSettled(this.#replicas.map((replica) => replica.db.destroy()));
  }

  #onPrimary<T>(primary: Kysely<Database>, reason: PrimaryReason, work: SnapshotWork<T>): Promise<T> {
    this.metrics.dbReads.inc({ target: 'primary', reason });
    return onPrimary(primary, work);
  }

  /** Learns how far `replica` has replayed (one indexed read; reads arriving meanwhile share it). */
  #probe(replica: Replica): Promise<void> {
    return (replica.probing ??= readHead(replica.db)
      .then((head) => {
        replica.applied = Math.max(replica.applied, head);
        this.#recovered(replica);
      })
      .catch((error: unknown) => this.#failed(replica, error))
      .finally(() => (replica.probing = undefined)));
  }

  #failed(replica: Replica, error: unknown): void {
    replica.failures += 1;
    const ms = Math.min(DOWN_MOST_MS, DOWN_FIRST_MS * 2 ** (replica.failures - 1));
    replica.downUntil = Date.now() + ms;
    this.logger.warn({ err: error }, `${replica.name} failed; reads go to the primary for ${ms} ms`);
  }

  #recovered(replica: Replica): void {
    if (replica.failures > 0) this.logger.info(`${replica.name} answers again`);
    replica.failures = 0;
  }
}

async function onPrimary<T>(primary: Kysely<Database>, work: SnapshotWork<T>): Promise<T> {
  const result = await snapshot(primary, () => true, work);
  return (result as { ok: true; value: T }).value;
}

/**
 * `work` in one REPEATABLE READ snapshot of `db`, told the snapshot's head, which is read first;
 * `{ ok: false }` without running `work` when `accept` refuses that head.
 */
async function snapshot<T>(
  db: Kysely<Database>,
  accept: (head: number) => boolean,
  work: SnapshotWork<T>,
): Promise<{ ok: true; value: T } | { ok: false }> {
  return db
    .transaction()
    .setIsolationLevel('repeatable read')
    .execute(async (trx) => {
      const head = await readHead(trx);
      return accept(head) ? { ok: true as const, value: await work(trx, head) } : { ok: false as const };
    });
}

/** The last position committed (and, on a replica, replayed): one row by primary key. */
async function readHead(db: Kysely<Database>): Promise<number> {
  const { rows } = await sql<{
    head: number;
  }>`select value::bigint as head from counters where name = ${COUNTER_NAMES.lastPosition}`.execute(db);
  return Number(rows[0]?.head ?? 0);
}

/** Where a read may go: the primary, and the replicas when any are configured. */
export interface ReadTargets {
  db: Kysely<Database>;
  replicas?: ReplicaSet;
  metrics: Metrics;
}

/** `work` on one snapshot whose head is at or above `published` when a replica has one, else on the primary. */
export async function readSnapshot<T>(
  targets: ReadTargets,
  published: number | null,
  work: SnapshotWork<T>,
): Promise<T> {
  if (targets.replicas) return targets.replicas.read(targets.db, published, work);
  targets.metrics.dbReads.inc({ target: 'primary', reason: 'no_replica' });
  return onPrimary(targets.db, work);
}

/**
 * `work` that needs no head of its own (one statement), on a replica that has replayed the
 * published head (asked for only when there are replicas), else on the primary.
 */
export async function readLatest<T>(
  targets: ReadTargets,
  published: () => Promise<number | null>,
  work: (db: Kysely<Database>) => Promise<T>,
): Promise<T> {
  if (targets.replicas) return targets.replicas.read(targets.db, await published(), (trx) => work(trx));
  targets.metrics.dbReads.inc({ target: 'primary', reason: 'no_replica' });
  return work(targets.db);
}
