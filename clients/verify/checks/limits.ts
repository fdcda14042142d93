import { setTimeout as sleep } from 'node:timers/promises';
import type { Client } from '../client.js';
import { loops, type CheckResult, type RunContext } from '../context.js';
import type { Operation } from '../history.js';
import {
  analyseLimits,
  detailSeconds,
  dishonestRetryAfter,
  readPolicy,
  trailingCounts,
  type LimitFindings,
} from './limits-analysis.js';

/** The longest window the check will wait out (a scope of an hour needs `--limit` with a shorter one). */
const MAX_WINDOW_MS = 5 * 60_000;
const PATH = 'api/tasks/?page_size=1';

interface Identity {
  name: string;
  clients: Client[];
  ops: Operation[];
}

/**
 * Limits are exact (docs/verify.md "Limits are exact"): concurrent keep-alive clients of one identity (the
 * last `--user`, or each `--source` address anonymously) push past the limit for a window and a bit; the
 * history must never show more than the limit inside one window, refusals must come only when the window is
 * full, every 429 must say its wait in `Retry-After` (and the same number in `detail`), and a request sent at the
 * second it states must be admitted (judged from the history, while demand goes on).
 */
export async function checkLimits(ctx: RunContext): Promise<CheckResult> {
  const began = Date.now();
  const identities = await identitiesOf(ctx);
  const probe = await identities[0]!.clients[0]!.send({ path: PATH, f: 'limited read' });
  identities[0]!.ops.push(probe);
  const policy = ctx.options.limit ?? readPolicy(probe.headers['ratelimit-policy']);
  const result = (verdict: CheckResult['verdict'], summary: string, evidence: Record<string, unknown>) => ({
    name: 'limits' as const,
    verdict,
    summary,
    evidence,
    requests: ctx.history.countFor('limits'),
    seconds: (Date.now() - began) / 1000,
  });
  if (policy === undefined) return result('skipped', 'no RateLimit-Policy header and no --limit given', {});
  if (policy.windowMs > MAX_WINDOW_MS) {
    return result('skipped', `a window of ${policy.windowMs / 1000} s is longer than the check waits`, { policy });
  }
  const loadMs = policy.windowMs + Math.max(5_000, policy.windowMs * 0.15);
  await pushPastLimit(ctx, identities, Date.now() + loadMs);
  const verdicts = identities.map((identity) => judge(identity, policy, 1000 / ctx.options.rate));
  const violated = verdicts.filter((v) => v.problems.length > 0);
  const refusals = verdicts.reduce((sum, v) => sum + v.refused, 0);
  const evidence = { policy, loadMs, identities: verdicts };
  const plot = {
    title: 'Admissions in the trailing window',
    kind: 'line' as const,
    xLabel: 'seconds into the run',
    yLabel: 'admissions',
    series: verdicts.map((v) => ({ name: v.name, points: v.trailing })),
    level: { name: `limit ${policy.limit}`, y: policy.limit },
  };
  if (violated.length > 0) {
    const first = violated[0]!;
    return { ...result('violated', `${first.name}: ${first.problems.join('; ')}`, evidence), plot };
  }
  if (refusals === 0)
    return { ...result('skipped', 'the limit was never reached: send faster (--rate)', evidence), plot };
  const most = Math.max(...verdicts.map((v) => v.findings.maxInWindow));
  const summary = `at most ${most} admissions in any ${policy.windowMs / 1000}-second window (limit ${policy.limit}); refusals only when full; Retry-After honest`;
  return { ...result('holds', summary, evidence), plot };
}

/**
 * The identities pushed past their limit, each with `--connections` clients of one keep-alive connection
 * each (spread over the `--source` addresses): separate connections, so that a balancer or a cluster's
 * round robin spreads them over every host and process.
 */
