import { setTimeout as sleep } from 'node:timers/promises';
import type { Client } from '../client.js';
import type { Operation } from '../history.js';
import { windowFromRetryAfter } from './limits-analysis.js';

/** The most requests spent filling a window to find its limit. */
const MAX_FILL = 1_000;
/** The longest window the limits check waits out (a scope of an hour needs `--limit` with a shorter one). */
export const MAX_WINDOW_MS = 5 * 60_000;
/** After the first refusal, its Retry-After is read again this often, for this long: long enough to see it tick. */
const REREAD_EVERY_MS = 100;
const REREAD_FOR_MS = 1_100;
const IN_USE =
  'the user’s budget was in use before the check began (a 429 before any admission): run again a window later, or pass --limit';
const TOO_SLOW = 'its window turned while it was filled, twice (answers slower than its window): pass --limit';

export interface Measured {
  limit: number;
  windowMs: number;
  /** Requests sent to measure them. */
  requests: number;
  /** When (history time, ns) every admission so far has left its window. */
  clearAt: number;
}
type Fill = { limit: number; windowMs: number; clearAt: number } | { why: string } | { turnedClearAt: number };

/**
 * Measures the limit and window of a user's scope that the service does not state (docs/verify.md "The limit,
 * when the service states none"): requests one at a time, at most `rate` a second, until the first 429, so that
 * no race can admit more than the limit. The limit is their admissions and those of `before` (the requests sent
 * with the token before, in order, answered below 400); the window comes from the 429s' Retry-After, read again
 * for a second (windowFromRetryAfter). A fill that took as long as the first 429's Retry-After may have seen a
 * slot free: then it waits until everything has left the window (`now` is the history's clock) and fills it
 * once more, from nothing. Returns why, when it cannot tell.
 */
export async function measureLimit(
  client: Client,
  path: string,
  before: Operation[],
  rate: number,
  now: () => number,
): Promise<Measured | { why: string }> {
  if (before.some((op) => op.status === 429)) return { why: IN_USE };
  const sent: Operation[] = [];
  let fill = await fillOnce(client, path, before.filter(isAdmitted), rate, sent);
  if ('turnedClearAt' in fill) {
    if (fill.turnedClearAt - now() > MAX_WINDOW_MS * 1e6) return { why: TOO_SLOW };
    await sleep((fill.turnedClearAt - now()) / 1e6 + 100);
    fill = await fillOnce(client, path, [], rate, sent);
    if ('turnedClearAt' in fill) return { why: TOO_SLOW };
  }
  return 'why' in fill ? fill : { ...fill, requests: sent.length };
}

/**
 * One fill, after the admissions `admitted`: the limit and window, why they cannot be told, or, when the fill
 * took at least the first 429's Retry-After, when all of it will have left the window. That bound is what makes
 * the count exact: had the oldest admission left before the 429, the fill would have taken a whole window, and
 * the 429 would state no more than that (docs/verify.md "The limit, when the service states none").
 */
async function fillOnce(
  client: Client,
  path: string,
  admitted: Operation[],
  rate: number,
  sent: Operation[],
): Promise<Fill> {
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
  if (admitted.length === 0) return { why: IN_USE };
  const firstS = retryAfterOf(refusal);
  if (firstS === undefined) return { why: NO_RETRY_AFTER };
  const filledNs = refusal.complete - admitted[0]!.invoke;
  if (filledNs >= firstS * 1e9) return { turnedClearAt: admitted.at(-1)!.complete + filledNs + firstS * 1e9 };
  const { refusals, freed } = await reread(client, path, refusal, sent);
  const stated = refusals.map((op) => ({ ...op, retryAfterS: retryAfterOf(op) ?? NaN }));
  if (stated.some((op) => Number.isNaN(op.retryAfterS))) return { why: NO_RETRY_AFTER };
  const windowMs = windowFromRetryAfter(admitted[0]!, stated, freed);
  if (windowMs === undefined) return { why: UNTOLD };
  const last = freed ?? admitted.at(-1)!;
  return { limit: admitted.length, windowMs, clearAt: last.complete + windowMs * 1e6 };
}

const NO_RETRY_AFTER = 'no RateLimit-Policy, no --limit, and a 429 with no Retry-After to measure the window by';
const UNTOLD =
  'no RateLimit-Policy, no --limit, and its 429s’ Retry-After did not tell the window to a second ' +
  '(the user’s budget used before the check, or a window that is not whole seconds): wait a window, or pass --limit';

/** A 429's `Retry-After`, when it is a whole number of seconds ≥ 1. */
function retryAfterOf(op: Operation): number | undefined {
  const header = op.headers['retry-after'] ?? '';
  return /^\d+$/.test(header) && Number(header) >= 1 ? Number(header) : undefined;
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
