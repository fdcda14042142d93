import { z } from 'zod';
import { MAX_RATE_LIMIT } from '../throttle/rate.js';

// THROTTLE_COSTS (docs/throttling.md "Cost: requests that weigh more"): what one request of the routes naming a
// scope costs in its units, overriding the cost the route declares.

const SCOPE_NAME = /^[a-z0-9][a-z0-9._-]*$/;

/** Scopes whose routes cannot be given a cost here: the general ones count every route, the login one usernames. */
const NOT_COSTED: Readonly<Record<string, string>> = {
  anon: 'the anon scope counts every route without a scope of its own; name the scope of the route instead',
  user: 'the user scope counts every route without a scope of its own; name the scope of the route instead',
  login: 'the login scope counts usernames, one attempt each',
};

function checkScopeCosts(text: string, ctx: z.RefinementCtx): void {
  for (const pair of pairsOf(text)) {
    const [scope, cost, extra] = pair.split('=').map((part) => part.trim());
    if (!scope || !SCOPE_NAME.test(scope) || cost === undefined || extra !== undefined) {
      ctx.addIssue({ code: 'custom', message: `expected scope=N pairs separated by commas, got "${pair}"` });
      return;
    }
    if (Object.hasOwn(NOT_COSTED, scope)) {
      ctx.addIssue({ code: 'custom', message: NOT_COSTED[scope] as string });
      return;
    }
    if (!/^\d+$/.test(cost) || Number(cost) < 1 || Number(cost) > MAX_RATE_LIMIT) {
      ctx.addIssue({
        code: 'custom',
        message: `expected a whole number of units from 1 to ${MAX_RATE_LIMIT}, got "${pair}"`,
      });
      return;
    }
  }
}

function pairsOf(text: string): string[] {
  return text
    .split(',')
    .map((pair) => pair.trim())
    .filter(Boolean);
}

/** `scope=N,scope=N` (THROTTLE_COSTS): a map of scope to the units one request of its routes costs. */
export const scopeCosts = z
  .string()
  .trim()
  .superRefine(checkScopeCosts)
  .transform((text) =>
    Object.fromEntries(
      pairsOf(text)
        .map((pair) => pair.split('=').map((part) => part.trim()))
        .map(([s, n]) => [s, Number(n)]),
    ),
  ) as z.ZodType<Record<string, number>, string>;
