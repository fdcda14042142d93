import { request as httpRequest } from 'node:http';
import { SHED_DETAIL } from '../../src/listener/listener.js';
import { request, type RequestOptions } from './http.js';

/**
 * A request as a test saw it: its status, or 0 and why it got no answer (`failure`); when it was sent and when
 * it settled (Date.now()); the body's `id` and the `Retry-After` field when it had them. Never a rejection: a
 * test that sends many at once asserts on them afterwards and says which failed, how, and after how long.
 */
export interface Outcome {
  status: number;
  sentAt: number;
  at: number;
  failure?: string;
  id?: number;
  retryAfter?: string;
}

/** `request` (keep-alive, as most clients send), settled as an Outcome; gives up after `deadlineMs`. */
export async function send(
  base: string,
  method: string,
  path: string,
  options: RequestOptions & { deadlineMs: number },
): Promise<Outcome> {
  const sentAt = Date.now();
  try {
    const response = await request(base, method, path, options);
    const retryAfter = response.headers.get('retry-after') ?? undefined;
    return { status: response.status, sentAt, at: Date.now(), id: response.body?.id, retryAfter };
  } catch (error) {
    return { status: 0, sentAt, at: Date.now(), failure: failureOf(error) };
  }
}

/** GET `path` on a connection of its own (so every worker of a host gets some), settled as an Outcome. */
export function sendFresh(
  base: string,
  path: string,
  headers: Record<string, string>,
  deadlineMs: number,
): Promise<Outcome> {
  const sentAt = Date.now();
  return new Promise((resolve) => {
    const failed = (error: unknown) => resolve({ status: 0, sentAt, at: Date.now(), failure: failureOf(error) });
    const signal = AbortSignal.timeout(deadlineMs);
    const req = httpRequest(new URL(path, base), { agent: false, headers, signal }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0, sentAt, at: Date.now() }));
      res.on('error', failed);
    });
    req.on('error', failed);
    req.end();
  });
}

/**
 * Why a request got no HTTP answer: `client timeout` (this side gave up at its deadline), `connection reset`,
 * or `no answer: the connection ended` (closed with no answer, or one cut short); anything else by its code.
 */
export function failureOf(error: unknown): string {
  const e = error as { name?: string; code?: string; message?: string; cause?: { code?: string; message?: string } };
  if (e.name === 'TimeoutError' || e.name === 'AbortError') return 'client timeout';
  const code = e.cause?.code ?? e.code;
  if (code === 'UND_ERR_SOCKET' || e.message === 'socket hang up') return 'no answer: the connection ended';
  if (code === 'ECONNRESET') return 'connection reset';
  return `no answer: ${code ?? e.cause?.message ?? e.message ?? String(error)}`;
}

/** One line per outcome whose status is not in `expected`: what it got, after how long, sent when (ms from `since`). */
export function describeOthers(outcomes: Outcome[], expected: number[], since: number): string {
  return outcomes
    .filter(({ status }) => !expected.includes(status))
    .map((o) => `${o.failure ?? `status ${o.status}`} after ${o.at - o.sentAt} ms (sent at ${o.sentAt - since} ms)`)
    .join('; ');
}

/**
 * The body of the listener's shed 503, as sent: answered before the throttle, so nothing was counted, and a client
 * may send the request again. A test that counts decisions resends it and says how often.
 */
export const SHED_BODY = JSON.stringify(SHED_DETAIL);

/**
 * An answer in an assertion's words: 200 admitted, 429 refused, 503 shed or unavailable (not a throttle decision),
 * another status by its number, no answer by why (`failure`, else "no answer"). A count of admissions and
 * refusals then never takes a shed or a timeout for one of them, and a failed assertion names it.
 */
export function outcomeName({ status, failure }: { status: number; failure?: string }): string {
  if (status === 0) return failure ?? 'no answer: connection error or timeout';
  if (status === 200) return '200 admitted';
  if (status === 429) return '429 refused';
  if (status === 503) return '503 shed or unavailable, not a decision';
  return `status ${status}`;
}

/** How many answers of each kind (`outcomeName`), for `assert.equal` against the kinds expected. */
export function tallyOutcomes(answers: ReadonlyArray<{ status: number; failure?: string }>): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const answer of answers) counts[outcomeName(answer)] = (counts[outcomeName(answer)] ?? 0) + 1;
  return counts;
}
