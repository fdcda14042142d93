import { setTimeout as sleep } from 'node:timers/promises';
import { ANONYMOUS, type CheckResult, type RunContext } from '../context.js';
import type { Operation } from '../history.js';
import {
  analyseLimits,
  detailSeconds,
  dishonestRetryAfter,
  readPolicy,
  trailingCounts,
  type LimitFindings,
} from './limits-analysis.js';
import { MAX_WINDOW_MS, measureLimit, type Measured } from './limits-measure.js';
import { runSchedules, SCHEDULES, sendAs, type Identity, type ScheduleName } from './limits-schedule.js';

interface Policy {
  limit: number;
  windowMs: number;
}

/**
 * Limits are exact (docs/verify.md "Limits are exact"): each identity (the limits user, or each `--source`
 * address anonymously) runs the adversarial schedules of limits-schedule.ts; the history must never show more
 * than the limit inside one window, refusals must come only when the window is full, every 429 must say its
 * wait in `Retry-After` (and the same number in a `detail` that states one), and a request sent at the
 * second it states must be admitted. Each finding names the schedules whose requests exposed it. The limit and
 * window are `--limit`'s, else the service's `RateLimit-Policy`, else a user's are measured (policyOf).
 */
export async function checkLimits(ctx: RunContext, user?: { name: string; token: string }): Promise<CheckResult> {
  const began = Date.now();
  const { options } = ctx;
  const identities = identitiesOf(ctx, user);
  const recognised = user && ctx.recognised.get(user.token)?.by;
  const found = await policyOf(ctx, identities, user);
  const result = (verdict: CheckResult['verdict'], summary: string, evidence: Record<string, unknown>) => ({
    name: 'limits' as const,
    verdict,
    summary,
    evidence: { identity: recognised, ...evidence },
    requests: ctx.history.countFor('limits'),
    seconds: (Date.now() - began) / 1000,
  });
  if ('why' in found) return result('skipped', found.why, {});
  const { policy, loneAt, measured } = found;
  if (policy.windowMs > MAX_WINDOW_MS) {
    return result('skipped', `a window of ${policy.windowMs / 1000} s is longer than the check waits`, { policy });
  }
  const rate = options.rate / identities.length;
  const budget = { ...policy, rate, tailMs: Math.max(5_000, policy.windowMs * 0.15) };
  // The identity check spent the user's (or this host's) first requests: a window opened by a first hit opened then
  // (unless measuring waited until every earlier admission had left its window).
  const firstUse = ctx.firstUse.get(user?.token ?? (options.sources.length === 0 ? ANONYMOUS : '-')) ?? loneAt;
  const anchor = measured ? loneAt : Math.min(loneAt, firstUse);
  await Promise.all(identities.map((identity) => runSchedules(identity, options.path, anchor, budget)));
  const slackMs = (2 * options.connections * 1000) / rate + 250;
  const verdicts = identities.map((identity) => judge(identity, policy, slackMs));
  const evidence = {
    policy,
    measured: measured && { limit: measured.limit, windowS: measured.windowMs / 1000, requests: measured.requests },
    path: options.path,
    schedules: SCHEDULES,
    identities: verdicts,
  };
  const plot = {
    title: 'Admissions in the trailing window',
    kind: 'line' as const,
    xLabel: 'seconds into the run',
    yLabel: 'admissions',
    series: verdicts.map((v) => ({ name: v.name, points: v.trailing })),
    level: { name: `limit ${policy.limit}`, y: policy.limit },
  };
  const violated = verdicts.filter((v) => v.problems.length > 0);
  if (violated.length > 0) {
    const first = violated[0]!;
    return { ...result('violated', `${first.name}: ${first.problems.join('; ')}`, evidence), plot };
  }
  if (verdicts.every((v) => v.refused === 0)) {
    const errors = verdicts.reduce((sum, v) => sum + v.otherErrors, 0);
    const requests = verdicts.reduce((sum, v) => sum + v.requests, 0);
    const why =
      errors > requests / 2
        ? `${errors} of ${requests} requests to /${options.path} answered an error: check --path`
        : 'the limit was never reached: send faster (--rate)';
    return { ...result('skipped', why, evidence), plot };
  }
  const most = Math.max(...verdicts.map((v) => v.findings.maxInWindow));
  const limit = `limit ${policy.limit}${measured ? ', measured' : ''}`;
  const summary = `at most ${most} admissions in any ${policy.windowMs / 1000}-second window (${limit}) under every schedule; refusals only when full; Retry-After honest`;
  return { ...result('holds', summary, evidence), plot };
}

/**
 * The limit and window to judge, and when the lone request was sent: `--limit`, else the lone request's
 * `RateLimit-Policy`, else, for a user, measured (limits-measure.ts); measuring waits until its admissions have
 * left their window and sends the lone request again, so that the schedules begin on an empty window.
 */
async function policyOf(
  ctx: RunContext,
  identities: Identity[],
  user: { name: string; token: string } | undefined,
): Promise<{ policy: Policy; loneAt: number; measured?: Measured } | { why: string }> {
  const { path, rate, limit } = ctx.options;
  const loneAt = Date.now();
  const lones = await Promise.all(identities.map((i) => sendAs(i, i.clients[0]!, path, 'lone')));
  const stated = limit ?? readPolicy(lones[0]!.headers['ratelimit-policy']);
  if (stated !== undefined) return { policy: stated, loneAt };
  if (user === undefined) return { why: 'no RateLimit-Policy header and no --limit given' };
  const identity = identities[0]!;
  const before = [...(ctx.recognised.get(user.token)?.sent ?? []), ...identity.ops];
  const measured = await measureLimit(identity.clients[0]!, path, before, rate, () => ctx.history.now());
  if ('why' in measured) return measured;
  const policy = { limit: measured.limit, windowMs: measured.windowMs };
  if (policy.windowMs > MAX_WINDOW_MS) return { policy, loneAt, measured };
  await sleep((measured.clearAt - ctx.history.now()) / 1e6 + 100);
  // Nothing sent so far shares a window with what follows: the schedules are judged from a new lone request.
  identity.ops.length = 0;
  identity.scheduleOf.clear();
  const again = Date.now();
  await sendAs(identity, identity.clients[0]!, path, 'lone');
  return { policy, loneAt: again, measured };
}

