/**
 * `npm run verify -- <base URL> --user NAME:PASSWORD ...`: checks a live deployment's guarantees from outside
 * (docs/verify.md). Loads no server code: it speaks HTTP to the service and judges what it recorded.
 * Exit status (docs/verify.md "Exit status"): 0 when every selected check holds, 1 when one is violated, 3
 * when one could not be judged (skipped) and none was violated, 2 for a bad command line, a service it could
 * not reach or log in to, or a token the service did not take as its user; 4 when verify itself failed.
 */
import { HELP, parseArgs, USAGE, type CheckName, type Credentials, type Options } from './args.js';
import { checkCursor } from './checks/cursor.js';
import { checkFeed } from './checks/feed.js';
import { checkIdempotency } from './checks/idempotency.js';
import { checkLimits } from './checks/limits.js';
import { checkReadYourWrites } from './checks/ryw.js';
import { Tasks } from './checks/tasks.js';
import { RunContext, type CheckResult } from './context.js';
import { checkScope } from './history.js';
import { prepareReportDir, reach } from './preflight.js';
import { Progress } from './progress.js';
import { writeReport, type Report } from './report.js';
import { Stop } from './stop.js';

async function main(): Promise<number> {
  let options: Options;
  try {
    options = parseArgs(process.argv.slice(2));
  } catch (error) {
    console.error(`verify: ${(error as Error).message}\n${USAGE}`);
    return 2;
  }
  if (options.help) {
    console.log(HELP);
    return 0;
  }
  try {
    return await run(options);
  } catch (error) {
    if (error instanceof Stop) {
      console.error(`verify: ${error.message}`);
      return error.exitCode;
    }
    console.error(`verify: failed itself, no verdict: ${(error as Error).message ?? String(error)}`);
    return 4;
  }
}

async function run(options: Options): Promise<number> {
  await prepareReportDir(options.reportDir);
  await reach(options.base);
  const ctx = new RunContext(options);
  const startedAt = new Date().toISOString();
  const began = Date.now();
  const progress = new Progress(options.checks.length, () => ctx.history.count);
  console.log(`verify ${ctx.runId}: ${options.checks.join(', ')} against ${options.base.href}`);
  let results: CheckResult[];
  try {
    results = await runChecks(ctx, progress);
  } finally {
    progress.stop();
    ctx.close();
    await ctx.history.close();
  }
  const verdict = results.some((r) => r.verdict === 'violated')
    ? 'violated'
    : results.some((r) => r.verdict === 'skipped')
      ? 'skipped'
      : 'holds';
  const report: Report = {
    tool: 'paceline verify',
    runId: ctx.runId,
    base: options.base.href,
    startedAt,
    seconds: (Date.now() - began) / 1000,
    requests: ctx.history.count,
    verdict,
    checks: order(results, options.checks),
  };
  for (const r of report.checks)
    console.log(
      `${r.verdict.padEnd(8)} ${r.name.padEnd(12)} ${r.summary} (${r.requests} requests, ${r.seconds.toFixed(1)} s)`,
    );
  console.log(`${verdict}: ${report.requests} requests in ${report.seconds.toFixed(1)} s`);
  if (options.reportDir !== undefined) {
    await writeReport(options.reportDir, report);
    console.log(`report: ${options.reportDir}/report.html`);
  }
  return verdict === 'holds' ? 0 : verdict === 'violated' ? 1 : 3;
}

/** The limits check runs beside the others, which take turns with the first user's tasks. */
async function runChecks(ctx: RunContext, progress: Progress): Promise<CheckResult[]> {
  const selected = new Set(ctx.options.checks);
  const others = ctx.options.checks.filter((name) => name !== 'limits');
  // Every login (and its identity check) comes first, so that a refusal stops the run before any check.
  const token = others.length > 0 ? await ctx.logIn(ctx.options.users[0]!, 'tasks') : '';
  const limitsUser = selected.has('limits') ? limitsUserOf(ctx.options) : undefined;
  const limitsToken = limitsUser === undefined ? undefined : await ctx.logIn(limitsUser, 'limits');
  const tasks = new Tasks(ctx, token, 'writer');
  const limits = selected.has('limits')
    ? checkScope
        .run('limits', () => checkLimits(ctx, limitsUser && { name: limitsUser.username, token: limitsToken! }))
        .finally(() => progress.step())
    : undefined;
  const results: CheckResult[] = [];
  try {
    for (const name of others) {
      results.push(await checkScope.run(name, () => runOne(name, ctx, tasks)));
      progress.step();
    }
  } finally {
    if (!ctx.options.keep && others.length > 0) await tasks.cleanUp();
  }
  if (limits) results.push(await limits);
  return results;
}

/**
 * The user the limits check pushes past its limit: the last of two or more (the first keeps its budget for the
 * task checks); none with one user or `--anonymous`, when each source address is judged as an anonymous client.
 */
function limitsUserOf(options: Options): Credentials | undefined {
  return options.anonymous || options.users.length < 2 ? undefined : options.users.at(-1);
}

function runOne(name: Exclude<CheckName, 'limits'>, ctx: RunContext, tasks: Tasks): Promise<CheckResult> {
  if (name === 'cursor') return checkCursor(ctx, tasks, ctx.options.walkSeconds * 1000);
  if (name === 'ryw') return checkReadYourWrites(ctx, tasks);
  if (name === 'idempotency') return checkIdempotency(ctx, tasks);
  return checkFeed(ctx, tasks);
}

function order(results: CheckResult[], names: CheckName[]): CheckResult[] {
  return names.map((name) => results.find((r) => r.name === name)!);
}

process.exitCode = await main();
