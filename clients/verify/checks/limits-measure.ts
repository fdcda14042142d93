import { setTimeout as sleep } from 'node:timers/promises';
import type { Client } from '../client.js';
import type { Operation } from '../history.js';
import { windowFromRetryAfter } from './limits-analysis.js';

/** The most requests spent filling a window to find its limit. */
const MAX_FILL = 1_000;
/** After the first refusal, its Retry-After is read again this often, for this long: long enough to see it tick. */
const REREAD_EVERY_MS = 100;
const REREAD_FOR_MS = 1_100;
const IN_USE =
  'the user’s budget was in use before the check began (a 429 before any admission): run again a window later, or pass --limit';

export interface Measured {
  limit: number;
  windowMs: number;
  /** Requests sent to measure them. */
  requests: number;
  /** When (history time, ns) every admission so far has left its window. */
  clearAt: number;
}

/**
 * Measures the limit and window of a user's scope that the service does not state (docs/verify.md "The limit,
 * when the service states none"): requests one at a time, at most `rate` a second, until the first 429, so that
 * no race can admit more than the limit. The limit is their admissions and those of `before` (the requests sent
 * with the token before, in order, answered below 400); the window comes from the 429s' Retry-After, read again
 * for a second (windowFromRetryAfter). Returns why, when it cannot tell.
 */
export async function measureLimit(
  client: Client,
  path: string,
  before: Operation[],
  rate: number,
): Promise<Measured | { why: string }> {
  if (before.some((op) => op.status === 429)) return { why: IN_USE };
  const admitted = before.filter(isAdmitted);
  const sent: Operation[] = [];
  let refusal: Operation | undefined;
  while (refusal === undefined && sent.length < MAX_FILL) {
    const op = await paced(client, path, rate);
    sent.push(op);
    if (op.status === 429) refusal = op;
    else if (isAdmitted(op)) admitted.push(op);
    else return { why: `measuring its limit, GET /${path} answered ${op.status ?? op.error}: check --path` };
  }
  if (refusal === undefined)
    return { why: `no RateLimit-Policy, no --limit, and ${MAX_FILL} requests sent one at a time were all admitted` };
  if (sent.length === 1) return { why: IN_USE };
  const { refusals, freed } = await reread(client, path, refusal, sent);
  const stated = refusals.map((op) => ({ ...op, retryAfterS: Number(op.headers['retry-after']) }));
  if (stated.some((op) => !/^\d+$/.test(op.headers['retry-after'] ?? '') || op.retryAfterS < 1))
    return { why: 'no RateLimit-Policy, no --limit, and a 429 with no Retry-After to measure the window by' };
  const windowMs = windowFromRetryAfter(admitted[0]!, stated, freed);
  if (windowMs === undefined)
    return {
      why:
        'no RateLimit-Policy, no --limit, and its 429s’ Retry-After did not tell the window to a second ' +
        '(the user’s budget used before the check, or a window that is not whole seconds): wait a window, or pass --limit',
    };
  const last = freed ?? admitted.at(-1)!;
  return { limit: admitted.length, windowMs, requests: sent.length, clearAt: last.complete + windowMs * 1e6 };
}

/** Reads the refusal's Retry-After again until it has ticked, or until an admission shows a slot freed. */
async function reread(client: Client, path: string, first: Operation, sent: Operation[]) {
  const refusals = [first];
  for (const until = Date.now() + REREAD_FOR_MS; Date.now() < until;) {
    await sleep(REREAD_EVERY_MS);
    const op = await client.send({ path, f: 'measuring read' });
    sent.push(op);
    if (op.status !== 429) return { refusals, freed: isAdmitted(op) ? op : undefined };
    refusals.push(op);
  }
  return { refusals, freed: undefined };
}

async function paced(client: Client, path: string, rate: number): Promise<Operation> {
  const began = Date.now();
  const op = await client.send({ path, f: 'measuring read' });
  await sleep(Math.max(0, began + 1000 / rate - Date.now()));
  return op;
}

function isAdmitted(op: Operation): boolean {
  return op.status !== null && op.status >= 200 && op.status < 400;
}
