import type { Operation } from '../history.js';
import { readRemaining } from './limits-analysis.js';
import { sendAs, type Identity } from './limits-schedule.js';

/** What one request to each path weighs, in the units of the scope's limit. */
export type Costs = Map<string, number>;

/**
 * What a request to each of the identity's paths costs (docs/verify.md "Weighted routes"), learned right after
 * its lone request (its first op) from the units left that each answer states (`RateLimit`'s `r`): each path is
 * asked twice, one request at a time on one connection, weighted path first, so that every request follows an
 * answer that stated what was left before it. What is left falls by the request's cost, less any units that
 * left the window between the two answers, so the larger of a path's two falls is its cost. A service that
 * states nothing left on the lone answer states no cost: every request is 1 unit, as when limits count requests.
 * Returns why, when an answer on the way was not an admission stating what is left.
 */
export async function learnCosts(identity: Identity): Promise<Costs | { why: string }> {
  const costs: Costs = new Map<string, number>(identity.paths.map((path) => [path, 1]));
  let before = identity.ops[0]!;
  if (readRemaining(before.headers['ratelimit']) === undefined) return costs;
  if (remainingAfter(before) === undefined) return { why: unlearnt(identity.paths[0]!, before) };
  const falls = new Map<string, number[]>();
  for (const path of [...identity.paths].reverse().flatMap((p) => [p, p])) {
    const op = await sendAs(identity, identity.clients[0]!, 'lone', path);
    const [was, left] = [remainingAfter(before), remainingAfter(op)];
    if (was === undefined || left === undefined) return { why: unlearnt(path, op) };
    falls.set(path, [...(falls.get(path) ?? []), was - left]);
    before = op;
  }
  for (const [path, seen] of falls) costs.set(path, Math.max(1, ...seen));
  return costs;
}

/** The units an admission's answer says are left, or undefined for a refusal or an answer that says none. */
function remainingAfter(op: Operation): number | undefined {
  const admitted = op.status !== null && op.status >= 200 && op.status < 400;
  return admitted ? readRemaining(op.headers['ratelimit']) : undefined;
}

function unlearnt(path: string, op: Operation): string {
  const answer = op.status === null ? `no answer (${op.error})` : `${op.status}`;
  const why = op.status === 429 ? ': the limit is too small for a request there, or the budget was in use' : '';
  return `learning what GET /${path} costs, it answered ${answer}${why}: check --path and --weighted-path`;
}

/** The costs as a phrase for a summary: `GET /api/tasks/?page_size=300 costs 3 units`, or none when all cost 1. */
export function costsInWords(costs: Costs): string | undefined {
  const heavy = [...costs].filter(([, units]) => units !== 1);
  if (heavy.length === 0) return undefined;
  return heavy.map(([path, units]) => `GET /${path} costs ${units} units`).join(', ');
}
