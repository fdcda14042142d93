import type { Operation } from '../history.js';
import type { Costs } from './limits-costs.js';
import {
  analyseLimits,
  detailSeconds,
  dishonestRetryAfter,
  readPolicy,
  trailingCounts,
  type LimitFindings,
} from './limits-analysis.js';
import { SCHEDULES, type Identity, type ScheduleName } from './limits-schedule.js';

export interface Policy {
  limit: number;
  windowMs: number;
}

/** How one identity is judged: its policy, whether its answers state the limit each was decided under, its costs. */
export interface Terms {
  policy: Policy;
  /** Each answer's `RateLimit-Policy` names its own limit (not `--limit`, nor a measured one). */
  stated: boolean;
  costs: Costs;
  slackMs: number;
}

/**
 * One identity's verdict (docs/verify.md "Limits are exact"), in units: each request weighs its path's cost and was
 * decided under the limit its answer states (an override's, a plan's: docs/verify.md "Overrides and plans").
 */
export function judge(identity: Identity, terms: Terms) {
  const ops = identity.ops.map((op) => weigh(identity, terms, op));
  const admitted = ops.filter((op) => op.status !== null && op.status < 400);
  const refused = ops.filter((op) => op.status === 429);
  const findings: LimitFindings = analyseLimits({
    admitted,
    refused,
    unknown: ops.filter((op) => op.status === null),
    limit: terms.policy.limit,
    windowNs: terms.policy.windowMs * 1e6,
    start: Math.min(...ops.map((op) => op.invoke)),
  });
  const { missing, malformed, stated, late } = judgeRetryAfter(ops, refused, admitted, terms.slackMs * 1e6);
  return {
    name: identity.name,
    policy: terms.policy,
    costs: Object.fromEntries(terms.costs),
    limitsStated: tallyLimits(ops),
    otherWindowS: otherWindow(identity, terms),
    requests: ops.length,
    admitted: admitted.length,
    refused: refused.length,
    noAnswer: ops.filter((op) => op.status === null).length,
    otherErrors: ops.filter((op) => op.status !== null && op.status >= 400 && op.status !== 429).length,
    perSchedule: tally(identity, (op) => identity.scheduleOf.get(op) ?? 'lone'),
    perPath: tally(identity, (op) => identity.pathOf.get(op) ?? ''),
    findings: {
      ...findings,
      overLimit: findings.overLimit?.slice(0, 50) ?? null,
      unjustified: findings.unjustified.slice(0, 20),
    },
    retryAfterJudged: stated.length,
    retryAfterLate: late.slice(0, 20),
    retryAfterMissing: missing.length,
    malformedRetryAfter: malformed.slice(0, 10).map((op) => ({ op: op.op, headers: op.headers, body: op.body })),
    problems: problemsOf(identity, terms, { findings, missing, malformed, late, refused }),
    trailing: trailingCounts(admitted, terms.policy.windowMs * 1e6).map(([t, n]) => [t / 1e9, n] as [number, number]),
  };
}

type Weighed = Operation & { units: number; limit: number };

/** An op with its path's cost and the limit its answer states, where the answers state each one's. */
function weigh(identity: Identity, { policy, stated, costs }: Terms, op: Operation): Weighed {
  const units = costs.get(identity.pathOf.get(op.op) ?? '') ?? 1;
  const own = stated ? readPolicy(op.headers['ratelimit-policy']) : undefined;
  return { ...op, units, limit: own?.windowMs === policy.windowMs ? own.limit : policy.limit };
}

/**
 * The 429s without `Retry-After`, with a malformed one, with a well-formed one, and those whose wait was too
 * short (dishonestRetryAfter), judged per cost: a refusal's wait frees its own units, so the demand that must be
 * admitted at the second it states is that of requests weighing no more than it. A request that costs more than its
 * limit is refused at once, with no wait to state (docs/throttling.md "Cost: requests that weigh more").
 */
function judgeRetryAfter(ops: Weighed[], refused: Weighed[], admitted: Weighed[], slackNs: number) {
  const waited = refused.filter((op) => op.units <= op.limit);
  const missing = waited.filter((op) => op.headers['retry-after'] === undefined);
  const malformed = waited.filter((op) => op.headers['retry-after'] !== undefined && !wellFormedRetryAfter(op));
  const stated = waited
    .filter(wellFormedRetryAfter)
    .map((op) => ({ ...op, retryAfterS: Number(op.headers['retry-after']) }));
  const late: ReturnType<typeof dishonestRetryAfter> = [];
  for (const units of new Set(stated.map((op) => op.units))) {
    const lastInvoke = Math.max(...ops.filter((op) => op.units <= units).map((op) => op.invoke));
    late.push(
      ...dishonestRetryAfter(
        stated.filter((op) => op.units === units),
        admitted,
        slackNs,
        lastInvoke,
      ),
    );
  }
  return { missing, malformed, stated, late: late.sort((a, b) => a.op - b.op) };
}

