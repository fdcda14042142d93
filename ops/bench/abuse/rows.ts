import { randomBytes } from 'node:crypto';
import { burst } from '../../../test/helpers/burst.js';
import { holdIdleConnections } from '../../../test/helpers/idle-connections.js';
import { fileLimit, openFds } from '../harness/service.js';
import type { RowResult } from './report.js';
import { abuse, lessBackground, rowOf, type Bench } from './window.js';

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

const IDLE_CONNECTIONS = 4_000;
/** Beyond the timeout: time for the server's periodic check and the close to arrive. */
const MARGIN_MS = 2_000;

/**
 * Row 4: 4,000 connections to the metrics port that never send a byte, held until the server
 * closes them or its header timeout (`headersTimeoutMs`) and a margin have passed; the good
 * client reads page 1 meanwhile, each request on a new connection through the same primary.
 */
export async function runMetricsRow(bench: Bench, headersTimeoutMs: number, timeoutSource: string): Promise<RowResult> {
  let fdsOpen = NaN;
  const waitMs = headersTimeoutMs + MARGIN_MS;
  const { background, window, good } = await abuse(bench, 'get', () =>
    holdIdleConnections(bench.guarded.metricsPort, IDLE_CONNECTIONS, waitMs, () => {
      fdsOpen = openFds(bench.guarded.primary);
    }),
  );
  const idle = window.value;
  const answered = Object.keys(good.failures).length === 0;
  return {
    name: '4. idle connections to the metrics port',
    request: `${IDLE_CONNECTIONS.toLocaleString('en-US')} TCP connections, no bytes`,
    requests: idle.opened,
    reqPerS: idle.opened / idle.openSeconds,
    statuses: `${idle.opened.toLocaleString('en-US')} opened, ${idle.failed} failed to open, ${idle.closed.toLocaleString('en-US')} closed by the server`,
    good: { mode: 'get', quiet: background.value, during: good },
    fds: { before: window.fdsBefore, max: window.fdsMax },
    goal: `all closed within the header timeout (${(headersTimeoutMs / 1000).toFixed(0)} s + ${MARGIN_MS / 1000} s); the API answers`,
    met: idle.closed === idle.opened && answered,
    facts: [
      `Metrics header timeout ${(headersTimeoutMs / 1000).toFixed(1)} s (${timeoutSource}). ${idle.closed.toLocaleString('en-US')} of ` +
        `${idle.opened.toLocaleString('en-US')} connections closed by the server within ${(waitMs / 1000).toFixed(0)} s` +
        (idle.closed > 0
          ? ` (median ${idle.closeMedianS.toFixed(1)} s, last ${idle.closeLastS.toFixed(1)} s after opening)`
          : '') +
        `; the rest were closed by the benchmark. The primary held ${fdsOpen} file descriptors with them open ` +
        `(${window.fdsBefore} before; its limit ${fileLimit(bench.guarded.primary)}). The good client's page-1 reads meanwhile: ` +
        `${good.n} answered${answered ? ' all 200' : `, failures ${JSON.stringify(good.failures)}`}.`,
    ],
  };
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
