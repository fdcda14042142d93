import type { Kysely, Transaction } from 'kysely';
import type { Database, LimitAuditTable } from '../../db/database.js';
import { DEFAULT_PLAN } from '../throttle/plans.js';
import type { OverrideRecord } from './policy.js';

// Plans given to users, overrides and their audit, in PostgreSQL: the source of truth, in the backup
// (docs/throttling.md "Plans and overrides"). Every change is one transaction with its `limit_audit` row.

/** What one worker applies: the users given a plan other than `default`, and the overrides in force at `now`. */
export async function readPolicies(
  db: Kysely<Database>,
  now: Date,
): Promise<{ userPlans: Array<[number, string]>; overrides: OverrideRecord[] }> {
  const [plans, overrides] = await Promise.all([
    db.selectFrom('users').select(['id', 'plan']).where('plan', '<>', DEFAULT_PLAN).execute(),
    liveOverrides(db, now),
  ]);
  return { userPlans: plans.map((row) => [Number(row.id), row.plan]), overrides };
}

/** The overrides in force at `now`, oldest first, with the name of the user each is for. */
export async function liveOverrides(
  db: Kysely<Database>,
  now: Date,
): Promise<Array<OverrideRecord & { username: string | null }>> {
  const rows = await db
    .selectFrom('limit_overrides')
    .leftJoin('users', 'users.id', 'limit_overrides.user_id')
    .selectAll('limit_overrides')
    .select('users.username')
    .where('limit_overrides.removed_at', 'is', null)
    .where('limit_overrides.until', '>', now)
    .orderBy('limit_overrides.id')
    .execute();
  return rows.map((row) => ({
    id: Number(row.id),
    targetKind: row.target_kind,
    userId: row.user_id === null ? null : Number(row.user_id),
    address: row.address,
    rates: row.rates,
    until: row.until,
    reason: row.reason,
    createdBy: row.created_by,
    createdAt: row.created_at,
    username: row.username,
  }));
}

/** Who a change is for: a user (by name, with its id) or an address or prefix, as the operator wrote it. */
export type Target = { kind: 'user'; name: string } | { kind: 'address'; address: string };

/** How the audit names a target: `user ada`, `address 203.0.113.0/24`. */
export function targetText(target: Target): string {
  return target.kind === 'user' ? `user ${target.name}` : `address ${target.address}`;
}

/** One change by an operator: who, when it ends, why. */
export interface Change {
  actor: string;
  reason: string;
}

/** `plan:set`: gives user `name` plan `plan`, audited. False when no such user. */
export async function setUserPlan(
  db: Kysely<Database>,
  name: string,
  plan: string,
  change: Change,
): Promise<{ ok: true; before: string } | { ok: false }> {
  return db.transaction().execute(async (trx) => {
    const user = await trx
      .selectFrom('users')
      .select(['id', 'plan'])
      .where('username', '=', name)
      .forUpdate()
      .executeTakeFirst();
    if (!user) return { ok: false as const };
    await trx.updateTable('users').set({ plan }).where('id', '=', user.id).execute();
    await audit(trx, change, 'plan-set', `user ${name}`, { plan: user.plan }, { plan });
    return { ok: true as const, before: user.plan };
  });
}

/**
 * `limit:override`: gives `target` the rates `rates` until `until`, audited; an override in force for the same
 * client is replaced (its end recorded as `before`). Undefined when the target names no user.
 */
export async function setOverride(
  db: Kysely<Database>,
  target: Target,
  rates: Readonly<Record<string, string>>,
  until: Date,
  change: Change,
  now: Date,
): Promise<{ id: number; replaced: number[] } | undefined> {
  return db.transaction().execute(async (trx) => {
    let userId: number | null = null;
    if (target.kind === 'user') {
      const user = await trx.selectFrom('users').select('id').where('username', '=', target.name).executeTakeFirst();
      if (!user) return undefined;
      userId = Number(user.id);
    }
    const address = target.kind === 'address' ? target.address : null;
    let same = trx
      .updateTable('limit_overrides')
      .set({ removed_at: now })
      .where('removed_at', 'is', null)
      .where('until', '>', now);
    same = userId !== null ? same.where('user_id', '=', userId) : same.where('address', '=', address);
    const replaced = await same.returning(['id', 'rates', 'until']).execute();
    const row = await trx
      .insertInto('limit_overrides')
      .values({
        target_kind: target.kind,
        user_id: userId,
        address,
        rates: JSON.stringify(rates),
        until,
        reason: change.reason,
        created_by: change.actor,
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    const before =
      replaced.length === 0 ? null : replaced.map((r) => ({ id: Number(r.id), rates: r.rates, until: r.until }));
    const id = Number(row.id);
    await audit(trx, change, 'override-set', targetText(target), before, { id, rates, until });
    return { id, replaced: replaced.map((r) => Number(r.id)) };
  });
}

/** `limit:remove`: ends override `id` now, audited. False when no override of that id is in force. */
export async function removeOverride(db: Kysely<Database>, id: number, change: Change, now: Date): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const row = await trx
      .updateTable('limit_overrides')
      .set({ removed_at: now })
      .where('id', '=', id)
      .where('removed_at', 'is', null)
      .where('until', '>', now)
      .returning(['id', 'target_kind', 'user_id', 'address', 'rates', 'until'])
      .executeTakeFirst();
    if (!row) return false;
    const user =
      row.user_id === null
        ? undefined
        : await trx.selectFrom('users').select('username').where('id', '=', row.user_id).executeTakeFirst();
    const target =
      row.target_kind === 'user' ? `user ${user?.username ?? `#${row.user_id}`}` : `address ${row.address}`;
    await audit(trx, change, 'override-removed', target, { id, rates: row.rates, until: row.until }, null);
    return true;
  });
}

/** One row of `limit:audit`. */
export interface LimitAuditEntry {
  at: Date;
  actor: string;
  action: LimitAuditTable['action'];
  target: string;
  reason: string | null;
  before: unknown;
  after: unknown;
}

/** The last `limit` changes, newest first. */
export async function limitAudit(db: Kysely<Database>, limit: number): Promise<LimitAuditEntry[]> {
  const rows = await db.selectFrom('limit_audit').selectAll().orderBy('id', 'desc').limit(limit).execute();
  return rows.map(({ at, actor, action, target, reason, before, after }) => ({
    at,
    actor,
    action,
    target,
    reason,
    before,
    after,
  }));
}

/** The users given each plan, by plan. */
export async function planMembers(db: Kysely<Database>): Promise<Map<string, number>> {
  const rows = await db
    .selectFrom('users')
    .select('plan')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .groupBy('plan')
    .execute();
  return new Map(rows.map((row) => [row.plan, Number(row.n)]));
}

async function audit(
  trx: Transaction<Database>,
  change: Change,
  action: LimitAuditTable['action'],
  target: string,
  before: unknown,
  after: unknown,
): Promise<void> {
  await trx
    .insertInto('limit_audit')
    .values({
      actor: change.actor,
      action,
      target,
      reason: change.reason || null,
      before: before === null ? null : JSON.stringify(before),
      after: after === null ? null : JSON.stringify(after),
    })
    .execute();
}
