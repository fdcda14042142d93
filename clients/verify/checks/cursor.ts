import { setTimeout as sleep } from 'node:timers/promises';
import type { Client } from '../client.js';
import { loops, type CheckResult, type RunContext } from '../context.js';
import { analyseWalk, breaksGuarantee, type Element, type WalkPage, type WalkStyle } from './cursor-analysis.js';
import { type Tasks } from './tasks.js';

const STYLES: WalkStyle[] = ['cursor ascending', 'cursor descending', 'page number', 'limit/offset'];
const SHORT: Record<WalkStyle, string> = {
  'cursor ascending': 'cursor ↑',
  'cursor descending': 'cursor ↓',
  'page number': 'page',
  'limit/offset': 'offset',
};
const SEEDS = 8;
const WRITE_GAP_MS = 400;
/** A pause between pages, so that writes land while a walk is under way. */
const PAGE_GAP_MS = 250;
const MAX_PAGES = 400;
/** Two walks of each style, spread over the check's duration. */
const WALKS = 2 * STYLES.length;

/**
 * Cursor walks lose nothing (docs/verify.md "Cursor walks lose nothing"): writers create and delete tasks
 * while walkers follow `next` in each style. Cursor walks must list every task that existed when they
 * began exactly once, in order, and (ascending) every task acknowledged before they asked for their last
 * page; page-number and limit/offset walks are reported with their skips and repeats, which are expected.
 */
export async function checkCursor(ctx: RunContext, tasks: Tasks, durationMs: number): Promise<CheckResult> {
  const began = Date.now();
  for (let i = 0; i < SEEDS; i++) await tasks.create(`seed ${i}`);
  const walker = ctx.client('walker', { token: tasks.token });
  const pageSize = await choosePageSize(walker);
  const deadline = Date.now() + durationMs;
  const walks: ReturnType<typeof analyseWalk>[] = [];
  let stopWriting = false;
  const writing = loops(1, Infinity, async () => {
    const created = await tasks.create('written during walks');
    if (created !== undefined && created % 3 === 0) await tasks.deleteOne(tasks.randomLive());
    await sleep(WRITE_GAP_MS);
    return !stopWriting;
  });
  for (let i = 0; i < WALKS; i++) {
    const style = STYLES[i % STYLES.length]!;
    const pages = await walk(walker, style, pageSize, tasks.elements);
    if (pages !== undefined) walks.push(analyseWalk(style, pages, tasks.elements));
    await sleep(Math.max(0, (deadline - Date.now()) / (WALKS - i)));
  }
  stopWriting = true;
  await writing;
  return judgeWalks(walks, {
    requests: ctx.history.countFor('cursor'),
    seconds: (Date.now() - began) / 1000,
    pageSize,
  });
}

function judgeWalks(
  walks: ReturnType<typeof analyseWalk>[],
  facts: { requests: number; seconds: number; pageSize: number },
) {
  const cursorWalks = walks.filter((w) => w.style.startsWith('cursor'));
  const broken = cursorWalks.filter(breaksGuarantee);
  const others = walks.filter((w) => !w.style.startsWith('cursor'));
  const skipped = others.reduce((sum, w) => sum + w.missing.length, 0);
  const repeated = others.reduce((sum, w) => sum + w.duplicates.length, 0);
  const evidence = {
    pageSize: facts.pageSize,
    walks: walks.map((w) => ({ ...w, missing: w.missing.slice(0, 30), duplicates: w.duplicates.slice(0, 30) })),
    pageStyles: `page-number and limit/offset walks skipped ${skipped} and repeated ${repeated} tasks: expected when rows are written while paging, not a fault`,
  };
  const plot = {
    title: 'Walk coverage: tasks that existed at each walk’s start, and how many it listed',
    kind: 'bars' as const,
    xLabel: 'walk (cursor ↑ and ↓ must list every task; page number and limit/offset may skip)',
    xLabels: walks.map((w) => SHORT[w.style]),
    yLabel: 'tasks',
    series: [
      { name: 'expected', points: walks.map((w, i) => [i + 1, w.expected] as [number, number]) },
      { name: 'listed', points: walks.map((w, i) => [i + 1, w.expected - w.missing.length] as [number, number]) },
    ],
  };
  const base = { name: 'cursor' as const, evidence, plot, requests: facts.requests, seconds: facts.seconds };
  if (cursorWalks.length === 0) return { ...base, verdict: 'skipped' as const, summary: 'no cursor walk completed' };
  if (broken.length > 0) {
    const w = broken[0]!;
    const what = `missing ${w.missing.length}, duplicated ${w.duplicates.length}, out of order ${w.outOfOrder.length}, deleted but listed ${w.resurrected.length}, late commits missed ${w.lateMissed.length}`;
    return {
      ...base,
      verdict: 'violated' as const,
      summary: `${broken.length} of ${cursorWalks.length} cursor walks lost the guarantee (first, ${w.style}: ${what})`,
    };
  }
  const summary = `${cursorWalks.length} cursor walks under concurrent writes listed every task exactly once, in order`;
  return { ...base, verdict: 'holds' as const, summary } satisfies CheckResult;
}

/** Small pages make walks long enough to interleave with writes, yet a walk stays within MAX_PAGES. */
async function choosePageSize(client: Client): Promise<number> {
  const first = await client.sendPolitely({ path: 'api/tasks/', f: 'count' });
  const count = Number((first.body as { count?: unknown } | undefined)?.count ?? 0);
  return Math.min(100, Math.max(5, Math.ceil(count / (MAX_PAGES / 2))));
}

function firstPage(style: WalkStyle, pageSize: number): string {
  if (style === 'cursor ascending') return `api/tasks/?cursor=&page_size=${pageSize}`;
  if (style === 'cursor descending') return `api/tasks/?cursor=&ordering=-id&page_size=${pageSize}`;
  if (style === 'page number') return `api/tasks/?page_size=${pageSize}`;
  return `api/tasks/?limit=${pageSize}`;
}

/** Follows `next` to the end (a descending walk stops once past the run's oldest task). */
async function walk(client: Client, style: WalkStyle, pageSize: number, elements: Map<number, Element>) {
  const oldest = Math.min(...elements.keys());
  const pages: WalkPage[] = [];
  for (let url: string | null = firstPage(style, pageSize); url !== null && pages.length < MAX_PAGES;) {
    const page = await client.sendPolitely({ path: url, f: `walk ${style}` });
    const body = page.body as { next?: unknown; results?: { id: number }[] } | undefined;
    if (page.status !== 200 || !Array.isArray(body?.results)) return undefined;
    const ids = body.results.map((task) => task.id);
    pages.push({ invoke: page.invoke, complete: page.complete, ids });
    url = typeof body.next === 'string' ? body.next : null;
    await sleep(PAGE_GAP_MS);
    if (style === 'cursor descending' && ids.length > 0 && ids.at(-1)! < oldest) return pages;
    if (url !== null && pages.length === MAX_PAGES) return undefined;
  }
  return pages;
}