async function identitiesOf(ctx: RunContext): Promise<Identity[]> {
  const { options } = ctx;
  const user = options.users.length >= 2 ? options.users.at(-1) : undefined;
  const token = user === undefined ? undefined : await ctx.logIn(user, 'limits');
  const sources = options.sources.length > 0 ? options.sources : [undefined];
  const perSource = Math.max(1, Math.ceil(options.connections / sources.length));
  const clientsFor = (source: string | undefined, i: number) =>
    Array.from({ length: perSource }, (_, c) => ctx.client(`limits-${i}-${c}`, { localAddress: source, token }));
  if (token !== undefined) {
    return [{ name: `user ${user!.username}`, clients: sources.flatMap(clientsFor), ops: [] }];
  }
  return sources.map((source, i) => ({
    name: `anonymous from ${source ?? 'this host'}`,
    clients: clientsFor(source, i),
    ops: [],
  }));
}

/** Sends at most `rate` requests a second, spread over every identity's connections, until `deadline`. */
async function pushPastLimit(ctx: RunContext, identities: Identity[], deadline: number): Promise<void> {
  const lanes = identities.flatMap((identity) => identity.clients.map((client) => ({ identity, client })));
  const gapMs = 1000 / ctx.options.rate;
  let slot = Date.now();
  await loops(lanes.length, deadline, async (loop) => {
    const lane = lanes[loop % lanes.length]!;
    slot = Math.max(slot + gapMs, Date.now());
    const wait = slot - Date.now();
    if (wait > 0) await sleep(wait);
    if (Date.now() >= deadline) return false;
    lane.identity.ops.push(await lane.client.send({ path: PATH, f: 'limited read' }));
    return true;
  });
}

function judge(identity: Identity, policy: { limit: number; windowMs: number }, gapMs: number) {
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
  const malformed = refused.filter((op) => !wellFormedRetryAfter(op));
  const stated = refused
    .filter(wellFormedRetryAfter)
    .map((op) => ({ ...op, retryAfterS: Number(op.headers['retry-after']) }));
  const slackNs = (2 * gapMs + 250) * 1e6;
  const late = dishonestRetryAfter(stated, admitted, slackNs, Math.max(...ops.map((op) => op.invoke)));
  const problems: string[] = [];
  if (findings.overLimit) problems.push(`${findings.maxInWindow} admissions inside one window (limit ${policy.limit})`);
  if (findings.unjustified.length > 0)
    problems.push(`${findings.unjustified.length} refusals while the window held fewer than ${policy.limit}`);
  if (malformed.length > 0) problems.push(`${malformed.length} 429s without a Retry-After matching their detail`);
  if (late.length > 0) problems.push(`${late.length} retries at the second Retry-After stated were still refused`);
  const other = ops.filter((op) => op.status !== null && op.status >= 400 && op.status !== 429).length;
  return {
    name: identity.name,
    requests: ops.length,
    admitted: admitted.length,
    refused: refused.length,
    noAnswer: ops.filter((op) => op.status === null).length,
    otherErrors: other,
    findings: {
      ...findings,
      overLimit: findings.overLimit?.slice(0, 50) ?? null,
      unjustified: findings.unjustified.slice(0, 20),
    },
    retryAfterJudged: stated.length,
    retryAfterLate: late.slice(0, 20),
    malformedRetryAfter: malformed.slice(0, 10).map((op) => ({ op: op.op, headers: op.headers, body: op.body })),
    problems,
    trailing: trailingCounts(admitted, policy.windowMs * 1e6).map(([t, n]) => [t / 1e9, n] as [number, number]),
  };
}

/** `Retry-After` is a whole number of seconds ≥ 1 and, where the detail states one, the same number. */
function wellFormedRetryAfter(op: Operation): boolean {
  const header = op.headers['retry-after'];
  if (header === undefined || !/^\d+$/.test(header) || Number(header) < 1) return false;
  const stated = detailSeconds(op.body);
  return stated === undefined || stated === Number(header);
}