/** What one identity's history shows against its terms: the findings, the 429s judged, every refusal. */
interface Seen {
  findings: LimitFindings;
  missing: Weighed[];
  malformed: Weighed[];
  late: { op: number }[];
  refused: Weighed[];
}

/** The problems of one identity, each a phrase naming the schedules that exposed it. */
function problemsOf(identity: Identity, terms: Terms, seen: Seen): string[] {
  const { findings, missing, malformed, late } = seen;
  const weighted = [...terms.costs.values()].some((units) => units !== 1);
  const by = (opNumbers: number[]) => exposedBy(identity.scheduleOf, opNumbers);
  const problems: string[] = [];
  if (findings.overLimit && findings.excess) {
    const { units, limit } = findings.excess;
    const counted = weighted ? `${units} units admitted` : `${units} admissions`;
    problems.push(`${counted} inside one window (limit ${limit}), exposed by ${by(findings.overLimit)}`);
  }
  if (findings.unjustified.length > 0) {
    const ops = findings.unjustified.map((u) => u.op);
    const limit = seen.refused.find((op) => op.op === ops[0])?.limit ?? terms.policy.limit;
    const when = weighted ? `their units fitted in the window (limit ${limit})` : `the window held fewer than ${limit}`;
    problems.push(`${ops.length} refusals while ${when}, exposed by ${by(ops)}`);
  }
  if (missing.length > 0) problems.push(`${missing.length} 429s without Retry-After`);
  if (malformed.length > 0)
    problems.push(`${malformed.length} 429s whose Retry-After is not a whole number ≥ 1 matching their detail`);
  if (late.length > 0)
    problems.push(
      `${late.length} retries at the second Retry-After stated were still refused, exposed by ${by(late.map((l) => l.op))}`,
    );
  return problems;
}

/** How many answers stated each limit (in the identity's window): one key, unless its limit changed meanwhile. */
function tallyLimits(ops: Weighed[]): Record<string, number> {
  const seen: Record<string, number> = {};
  for (const op of ops) if (op.status !== null) seen[op.limit] = (seen[op.limit] ?? 0) + 1;
  return seen;
}

/**
 * A window, in seconds, that an answer stated other than the identity's: its rate changed during the run (an
 * override began or ended), and one window cannot judge it. Undefined when every answer stated the same.
 */
function otherWindow(identity: Identity, { policy, stated }: Terms): number | undefined {
  if (!stated) return undefined;
  const windows = identity.ops.map((op) => readPolicy(op.headers['ratelimit-policy'])?.windowMs);
  const other = windows.find((ms) => ms !== undefined && ms !== policy.windowMs);
  return other === undefined ? undefined : other / 1000;
}

/** The schedules whose requests are among `opNumbers`, in schedule order, as a phrase. */
function exposedBy(scheduleOf: Map<number, ScheduleName>, opNumbers: number[]): string {
  const names = new Set(opNumbers.map((op) => scheduleOf.get(op)));
  const phrases = (Object.keys(SCHEDULES) as ScheduleName[]).filter((n) => names.has(n)).map((n) => SCHEDULES[n]);
  return phrases.length <= 1
    ? (phrases[0] ?? 'no schedule')
    : `${phrases.slice(0, -1).join(', ')} and ${phrases.at(-1)}`;
}

/** Requests, admissions and refusals under each schedule, or to each path: by `keyOf` an op's number. */
function tally(identity: Identity, keyOf: (op: number) => string) {
  const rows: Record<string, { requests: number; admitted: number; refused: number }> = {};
  for (const op of identity.ops) {
    const row = (rows[keyOf(op.op)] ??= { requests: 0, admitted: 0, refused: 0 });
    row.requests++;
    if (op.status !== null && op.status < 400) row.admitted++;
    if (op.status === 429) row.refused++;
  }
  return rows;
}

/** `Retry-After` is a whole number of seconds ≥ 1 and, where a detail states one, the same number. */
function wellFormedRetryAfter(op: Operation): boolean {
  const header = op.headers['retry-after'];
  if (header === undefined || !/^\d+$/.test(header) || Number(header) < 1) return false;
  const stated = detailSeconds(op.body);
  return stated === undefined || stated === Number(header);
}
