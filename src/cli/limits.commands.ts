import type { Kysely } from 'kysely';
import type { Database } from '../../db/database.js';
import { limitsEpochKey } from '../limits/policy-source.js';
import {
  limitAudit,
  liveOverrides,
  planMembers,
  removeOverride,
  setOverride,
  setUserPlan,
  targetText,
  type Change,
} from '../limits/overrides.repository.js';
import { newEpoch } from '../read-cache/head.js';
import { isValidUsername } from '../auth/users.repository.js';
import { readArgs, readRates, readTarget, readUntil } from './limit-arguments.js';
import type { Config } from '../settings/config.js';
import { DEFAULT_PLAN } from '../throttle/plans.js';
import type { Command, PreparedCommand } from './command.js';
import { fail, say } from './output.js';
import { setInServiceRedis } from './token-epoch.js';
import { migrated, whoRuns } from './users.commands.js';

// Plans and overrides of the throttle's limits (docs/operations.md "Limits per client"). Every change is one
// transaction with its `limit_audit` row, then every server is told (the epoch in Redis), and applies it within 1 s.
// Exit status 0 done, 1 refused.

export const plans: Command = {
  usage: '  plans              the plans of limits (THROTTLE_PLANS) and how many users each has',
  needs: 'database',
  prepare: (_args, { config }) => ({ ok: true, run: (db) => migrated(db, () => listPlans(db, config)) }),
};

export const planSet: Command = {
  usage: `  plan:set NAME PLAN give user NAME the plan PLAN (default: the settings' rates) on every server
                     within 1 s [--reason TEXT] [--by NAME]`,
  needs: 'database',
  prepare: (args, { config }) => {
    const { positional, options, error } = readArgs(args, ['reason', 'by']);
    if (error) return refused(error);
    const [name = '', plan = ''] = positional;
    if (!isValidUsername(name) || positional.length !== 2) return refused('plan:set needs a user NAME and a PLAN');
    if (plan !== DEFAULT_PLAN && !Object.hasOwn(config.THROTTLE_PLANS, plan))
      return refused(`no plan "${plan}": THROTTLE_PLANS declares ${planNames(config)}`);
    const change = changeOf(options);
    return {
      ok: true,
      run: (db) =>
        migrated(db, async () => {
          const outcome = await setUserPlan(db, name, plan, change);
          if (!outcome.ok) return fail(`no user "${name}"`);
          say(`user "${name}": plan ${outcome.before} → ${plan}`);
          return tellServers(config);
        }),
    };
  },
};

export const limitOverride: Command = {
  usage: `  limit:override (user NAME | ADDRESS[/BITS]) SCOPE=RATE[,…] --until TIME --reason TEXT [--by NAME]
                     other rates for one user, address or prefix until TIME (2026-12-08T00:00:00Z,
                     or a duration: 7d, 12h, 30m, 90s); replaces that client's override in force`,
  needs: 'database',
  prepare: (args, { config }) => {
    const { positional, options, error } = readArgs(args, ['until', 'reason', 'by']);
    if (error) return refused(error);
    const target = readTarget(positional);
    if (typeof target === 'string') return refused(target);
    const ratesText = positional[target.kind === 'user' ? 2 : 1];
    if (ratesText === undefined || positional.length !== (target.kind === 'user' ? 3 : 2))
      return refused('limit:override needs a client (user NAME, or an ADDRESS or prefix) and SCOPE=RATE[,…]');
    const rates = readRates(ratesText, target);
    if (typeof rates === 'string') return refused(rates);
    const now = new Date();
    const until = readUntil(options.until, now);
    if (typeof until === 'string') return refused(until);
    if (!options.reason?.trim()) return refused('limit:override needs --reason TEXT: the audit says why');
    const change = changeOf(options);
    return {
      ok: true,
      run: (db) =>
        migrated(db, async () => {
          const made = await setOverride(db, target, rates, until, change, now);
          if (!made) return fail(`no user "${(target as { name: string }).name}"`);
          const replaced =
            made.replaced.length === 0 ? '' : `, replacing ${made.replaced.map((id) => `#${id}`).join(', ')}`;
          say(`override #${made.id} for ${targetText(target)}: ${ratesText} until ${until.toISOString()}${replaced}`);
          return tellServers(config);
        }),
    };
  },
};

export const limitOverrides: Command = {
  usage: '  limit:overrides    the overrides in force: id, client, rates, until, why, by whom',
  needs: 'database',
  prepare: () => ({ ok: true, run: (db) => migrated(db, () => listOverrides(db)) }),
};

