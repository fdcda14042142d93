import { parseRate } from './rate.js';

/**
 * Plans of limits (docs/throttling.md "Plans and overrides"): THROTTLE_PLANS names each plan's rates, e.g.
 * `partner: user=1000/min, reports=100/hour; free: user=50/min`, and THROTTLE_PLAN_CONCURRENCY its requests in
 * progress, e.g. `partner: reports=4`. A scope a plan does not name keeps the settings' value; `default` is the
 * plan of every user given none, and is the settings themselves.
 */

/** A plan's values by scope: rate texts (THROTTLE_PLANS) or requests in progress (THROTTLE_PLAN_CONCURRENCY). */
export type PlanTable<T> = Readonly<Record<string, Readonly<Record<string, T>>>>;

/** The plan of every user given none: the settings' own rates. */
export const DEFAULT_PLAN = 'default';

/** Scopes that never count a user, so no plan can change them: a plan is a user's. */
export const PLANLESS_SCOPES: Readonly<Record<string, string>> = {
  anon: 'it counts clients without a user',
  'token-obtain': 'it counts addresses before anyone has logged in',
  login: 'it counts the usernames logins name',
};

const NAME = /^[a-z0-9][a-z0-9._-]*$/;

/**
 * Reads `plan: scope=value, …; plan: …` with each value read by `value` (which throws an Error saying what it
 * expected), or says in one line what is wrong.
 * @returns the table, or the message.
 */
export function readPlans<T>(
  text: string,
  value: (text: string) => T,
): { ok: true; plans: Record<string, Record<string, T>> } | { ok: false; message: string } {
  const plans: Record<string, Record<string, T>> = {};
  for (const part of text.split(';').map((p) => p.trim())) {
    if (part === '') continue;
    const colon = part.indexOf(':');
    const name = (colon === -1 ? part : part.slice(0, colon)).trim();
    if (colon === -1 || !NAME.test(name))
      return { ok: false, message: `expected "plan: scope=value, …" separated by semicolons, got "${part}"` };
    if (name === DEFAULT_PLAN)
      return { ok: false, message: 'the default plan is the settings themselves (THROTTLE_ANON, THROTTLE_USER, …)' };
    if (Object.hasOwn(plans, name)) return { ok: false, message: `plan "${name}" is declared twice` };
    const values: Record<string, T> = {};
    for (const pair of part
      .slice(colon + 1)
      .split(',')
      .map((p) => p.trim())
      .filter(Boolean)) {
      const [scope, given, extra] = pair.split('=').map((p) => p.trim());
      if (!scope || !NAME.test(scope) || given === undefined || extra !== undefined)
        return { ok: false, message: `plan "${name}": expected scope=value pairs separated by commas, got "${pair}"` };
      if (Object.hasOwn(PLANLESS_SCOPES, scope))
        return {
          ok: false,
          message: `plan "${name}" names ${scope}, which no plan can change: ${PLANLESS_SCOPES[scope]}`,
        };
      try {
        values[scope] = value(given);
      } catch (error) {
        return { ok: false, message: `plan "${name}", ${scope}: ${(error as Error).message}` };
      }
    }
    if (Object.keys(values).length === 0) return { ok: false, message: `plan "${name}" names no scope` };
    plans[name] = values;
  }
  return { ok: true, plans };
}

/** A rate text as THROTTLE_PLANS takes it. @throws Error when it is not one (see `parseRate`). */
export function planRate(text: string): string {
  parseRate(text);
  return text;
}

/** Requests in progress as THROTTLE_PLAN_CONCURRENCY takes them. @throws Error when not a whole number ≥ 1. */
export function planConcurrency(max: number): (text: string) => number {
  return (text) => {
    if (!/^\d+$/.test(text) || Number(text) < 1 || Number(text) > max)
      throw new Error(`expected a whole number from 1 to ${max}, got "${text}"`);
    return Number(text);
  };
}
