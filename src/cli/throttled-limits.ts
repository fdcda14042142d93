import { readPolicies } from '../limits/overrides.repository.js';
import { LimitPolicy, type OverrideRecord } from '../limits/policy.js';
import { withTimeout } from '../stores/with-timeout.js';
import type { Config } from '../settings/config.js';
import { describeStoreError } from '../stores/store-errors.js';
import { DEFAULT_PLAN } from '../throttle/plans.js';
import type { WithDatabase } from './command.js';

// What `throttled` says of each client's limits (docs/throttling.md "Find them"): a user's plan and the override
// in force for the client, read from PostgreSQL as a web worker reads them and matched by the worker's own
// LimitPolicy, so the CLI cannot disagree with the service about which override covers an address.

/** How long `throttled` waits for the database before it prints its clients without plans and overrides. */
const DATABASE_WAIT_MS = 5_000;

/** A client's plan and override, to follow its line; the client as the watch names it (`user:7`, `ip:…`). */
export type DescribeLimits = (ident: string) => string;

/** The clients' plans and overrides, or the one line that says why they could not be read. */
export type ClientLimits = { ok: true; describe: DescribeLimits } | { ok: false; line: string };

/**
 * Reads the plans given and the overrides in force. `embeddedRuns`: a Paceline on DATA_DIR runs the embedded
 * PostgreSQL; without it or DATABASE_URL there is no database to read, and a read-only command must not start one.
 * Never throws: a database that fails or takes more than 5 s is the line that says so.
 */
export async function readClientLimits(
  config: Config,
  withDatabase: WithDatabase,
  embeddedRuns: boolean,
): Promise<ClientLimits> {
  if (!config.DATABASE_URL && !embeddedRuns)
    return unread('DATABASE_URL is not set and no Paceline with its embedded database runs on DATA_DIR');
  const policy = new LimitPolicy({ rates: config.THROTTLE_PLANS, concurrency: config.THROTTLE_PLAN_CONCURRENCY });
  let given = new Map<number, string>();
  const read = withDatabase(async (db) => {
    const { userPlans, overrides } = await readPolicies(db, new Date());
    policy.replace(userPlans, overrides);
    given = new Map(userPlans);
    return 0;
  });
  try {
    await withTimeout(read, DATABASE_WAIT_MS, 'the database read');
  } catch (error) {
    return unread(describeStoreError(error, 'DATABASE_URL').cause);
  }
  const now = Date.now();
  return { ok: true, describe: (ident) => describeClient(policy, given, ident, now) };
}

function unread(why: string): ClientLimits {
  return { ok: false, line: `plans and overrides could not be read: ${why}` };
}

/** `plan partner  override #4 user=1000/min until …`; an address or a login's name has no plan. */
function describeClient(policy: LimitPolicy, given: ReadonlyMap<number, string>, ident: string, nowMs: number): string {
  const userId = userOf(ident);
  const override = policy.overrideFor(ident, userId, nowMs);
  const plan = userId === undefined ? 'no plan' : planText(policy, given.get(userId) ?? DEFAULT_PLAN, userId);
  return override ? `${plan}  ${overrideText(override)}` : plan;
}

/** The user a client is, when it is one: the throttle counts a user as `user:<id>` (src/edge/client-identity.ts). */
function userOf(ident: string): number | undefined {
  const match = /^user:(\d+)$/.exec(ident);
  return match ? Number(match[1]) : undefined;
}

/** The plan the user was given, and what applies instead when these settings do not declare it. */
function planText(policy: LimitPolicy, plan: string, userId: number): string {
  const applied = policy.planOf(userId);
  return plan === applied ? `plan ${plan}` : `plan ${plan} (not declared by THROTTLE_PLANS: ${applied} applies)`;
}

function overrideText(override: OverrideRecord): string {
  const rates = Object.entries(override.rates)
    .map(([scope, rate]) => `${scope}=${rate}`)
    .join(',');
  return `override #${override.id} ${rates} until ${override.until.toISOString()}`;
}
