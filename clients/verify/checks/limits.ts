import { setTimeout as sleep } from 'node:timers/promises';
import { ANONYMOUS, type CheckResult, type RunContext } from '../context.js';
import { readPolicy } from './limits-analysis.js';
import { costsInWords, learnCosts, type Costs } from './limits-costs.js';
import { judge, type Policy } from './limits-judge.js';
import { MAX_WINDOW_MS, measureLimit, type Measured } from './limits-measure.js';
import { runSchedules, SCHEDULES, sendAs, type Identity } from './limits-schedule.js';

/**
 * Limits are exact (docs/verify.md "Limits are exact"): each identity (the limits user, or each `--source`
 * address anonymously) runs the adversarial schedules of limits-schedule.ts; the history must never show more
 * than the limit inside one window, refusals must come only when the window is full, every 429 must say its
 * wait in `Retry-After` (and the same number in a `detail` that states one), and a request sent at the
 * second it states must be admitted. Each finding names the schedules whose requests exposed it. The limit and
 * window are `--limit`'s, else the identity's own `RateLimit-Policy` (an override's or a plan's, each answer's
 * for itself), else a user's are measured (policyOf). Counts are in units where the answers state what a request
 * costs (limits-costs.ts), `--weighted-path` taking turns with `--path`.
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
  const { policies, loneAt, measured } = found;
  const policy = policies[0]!;
  const longest = Math.max(...policies.map((p) => p.windowMs));
  if (longest > MAX_WINDOW_MS)
    return result('skipped', `a window of ${longest / 1000} s is longer than the check waits`, { policy });
  const costs = await costsOf(identities, measured !== undefined);
  if ('why' in costs) return result('skipped', costs.why, { policy });
  const rate = options.rate / identities.length;
  // The identity check spent the user's (or this host's) first requests: a window opened by a first hit opened then
  // (unless measuring waited until every earlier admission had left its window).
  const firstUse = ctx.firstUse.get(user?.token ?? (options.sources.length === 0 ? ANONYMOUS : '-')) ?? loneAt;
  const anchor = measured ? loneAt : Math.min(loneAt, firstUse);
  await Promise.all(
    identities.map((identity, i) =>
      runSchedules(identity, anchor, { ...policies[i]!, rate, tailMs: Math.max(5_000, policies[i]!.windowMs * 0.15) }),
    ),
  );
  const slackMs = (2 * options.connections * 1000) / rate + 250;
  const stated = options.limit === undefined && measured === undefined;
  const verdicts = identities.map((identity, i) =>
    judge(identity, { policy: policies[i]!, stated, costs: costs[i]!, slackMs }),
  );
  const evidence = {
    policy,
    measured: measured && { limit: measured.limit, windowS: measured.windowMs / 1000, requests: measured.requests },
    path: options.path,
    weightedPath: options.weightedPath,
    schedules: SCHEDULES,
    identities: verdicts,
  };
  return conclude(verdicts, { costs: costs[0]!, measured: measured !== undefined, path: options.path }, (v, s) =>
    result(v, s, evidence),
  );
}

/**
 * What a request to each identity's paths costs (limits-costs.ts), or why it could not be learnt. A measured limit
 * counts requests (limits-measure.ts), and so are they counted then.
 */
async function costsOf(identities: Identity[], measured: boolean): Promise<Costs[] | { why: string }> {
  if (measured) return identities.map((identity) => new Map<string, number>(identity.paths.map((path) => [path, 1])));
  const learnt = await Promise.all(identities.map(learnCosts));
  return learnt.find((costs): costs is { why: string } => 'why' in costs) ?? (learnt as Costs[]);
}

type Verdicts = ReturnType<typeof judge>[];

