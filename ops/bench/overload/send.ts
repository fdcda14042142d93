import { request, type Agent } from 'node:http';
import type { Outcome } from './outcomes.js';

/** One request of the load: what to send. */
export interface RequestSpec {
  method: 'GET' | 'POST';
  path: string;
  headers?: Record<string, string>;
  body?: string;
}

/**
 * Sends `spec` to `base` through `agent` (false: a new TCP connection, closed after the answer) and calls `done`
 * once with its outcome: the status and the ms from `plannedAt` (a performance.now() time) to the answer's last
 * byte, or `timeout` when no answer has ended by `plannedAt + timeoutMs` (the request is then abandoned, its
 * connection closed, as a client that gives up does), or `error`.
 */
export function sendRequest(
  agent: Agent | false,
  base: string,
  spec: RequestSpec,
  plannedAt: number,
  timeoutMs: number,
  done: (outcome: Outcome) => void,
): void {
  let settled = false;
  const finish = (outcome: Outcome) => {
    if (settled) return;
    settled = true;
    clearTimeout(timer);
    done(outcome);
  };
  const headers = agent === false ? { ...spec.headers, Connection: 'close' } : spec.headers;
  const req = request(`${base}${spec.path}`, { agent, method: spec.method, headers });
  const timer = setTimeout(
    () => {
      finish('timeout');
      req.destroy();
    },
    Math.max(0, plannedAt + timeoutMs - performance.now()),
  );
  req.on('response', (res) => {
    res.on('data', () => {});
    res.on('end', () => finish({ status: res.statusCode ?? 0, ms: performance.now() - plannedAt }));
    res.on('error', () => finish('error'));
  });
  req.on('error', () => finish('error'));
  req.end(spec.body);
}
