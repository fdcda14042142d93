import { randomBytes } from 'node:crypto';
import { lessBackground } from './costs.js';
import { burst, type BurstResult } from '../../../test/helpers/burst.js';
import type { GoodMode, Latencies } from './good-client.js';
import { statusList, type RowResult } from './report.js';
import { measure, perRequest, quiet, type Bench, type Window } from './window.js';

/** A count-bounded abuse with the good client beside it, after a quiet window in the same mode. */
async function abuse(
  bench: Bench,
  mode: GoodMode,
  run: () => Promise<BurstResult>,
): Promise<{ background: Window<Latencies>; window: Window<BurstResult>; good: Latencies }> {
  const background = await quiet(bench, mode);
  const window = await measure(bench, run);
  return { background, window, good: bench.good.latencies(mode, window.from, window.to) };
}

function rowOf(
  name: string,
  request: string,
  { background, window, good }: Awaited<ReturnType<typeof abuse>>,
  mode: GoodMode,
): RowResult {
  const costs = perRequest(window, background, 'guarded', window.value.requests);
  return {
    name,
    request,
    requests: window.value.requests,
    reqPerS: window.value.reqPerS,
    statuses: statusList(window.value.statuses),
    good: { mode, quiet: background.value, during: good },
    ...costs,
    fds: { before: window.fdsBefore, max: window.fdsMax },
    goal: '',
    facts: [],
  };
}

const within2x = (row: RowResult) => row.good!.during.p99Ms <= 2 * row.good!.quiet.p99Ms;

/** Row 2: 3,000 requests, each with a new random well-formed token, from one address. */
export async function runTokenRow(bench: Bench): Promise<RowResult> {
  const measured = await abuse(bench, 'get', () =>
    burst(bench.guarded.base, 3_000, 32, () => ({
      path: '/api/tasks/',
      headers: { Authorization: `Bearer ${randomBytes(32).toString('hex')}`, 'X-Forwarded-For': '10.2.0.1' },
    })),
  );
  const row = rowOf('2. random-token flood, one address', 'GET /api/tasks/ + random Bearer × 3,000', measured, 'get');
  const lookups = Math.max(0, lessBackground(measured.window.delta, measured.background.delta).tokenLookups);
  row.goal = `≤ 25 token lookups in PG (here ${lookups.toFixed(0)}); good p99 ≤ 2× quiet`;
  row.met = lookups <= 25 && within2x(row);
  row.facts.push(
    `PostgreSQL token lookups (calls of the statements selecting from tokens), less background: ${lookups.toFixed(0)}.`,
  );
  return row;
}

/** Row 3: 100 addresses × 5 new made-up usernames, the good client logging in meanwhile. */
export async function runLoginRow(bench: Bench, hashBound: string): Promise<RowResult> {
  const run = randomBytes(4).toString('hex');
  const measured = await abuse(bench, 'login', () =>
    burst(bench.guarded.base, 500, 50, (i) => ({
      method: 'POST',
      path: '/api/auth/token/',
      headers: { 'Content-Type': 'application/json', 'X-Forwarded-For': `10.3.${i % 100}.1` },
      body: JSON.stringify({ username: `made-up-${run}-${i}`, password: 'not-a-password' }),
    })),
  );
  bench.good.setMode('get');
  const row = rowOf('3. login flood, 100 addresses × 5 new names', 'POST /api/auth/token/ × 500', measured, 'login');
  row.goal = 'good client login p99 ≤ 2× quiet';
  row.met = within2x(row);
  const shares = (cpu: Record<number, number>, seconds: number) =>
    Object.values(cpu).map((s) => `${((s / seconds) * 100).toFixed(0)} %`);
  const seconds = (measured.window.to - measured.window.from) / 1000;
  const { delta: quiet } = measured.background;
  row.facts.push(
    `Each web worker's CPU during the flood: ${shares(measured.window.delta.workerCpu, seconds).join(', ')} (quiet, ` +
      `the good client's logins alone: ${shares(quiet.workerCpu, quiet.seconds).join(', ')}; 100 % = one core; scrypt runs on libuv's ` +
      `threads, so a worker can pass 100 %). Hash bound configured: ${hashBound}.`,
  );
  return row;
}

/** Row 5: /readyz 2,000 times from one address. */
export async function runReadyzRow(bench: Bench): Promise<RowResult> {
  const measured = await abuse(bench, 'get', () =>
    burst(bench.guarded.base, 2_000, 32, () => ({ path: '/readyz', headers: { 'X-Forwarded-For': '10.5.0.1' } })),
  );
  const row = rowOf('5. /readyz × 2,000', 'GET /readyz × 2,000', measured, 'get');
  const roundTrips = Math.max(0, lessBackground(measured.window.delta, measured.background.delta).pgCalls);
  row.goal = `≤ 5 PostgreSQL round trips (here ${roundTrips.toFixed(0)})`;
  row.met = roundTrips <= 5;
  row.facts.push(`PostgreSQL statements for the 2,000 probes, less background: ${roundTrips.toFixed(0)}.`);
  return row;
}