/** The check's verdict and summary from every identity's, with the plot of units admitted in the trailing window. */
function conclude(
  verdicts: Verdicts,
  run: { costs: Costs; measured: boolean; path: string },
  result: (verdict: CheckResult['verdict'], summary: string) => CheckResult,
): CheckResult {
  const limits = [...new Set(verdicts.flatMap((v) => Object.keys(v.limitsStated).map(Number)))].sort((a, b) => a - b);
  if (limits.length === 0) limits.push(verdicts[0]!.policy.limit);
  const weighed = costsInWords(run.costs);
  const plot = {
    title: weighed ? 'Units admitted in the trailing window' : 'Admissions in the trailing window',
    kind: 'line' as const,
    xLabel: 'seconds into the run',
    yLabel: weighed ? 'units' : 'admissions',
    series: verdicts.map((v) => ({ name: v.name, points: v.trailing })),
    level: { name: `limit ${limits.join(' and ')}`, y: Math.max(...limits) },
  };
  const changed = verdicts.find((v) => v.otherWindowS !== undefined);
  if (changed !== undefined) {
    const windows = `${changed.otherWindowS} s as well as ${changed.policy.windowMs / 1000} s`;
    const why = `${changed.name}: answers stated a window of ${windows}: its rate changed during the run (an override began or ended): run again`;
    return { ...result('skipped', why), plot };
  }
  const violated = verdicts.filter((v) => v.problems.length > 0);
  if (violated.length > 0) {
    const first = violated[0]!;
    return { ...result('violated', `${first.name}: ${first.problems.join('; ')}`), plot };
  }
  if (verdicts.every((v) => v.refused === 0)) {
    const errors = verdicts.reduce((sum, v) => sum + v.otherErrors, 0);
    const requests = verdicts.reduce((sum, v) => sum + v.requests, 0);
    const why =
      errors > requests / 2
        ? `${errors} of ${requests} requests to /${run.path} answered an error: check --path`
        : 'the limit was never reached: send faster (--rate)';
    return { ...result('skipped', why), plot };
  }
  const most = Math.max(...verdicts.map((v) => v.findings.maxInWindow));
  const windowS = verdicts[0]!.policy.windowMs / 1000;
  const limit = `limit${limits.length > 1 ? 's' : ''} ${limits.join(' and ')}${run.measured ? ', measured' : ''}`;
  const summary = weighed
    ? `at most ${most} units admitted in any ${windowS}-second window (${limit}; ${weighed}) under every schedule; refusals only when the units would not fit; Retry-After honest`
    : `at most ${most} admissions in any ${windowS}-second window (${limit}) under every schedule; refusals only when full; Retry-After honest`;
  return { ...result('holds', summary), plot };
}

/**
 * Each identity's limit and window, and when the lone requests were sent: `--limit`, else the identity's lone
 * request's `RateLimit-Policy` (the first identity's for one whose answer states none), else, for a user, measured
 * (limits-measure.ts); measuring waits until its admissions have left their window and sends the lone request
 * again, so that the schedules begin on an empty window.
 */
async function policyOf(
  ctx: RunContext,
  identities: Identity[],
  user: { name: string; token: string } | undefined,
): Promise<{ policies: Policy[]; loneAt: number; measured?: Measured } | { why: string }> {
  const { path, rate, limit } = ctx.options;
  const loneAt = Date.now();
  const lones = await Promise.all(identities.map((i) => sendAs(i, i.clients[0]!, 'lone', path)));
  const stated = lones.map((lone) => limit ?? readPolicy(lone.headers['ratelimit-policy']));
  const known = stated.find((policy) => policy !== undefined);
  if (known !== undefined) return { policies: stated.map((policy) => policy ?? known), loneAt };
  if (user === undefined) return { why: 'no RateLimit-Policy header and no --limit given' };
  const identity = identities[0]!;
  const before = [...(ctx.recognised.get(user.token)?.sent ?? []), ...identity.ops];
  const measured = await measureLimit(identity.clients[0]!, path, before, rate, () => ctx.history.now());
  if ('why' in measured) return measured;
  const policy = { limit: measured.limit, windowMs: measured.windowMs };
  if (policy.windowMs > MAX_WINDOW_MS) return { policies: [policy], loneAt, measured };
  await sleep((measured.clearAt - ctx.history.now()) / 1e6 + 100);
  // Nothing sent so far shares a window with what follows: the schedules are judged from a new lone request.
  identity.ops.length = 0;
  identity.scheduleOf.clear();
  identity.pathOf.clear();
  const again = Date.now();
  await sendAs(identity, identity.clients[0]!, 'lone', path);
  return { policies: [policy], loneAt: again, measured };
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
  const paths = options.weightedPath === undefined ? [options.path] : [options.path, options.weightedPath];
  const identity = (name: string, clients: Identity['clients']): Identity => ({
    name,
    clients,
    ops: [],
    scheduleOf: new Map(),
    paths,
    pathOf: new Map(),
    turn: 0,
  });
  if (user !== undefined) return [identity(`user ${user.name}`, sources.flatMap(clientsFor))];
  return sources.map((source, i) => identity(`anonymous from ${source ?? 'this host'}`, clientsFor(source, i)));
}
