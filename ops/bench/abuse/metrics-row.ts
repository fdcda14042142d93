import { fileLimit } from '../harness/service.js';
import { openFds } from './costs.js';
import { holdIdleConnections } from '../../../test/helpers/idle-connections.js';
import type { RowResult } from './report.js';
import { measure, quiet, type Bench } from './window.js';

const IDLE_CONNECTIONS = 4_000;
/** Beyond the timeout: time for the server's periodic check and the close to arrive. */
const MARGIN_MS = 2_000;

/**
 * Row 4: 4,000 connections to the metrics port that never send a byte, held until the server
 * closes them or its header timeout (`headersTimeoutMs`) and a margin have passed; the good
 * client reads page 1 meanwhile, each request on a new connection through the same primary.
 */
export async function runMetricsRow(bench: Bench, headersTimeoutMs: number, timeoutSource: string): Promise<RowResult> {
  const background = await quiet(bench, 'get');
  let fdsOpen = NaN;
  const waitMs = headersTimeoutMs + MARGIN_MS;
  const window = await measure(bench, () =>
    holdIdleConnections(bench.guarded.metricsPort, IDLE_CONNECTIONS, waitMs, () => {
      fdsOpen = openFds(bench.guarded.primary);
    }),
  );
  const idle = window.value;
  const good = bench.good.latencies('get', window.from, window.to);
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
