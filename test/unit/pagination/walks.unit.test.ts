import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { replaceQueryParam } from '../../../src/pagination/links.js';
import { paginate } from '../../../src/pagination/paginate.js';
import type { Ordering, PageSource } from '../../../src/pagination/types.js';

type Task = { id: number; title: string };
const L = 'http://127.0.0.1:18000/api/tasks/';
const settings = { pageSize: 10, maxPageSize: 15, cursorSecret: 'walk-secret' };

/** Deterministic PRNG (mulberry32) so a failure names a seed that reproduces it. */
function createRandom(seed: number): (below: number) => number {
  let state = seed >>> 0;
  return (below) => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * below);
  };
}

function createTasks(random: (below: number) => number): Task[] {
  const tasks: Task[] = [];
  let id = random(5) - 2;
  for (let count = random(60); count > 0; count -= 1) {
    tasks.push({ id, title: `Task ${id}` });
    id += 1 + random(4);
  }
  return tasks;
}

function createSource(tasks: Task[]): PageSource<Task> {
  const sorted = (ordering: Ordering) => (ordering === 'asc' ? tasks : [...tasks].reverse());
  return {
    async page(offset, limit, ordering) {
      return { count: tasks.length, items: sorted(ordering).slice(offset, offset + limit) };
    },
    async seek(key, limit, ordering) {
      const after = (task: Task) => key === null || (ordering === 'asc' ? task.id > key : task.id < key);
      return sorted(ordering).filter(after).slice(0, limit);
    },
    keyOf: (task) => task.id,
  };
}

async function open(source: PageSource<Task>, url: string, ordering: Ordering) {
  const outcome = await paginate(
    source,
    { url: new URL(url), ordering, orderingParam: ordering === 'asc' ? 'id' : '-id' },
    settings,
  );
  if (!outcome.ok) throw new Error(`${url}: ${outcome.status} ${outcome.detail}`);
  return outcome.body;
}

const Cursor = suite('random cursor walks always give consistent pages');

Cursor('each step shows the window right after (next) or right before (previous) the current one', async () => {
  for (let seed = 1; seed <= 300; seed += 1) {
    const random = createRandom(seed);
    const tasks = createTasks(random);
    const ordering: Ordering = random(2) === 0 ? 'asc' : 'desc';
    const walk = ordering === 'asc' ? tasks : [...tasks].reverse();
    const source = createSource(tasks);
    let size = 1 + random(settings.maxPageSize);
    let url = `${L}?cursor=&page_size=${size}`;
    const shown = () => Math.min(size, settings.maxPageSize);
    let start = 0;
    let length = Math.min(shown(), walk.length);
    for (let step = 0; step < 40; step += 1) {
      const label = `seed ${seed} step ${step} ${ordering} size ${size}`;
      const page = await open(source, url, ordering);
      assert.equal(page.results, walk.slice(start, start + length), label);
      assert.is(page.previous === null, start === 0, label);
      assert.is(page.next === null, start + length >= walk.length, label);
      const forward = page.next !== null && (page.previous === null || random(3) > 0);
      const link = forward ? page.next : page.previous;
      if (link === null) break;
      if (random(4) === 0) size = 1 + random(settings.maxPageSize + 5);
      url = replaceQueryParam(new URL(link), 'page_size', size);
      // Forward: the window right after this page. Backward: the window that ends right before it.
      const end = forward ? Math.min(start + length + shown(), walk.length) : start;
      start = forward ? start + length : Math.max(0, start - shown());
      length = end - start;
    }
  }
});

const Numbered = suite('random page-number and limit/offset requests give the matching slice');

Numbered('any valid page or offset shows exactly its slice, with links that agree', async () => {
  for (let seed = 1; seed <= 300; seed += 1) {
    const random = createRandom(seed);
    const tasks = createTasks(random);
    const ordering: Ordering = random(2) === 0 ? 'asc' : 'desc';
    const walk = ordering === 'asc' ? tasks : [...tasks].reverse();
    const source = createSource(tasks);
    const size = 1 + random(20);
    const effective = Math.min(size, settings.maxPageSize);
    const pages = Math.max(1, Math.ceil(walk.length / effective));
    const number = 1 + random(pages + 1);
    const outcome = await paginate(
      source,
      { url: new URL(`${L}?page=${number}&page_size=${size}`), ordering },
      settings,
    );
    const label = `seed ${seed} page ${number} size ${size}`;
    if (number > pages) {
      assert.equal(outcome, { ok: false, status: 404, detail: 'Invalid page.' }, label);
    } else {
      assert.ok(outcome.ok, label);
      assert.equal(outcome.body.results, walk.slice((number - 1) * effective, number * effective), label);
      assert.is(outcome.body.next !== null, number < pages, label);
      assert.is(outcome.body.previous !== null, number > 1, label);
    }
    const offset = random(walk.length + 5);
    const lo = await open(source, `${L}?limit=${size}&offset=${offset}`, ordering);
    assert.equal(lo.results, walk.slice(offset, offset + effective), `seed ${seed} offset ${offset}`);
    assert.is(lo.next !== null, offset + effective < walk.length, `seed ${seed} offset ${offset}`);
  }
});

Cursor.run();
Numbered.run();
