/**
 * The value types of the plan settings (THROTTLE_PLANS, THROTTLE_PLAN_CONCURRENCY; docs/throttling.md "Plans and
 * overrides"), as config-values.ts has the others: each parses its text, or says in one line what it expected.
 */
import { z } from 'zod';
import { planConcurrency, planRate, readPlans } from '../throttle/plans.js';
import { MAX_CONCURRENCY } from './config-values.js';

/** `plan: scope=rate, …; plan: …` (THROTTLE_PLANS): each plan's rates by scope. */
export const plans = planTable(planRate);

/** `plan: scope=N, …; plan: …` (THROTTLE_PLAN_CONCURRENCY): each plan's requests in progress by scope. */
export const planLimits = planTable(planConcurrency(MAX_CONCURRENCY));

function planTable<T>(value: (text: string) => T) {
  return z
    .string()
    .trim()
    .transform((text, ctx) => {
      const read = readPlans(text, value);
      if (read.ok) return read.plans;
      ctx.addIssue({ code: 'custom', message: read.message });
      return z.NEVER;
    });
}