export const limitRemove: Command = {
  usage: '  limit:remove ID    end override ID now, on every server within 1 s [--reason TEXT] [--by NAME]',
  needs: 'database',
  prepare: (args, { config }) => {
    const { positional, options, error } = readArgs(args, ['reason', 'by']);
    if (error) return refused(error);
    const id = Number((positional[0] ?? '').replace(/^#/, ''));
    if (positional.length !== 1 || !Number.isSafeInteger(id) || id < 1)
      return refused('limit:remove needs the ID of an override (limit:overrides lists them)');
    const change = changeOf(options);
    return {
      ok: true,
      run: (db) =>
        migrated(db, async () => {
          if (!(await removeOverride(db, id, change, new Date()))) return fail(`no override #${id} in force`);
          say(`override #${id} removed`);
          return tellServers(config);
        }),
    };
  },
};

export const limitAuditCommand: Command = {
  usage: '  limit:audit        the last 20 changes to plans and overrides (--limit N for more)',
  needs: 'database',
  prepare: (args) => {
    const { options, error } = readArgs(args, ['limit']);
    if (error) return refused(error);
    const limit = options.limit === undefined ? 20 : Number(options.limit);
    if (!Number.isSafeInteger(limit) || limit < 1) return refused('--limit needs a whole number of at least 1');
    return { ok: true, run: (db) => migrated(db, () => printLimitAudit(db, limit)) };
  },
};

async function listPlans(db: Kysely<Database>, config: Config): Promise<number> {
  const members = await planMembers(db);
  say(
    `${DEFAULT_PLAN}: the settings' rates (THROTTLE_ANON, THROTTLE_USER, …); ${members.get(DEFAULT_PLAN) ?? 0} user(s)`,
  );
  for (const [name, rates] of Object.entries(config.THROTTLE_PLANS)) {
    const inProgress = config.THROTTLE_PLAN_CONCURRENCY[name] ?? {};
    const values = [
      ...Object.entries(rates).map(([scope, rate]) => `${scope}=${rate}`),
      ...Object.entries(inProgress).map(([scope, n]) => `${scope} ${n} at once`),
    ];
    say(`${name}: ${values.join(', ')}; ${members.get(name) ?? 0} user(s)`);
  }
  for (const [name, count] of members)
    if (name !== DEFAULT_PLAN && !Object.hasOwn(config.THROTTLE_PLANS, name))
      say(`${name}: not declared by THROTTLE_PLANS, so the settings' rates apply; ${count} user(s)`);
  return 0;
}

async function listOverrides(db: Kysely<Database>): Promise<number> {
  const rows = await liveOverrides(db, new Date());
  if (rows.length === 0) return say('no override is in force');
  for (const row of rows) {
    const client = row.targetKind === 'user' ? `user ${row.username}` : `address ${row.address}`;
    const rates = Object.entries(row.rates)
      .map(([scope, rate]) => `${scope}=${rate}`)
      .join(',');
    say(`#${row.id}  ${client}  ${rates}  until ${row.until.toISOString()}  "${row.reason}"  by ${row.createdBy}`);
  }
  return 0;
}

async function printLimitAudit(db: Kysely<Database>, limit: number): Promise<number> {
  const rows = await limitAudit(db, limit);
  if (rows.length === 0) return say('no change to plans or overrides yet');
  for (const row of rows) {
    const why = row.reason ? `  "${row.reason}"` : '';
    const change = `${JSON.stringify(row.before ?? null)} → ${JSON.stringify(row.after ?? null)}`;
    say(`${row.at.toISOString()}  ${row.actor}  ${row.action}  ${row.target}  ${change}${why}`);
  }
  return 0;
}

/** Tells every server that plans or overrides changed: they read them again within 1 s. */
async function tellServers(config: Config): Promise<number> {
  try {
    const told = await setInServiceRedis(config, limitsEpochKey(config.REDIS_PREFIX), newEpoch());
    return say(told ? 'every server applies it within 1 s' : 'no service runs on DATA_DIR: it applies from its start');
  } catch (error) {
    return fail(
      `the change is made in the database, but Redis did not take it (${(error as Error).message}): servers ` +
        'that could not reach Redis either apply it once they can; run the command again once Redis answers',
    );
  }
}

function changeOf(options: Record<string, string | undefined>): Change {
  return { actor: options.by?.trim() || whoRuns(), reason: options.reason?.trim() ?? '' };
}

function planNames(config: Config): string {
  const names = Object.keys(config.THROTTLE_PLANS);
  return names.length === 0 ? 'none' : names.join(', ');
}

function refused(error: string): PreparedCommand {
  return { ok: false, error };
}
