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
/**
 * What the check spends from its user's budget (docs/verify.md "Bounded on any collection"): 6 seed tasks, a
 * write every WRITE_GAP_MS (a third of them followed by a delete) and WALK_STYLES' pages of PAGE_SIZE tasks
 * over the run's own tasks: about 75 requests with the cleanup.
 */
const SEEDS = 6;
const WRITE_GAP_MS = 900;
/** A pause between pages, so that writes land while a walk is under way. */
const PAGE_GAP_MS = 250;
/** A walk longer than this (other clients writing very fast) is given up, not judged. */
const MAX_PAGES = 400;
/**
 * The walks, spread over the check's duration: two of each cursor style, whose guarantee is judged, and one of
 * each page style, whose skips and repeats are only reported.
 */
const WALK_STYLES: WalkStyle[] = [...STYLES, 'cursor ascending', 'cursor descending'];

/**
 * Cursor walks lose nothing (docs/verify.md "Cursor walks lose nothing"): writers create and delete tasks
 * while walkers follow `next` (or, ascending, `previous`) in each style, over the run's own tasks. Cursor walks must list every task that existed when they
 * began exactly once, in order, and (ascending) every task acknowledged before they asked for their last
 * page; page-number and limit/offset walks are reported with their skips and repeats, which are expected.
 */
export async function checkCursor(ctx: RunContext, tasks: Tasks, durationMs: number): Promise<CheckResult> {
  const began = Date.now();
  for (let i = 0; i < SEEDS; i++) await tasks.create(`seed ${i}`);
  const walker = ctx.client('walker', { token: tasks.token });
  const deadline = Date.now() + durationMs;
  const walks: ReturnType<typeof analyseWalk>[] = [];
  let stopWriting = false;
  const writing = loops(1, Infinity, async () => {
    const created = await tasks.create('written during walks');
    if (created !== undefined && created % 3 === 0) await tasks.deleteOne(tasks.randomLive());
    await sleep(WRITE_GAP_MS);
    return !stopWriting;
  });
  for (const [i, style] of WALK_STYLES.entries()) {
    const pages = await walk(ctx, walker, style, tasks.elements);
    if (pages !== undefined) walks.push(analyseWalk(style, pages, tasks.elements));
    await sleep(Math.max(0, (deadline - Date.now()) / (WALK_STYLES.length - i)));
  }
  stopWriting = true;
  await writing;
  return judgeWalks(walks, {
    requests: ctx.history.countFor('cursor'),
    seconds: (Date.now() - began) / 1000,
    pageSize: PAGE_SIZE,
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
    title: 'Walk coverage: for each walk, the tasks that existed when it started and how many it listed',
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

/** Small pages, so that a walk over the run's few dozen tasks takes enough pages to interleave with writes. */
const PAGE_SIZE = 3;

/**
 * The first page of a walk: every walk starts at the newest task (`ordering=-id`), so that it covers the run's
 * own tasks in a few pages however long the collection is (docs/verify.md "Bounded on any collection").
 */
function firstPage(ctx: RunContext, style: WalkStyle): string {
  const list = style.startsWith('cursor') ? ctx.options.cursorPath : 'api/tasks/';
  const url = new URL(list, ctx.options.base);
  url.searchParams.set('ordering', '-id');
  url.searchParams.set(style === 'limit/offset' ? 'limit' : 'page_size', String(PAGE_SIZE));
  if (style === 'limit/offset') url.searchParams.delete('page_size');
  return url.href;
}

type Body = { next?: unknown; previous?: unknown; results?: { id: number }[] } | undefined;

/**
 * Follows `next` from the newest task until a page reaches past the run's oldest task (or the list ends).
 * `pause` spaces the pages of a judged walk; the descent that positions an ascending walk does not pause.
 */
async function descend(client: Client, url: string, style: WalkStyle, oldest: number, pause: boolean) {
  const pages: (WalkPage & { previous: string | null })[] = [];
  for (let next: string | null = url; next !== null;) {
    if (pages.length === MAX_PAGES) return undefined;
    const page = await client.sendPolitely({ path: next, f: `walk ${style}` });
    const body = page.body as Body;
    if (page.status !== 200 || !Array.isArray(body?.results)) return undefined;
    const ids = body.results.map((task) => task.id);
    const previous = typeof body.previous === 'string' ? body.previous : null;
    pages.push({ invoke: page.invoke, complete: page.complete, ids, previous });
    next = typeof body.next === 'string' ? body.next : null;
    if (ids.length > 0 && ids.at(-1)! < oldest) break;
    if (pause) await sleep(PAGE_GAP_MS);
  }
  return pages;
}

/**
 * An ascending walk that starts just below the run's oldest task: a descent finds the page that reaches
 * past it, then the walk follows `previous` up to the newest task. Each of those pages lists its tasks
 * newest first, so the walk reads each page reversed: ascending order, the page below first.
 */
async function ascend(client: Client, url: string, oldest: number) {
  const descent = await descend(client, url, 'cursor ascending', oldest, false);
  const bottom = descent?.at(-1);
  if (bottom === undefined) return undefined;
  const pages: WalkPage[] = [{ ...bottom, ids: [...bottom.ids].reverse() }];
  for (let previous = bottom.previous; previous !== null;) {
    if (pages.length === MAX_PAGES) return undefined;
    await sleep(PAGE_GAP_MS);
    const page = await client.sendPolitely({ path: previous, f: 'walk cursor ascending' });
    const body = page.body as Body;
    if (page.status !== 200 || !Array.isArray(body?.results)) return undefined;
    pages.push({ invoke: page.invoke, complete: page.complete, ids: body.results.map((t) => t.id).reverse() });
    previous = typeof body.previous === 'string' ? body.previous : null;
  }
  return pages;
}

/** One walk of `style` over the run's tasks; undefined when it could not be completed (an error, too long). */
async function walk(ctx: RunContext, client: Client, style: WalkStyle, elements: Map<number, Element>) {
  const oldest = Math.min(...elements.keys());
  if (style === 'cursor ascending') return ascend(client, firstPage(ctx, style), oldest);
  return descend(client, firstPage(ctx, style), style, oldest, true);
}
