import { setTimeout as sleep } from 'node:timers/promises';
import type { Client } from '../client.js';
import type { CheckResult, RunContext } from '../context.js';
import type { Tasks } from './tasks.js';

const WRITES = 6;
const PAGE = 50;
const MAX_READS = 200;

interface FeedEvent {
  position: number;
  task_id?: number;
}

/**
 * The feed only moves forward (docs/verify.md "The feed"): a poller follows `next` from the end of the log
 * while tasks are written; every answer's positions strictly increase, the poller never sees a position
 * before a smaller one that a later full read holds (a hole filled late), and each acknowledged write is
 * in the log.
 */
export async function checkFeed(ctx: RunContext, tasks: Tasks): Promise<CheckResult> {
  const began = Date.now();
  const client = ctx.client('feed', { token: tasks.token });
  const start = await endOfLog(client);
  const seen: number[] = [];
  const disorder: number[] = [];
  let after = start;
  let writing = true;
  let reads = 0;
  const poll = async () => {
    const events = await readAfter(client, after);
    events.forEach((e, i) => i > 0 && e.position <= events[i - 1]!.position && disorder.push(e.position));
    if (events.length > 0 && events[0]!.position <= after) disorder.push(events[0]!.position);
    seen.push(...events.map((e) => e.position));
    after = events.at(-1)?.position ?? after;
    return events.length;
  };
  const polling = (async () => {
    while (reads++ < MAX_READS) {
      const got = await poll();
      if (!writing && got === 0) return;
      if (writing) await sleep(150);
    }
  })();
  const written: number[] = [];
  for (let i = 0; i < WRITES; i++) {
    const id = await tasks.create(`feed ${i}`);
    if (id !== undefined) written.push(id);
    if (id !== undefined && i % 4 === 3) await tasks.deleteOne(id);
    await sleep(100);
  }
  writing = false;
  await polling;
  const final = await readAll(client, start);
  const finalPositions = final.map((e) => e.position);
  const polled = new Set(seen);
  const last = seen.at(-1) ?? start;
  const holes = finalPositions.filter((p) => p <= last && !polled.has(p));
  const logged = new Set(final.map((e) => e.task_id));
  const lost = written.filter((id) => !logged.has(id));
  const evidence = {
    from: start,
    to: finalPositions.at(-1) ?? start,
    polledEvents: seen.length,
    holes,
    disorder,
    lostWrites: lost,
  };
  const base = {
    name: 'feed' as const,
    evidence,
    requests: ctx.history.countFor('feed'),
    seconds: (Date.now() - began) / 1000,
  };
  const problems = [
    holes.length > 0 ? `${holes.length} positions appeared after larger ones had been read` : '',
    disorder.length > 0 ? `${disorder.length} positions out of order` : '',
    lost.length > 0 ? `${lost.length} acknowledged writes missing from the log` : '',
  ].filter((text) => text !== '');
  if (problems.length > 0) return { ...base, verdict: 'violated', summary: problems.join('; ') };
  return {
    ...base,
    verdict: 'holds',
    summary: `${seen.length} events read while writing: in order, no late holes, every write logged`,
  };
}

async function readAfter(client: Client, after: number): Promise<FeedEvent[]> {
  const answer = await client.sendPolitely({ path: `api/events/?after=${after}&limit=${PAGE}`, f: 'feed' });
  return (answer.body as { results?: FeedEvent[] } | undefined)?.results ?? [];
}

async function readAll(client: Client, from: number): Promise<FeedEvent[]> {
  const all: FeedEvent[] = [];
  for (let after = from, reads = 0; reads < MAX_READS; reads++) {
    const events = await readAfter(client, after);
    if (events.length === 0) break;
    all.push(...events);
    after = events.at(-1)!.position;
  }
  return all;
}

/**
 * A position at most PAGE below the log's last one, found in a few dozen reads however long the log is (about
 * 28 at a million events: steps ×4 up, then halving down to a page): the first poll reads the rest.
 */
async function endOfLog(client: Client): Promise<number> {
  const exists = async (position: number) => (await readAfterOne(client, position - 1)) !== undefined;
  if (!(await exists(1))) return 0;
  let low = 1;
  let high = 4;
  while (await exists(high)) [low, high] = [high, high * 4];
  while (high - low > PAGE) {
    const middle = Math.floor((low + high) / 2);
    if (await exists(middle)) low = middle;
    else high = middle;
  }
  return low;
}

async function readAfterOne(client: Client, after: number): Promise<FeedEvent | undefined> {
  const answer = await client.sendPolitely({ path: `api/events/?after=${after}&limit=1`, f: 'feed end' });
  return (answer.body as { results?: FeedEvent[] } | undefined)?.results?.[0];
}
