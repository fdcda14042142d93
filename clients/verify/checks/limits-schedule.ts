import { setTimeout as sleep } from 'node:timers/promises';
import type { Client } from '../client.js';
import type { Operation } from '../history.js';

/**
 * The schedules of docs/verify.md "Adversarial schedules", in the order one identity runs them, each aimed
 * at a known class of limiter fault. The phrase is what a report says exposed a finding.
 */
export const SCHEDULES = {
  lone: 'the lone request',
  'before edge': 'the burst before the window’s edge',
  'slot frees': 'the burst as the window turned and its first slot freed',
  steady: 'steady pressure',
} as const;
export type ScheduleName = keyof typeof SCHEDULES;

/** One client of the service as its limiter sees it, with every request it sent, the schedule and path of each. */
export interface Identity {
  name: string;
  clients: Client[];
  ops: Operation[];
  scheduleOf: Map<number, ScheduleName>;
  /** What it requests: `--path`, and `--weighted-path` when given, taken in turn by the schedules. */
  paths: string[];
  pathOf: Map<number, string>;
  /** Requests sent in turn so far: which of `paths` the next one asks for. */
  turn: number;
}

export interface Budget {
  limit: number;
  windowMs: number;
  /** Requests a second this identity may send on average. */
  rate: number;
  /** How long steady pressure goes on after the bursts. */
  tailMs: number;
}

/**
 * How far before and after the first window's edge the bursts run: long enough to fill the limit at `rate`
 * (one and a half times over), at least a tenth of the window, at most a quarter (so that both bursts fit
 * well inside one window, where a sliding log admits at most the limit).
 */
export function edgeMarginMs(budget: Budget): number {
  const fill = (1.5 * budget.limit * 1000) / budget.rate;
  return Math.min(budget.windowMs / 4, Math.max(budget.windowMs / 10, fill, 250));
}

/**
 * Sends one request as `identity` on `client` to `path` (by default the next of its paths in turn, so that with
 * `--weighted-path` requests that weigh more and less share every schedule), recording its schedule and path.
 */
export async function sendAs(identity: Identity, client: Client, schedule: ScheduleName, path?: string) {
  const to = path ?? identity.paths[identity.turn++ % identity.paths.length]!;
  const op = await client.send({ path: to, f: 'limited read' });
  identity.ops.push(op);
  identity.scheduleOf.set(op.op, schedule);
  identity.pathOf.set(op.op, to);
  return op;
}

/**
 * Runs the schedules after the lone request: a window of silence after `firstHit` (a `Date.now()`: the lone
 * request, or an earlier one of the same identity), so that a limiter whose window opens at a first hit opens
 * one there; concurrent bursts on every connection in
 * the last `margin` before that window's edge (a fixed window admits the limit again right after it, and a
 * read-then-write race or a per-process counter admits one request per racer); the same bursts for `margin`
 * after the edge, when the lone request's slot frees; then steady pressure, one request at a time, so that
 * every refusal can be judged against the window behind it and each `Retry-After` against the next admission.
 */
export async function runSchedules(identity: Identity, firstHit: number, budget: Budget) {
  const margin = edgeMarginMs(budget);
  const edge = firstHit + budget.windowMs;
  await sleep(Math.max(0, edge - margin - Date.now()));
  await bursts(identity, edge, 'before edge', budget.rate);
  await bursts(identity, edge + margin, 'slot frees', budget.rate);
  await steady(identity, edge + margin + budget.tailMs, budget.rate);
}

/** One request on every connection at once, waves spaced so that the average stays at `rate`, until `until`. */
async function bursts(identity: Identity, until: number, schedule: ScheduleName, rate: number) {
  const gapMs = (identity.clients.length * 1000) / rate;
  for (let wave = Date.now(); Date.now() < until; wave += gapMs) {
    await sleep(Math.max(0, wave - Date.now()));
    if (Date.now() >= until) return;
    await Promise.all(identity.clients.map((client) => sendAs(identity, client, schedule)));
  }
}

/** At most `rate` requests a second, each on the next connection in turn, until `until`. */
async function steady(identity: Identity, until: number, rate: number) {
  const gapMs = 1000 / rate;
  let slot = Date.now();
  await Promise.all(
    identity.clients.map(async (client) => {
      for (;;) {
        slot = Math.max(slot + gapMs, Date.now());
        await sleep(Math.max(0, slot - Date.now()));
        if (Date.now() >= until) return;
        await sendAs(identity, client, 'steady');
      }
    }),
  );
}