/**
 * The identities pushed past their limit, each with `--connections` clients of one keep-alive connection
 * each (spread over the `--source` addresses): separate connections, so that a balancer or a cluster's
 * round robin spreads them over every host and process.
 */
function identitiesOf(ctx: RunContext, user: { name: string; token: string } | undefined): Identity[] {
  const { options } = ctx;
  const sources = options.sources.length > 0 ? options.sources : [undefined];
  const perSource = Math.max(1, Math.ceil(options.connections / sources.length));
  const token = user?.token;
  const clientsFor = (source: string | undefined, i: number) =>
    Array.from({ length: perSource }, (_, c) => ctx.client(`limits-${i}-${c}`, { localAddress: source, token }));
  const identity = (name: string, clients: Identity['clients']) => ({ name, clients, ops: [], scheduleOf: new Map() });
  if (user !== undefined) return [identity(`user ${user.name}`, sources.flatMap(clientsFor))];
  return sources.map((source, i) => identity(`anonymous from ${source ?? 'this host'}`, clientsFor(source, i)));
}

function judge(identity: Identity, policy: Policy, slackMs: number) {
  const ops = identity.ops;
  const admitted = ops.filter((op) => op.status !== null && op.status < 400);
  const refused = ops.filter((op) => op.status === 429);
  const findings: LimitFindings = analyseLimits({
    admitted,
    refused,
    unknown: ops.filter((op) => op.status === null),
    limit: policy.limit,
    windowNs: policy.windowMs * 1e6,
    start: Math.min(...ops.map((op) => op.invoke)),
  });
  const missing = refused.filter((op) => op.headers['retry-after'] === undefined);
  const malformed = refused.filter((op) => op.headers['retry-after'] !== undefined && !wellFormedRetryAfter(op));
  const stated = refused
    .filter(wellFormedRetryAfter)
    .map((op) => ({ ...op, retryAfterS: Number(op.headers['retry-after']) }));
  const late = dishonestRetryAfter(stated, admitted, slackMs * 1e6, Math.max(...ops.map((op) => op.invoke)));
  const by = (opNumbers: number[]) => exposedBy(identity.scheduleOf, opNumbers);
  const problems: string[] = [];
  if (findings.overLimit)
    problems.push(
      `${findings.maxInWindow} admissions inside one window (limit ${policy.limit}), exposed by ${by(findings.overLimit)}`,
    );
  if (findings.unjustified.length > 0)
    problems.push(
      `${findings.unjustified.length} refusals while the window held fewer than ${policy.limit}, exposed by ${by(findings.unjustified.map((u) => u.op))}`,
    );
  if (missing.length > 0) problems.push(`${missing.length} 429s without Retry-After`);
  if (malformed.length > 0)
    problems.push(`${malformed.length} 429s whose Retry-After is not a whole number ≥ 1 matching their detail`);
  if (late.length > 0)
    problems.push(
      `${late.length} retries at the second Retry-After stated were still refused, exposed by ${by(late.map((l) => l.op))}`,
    );
  return {
    name: identity.name,
    requests: ops.length,
    admitted: admitted.length,
    refused: refused.length,
    noAnswer: ops.filter((op) => op.status === null).length,
    otherErrors: ops.filter((op) => op.status !== null && op.status >= 400 && op.status !== 429).length,
    perSchedule: tally(identity),
    findings: {
      ...findings,
      overLimit: findings.overLimit?.slice(0, 50) ?? null,
      unjustified: findings.unjustified.slice(0, 20),
    },
    retryAfterJudged: stated.length,
    retryAfterLate: late.slice(0, 20),
    retryAfterMissing: missing.length,
    malformedRetryAfter: malformed.slice(0, 10).map((op) => ({ op: op.op, headers: op.headers, body: op.body })),
    problems,
    trailing: trailingCounts(admitted, policy.windowMs * 1e6).map(([t, n]) => [t / 1e9, n] as [number, number]),
  };
}

/** The schedules whose requests are among `opNumbers`, in schedule order, as a phrase. */
function exposedBy(scheduleOf: Map<number, ScheduleName>, opNumbers: number[]): string {
  const names = new Set(opNumbers.map((op) => scheduleOf.get(op)));
  const phrases = (Object.keys(SCHEDULES) as ScheduleName[]).filter((n) => names.has(n)).map((n) => SCHEDULES[n]);
  return phrases.length <= 1
    ? (phrases[0] ?? 'no schedule')
    : `${phrases.slice(0, -1).join(', ')} and ${phrases.at(-1)}`;
}

/** Requests, admissions and refusals under each schedule. */
function tally(identity: Identity) {
  const rows: Record<string, { requests: number; admitted: number; refused: number }> = {};
  for (const op of identity.ops) {
    const row = (rows[identity.scheduleOf.get(op.op) ?? 'lone'] ??= { requests: 0, admitted: 0, refused: 0 });
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
