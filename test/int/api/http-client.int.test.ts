import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import got, { type Got } from 'got';
import type { Counter } from 'prom-client';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from '../../helpers/app.js';
import { request } from '../../helpers/http.js';

// docs/api.md "A retrying HTTP client": `got`, configured as its users configure it (retry on 429
// honouring Retry-After), against the real app, Redis and PostgreSQL with a small anonymous
// limit. It follows `next` through every pagination style and sees every task exactly once, and
// a burst over the limit completes with no window admitting more than the limit, in the time the
// Retry-After values predicted (docs/architecture.md "Throttling", "Pagination").

const LIMIT = 5;
const WINDOW_MS = 3_000;
const TASKS = 23;
const BURST = 3 * LIMIT;

interface Page {
  next: string | null;
  results: Array<{ id: number }>;
}

/** One request the server answered, timed by the server: admission happened between the two instants. */
interface Answered {
  path: string;
  status: number;
  arrived: number;
  finished: number;
}

/** The client a user writes: retries idempotent GETs on 429 and 503 after the Retry-After the server sent. */
function retryingClient(): Got {
  return got.extend({
    responseType: 'json',
    timeout: { request: 30_000 },
    retry: {
      limit: 8,
      methods: ['GET'],
      statusCodes: [429, 503],
      // A Retry-After above this gives up rather than waiting.
      maxRetryAfter: 15_000,
      // got hands in Retry-After (ms) as computedValue when the answer had one; 0 means stop.
      calculateDelay: ({ computedValue }) => computedValue,
    },
  });
}

/**
 * The smallest span, from first arrival to last finish, of any LIMIT + 1 admitted requests: the
 * sliding log guarantees their admissions span at least the window, and admissions happen
 * between arrival and finish, so this span is at least the window too (whatever the timing).
 */
function tightestSpan(admitted: Answered[], size: number): number {
  const byArrival = [...admitted].sort((a, b) => a.arrived - b.arrived);
  let tightest = Number.POSITIVE_INFINITY;
  for (let first = 0; first + size <= byArrival.length; first += 1) {
    // The earliest-arriving one of the set, with the size - 1 later arrivals that finish first.
    const others = byArrival
      .slice(first + 1)
      .map((a) => a.finished)
      .sort((a, b) => a - b);
    const last = Math.max(byArrival[first]!.finished, others[size - 2]!);
    tightest = Math.min(tightest, last - byArrival[first]!.arrived);
  }
  return tightest;
}

async function throttleCount(app: TestApp, decision: string): Promise<number> {
  const metric = app.deps.metrics.registry.getSingleMetric('paceline_throttle_decisions_total') as Counter | undefined;
  const values = (await metric!.get()).values;
  return values
    .filter((v) => v.labels.scope === 'anon' && v.labels.decision === decision)
    .reduce((sum, v) => sum + v.value, 0);
}

const test = suite(`a retrying got client through throttling (anon ${LIMIT}/${WINDOW_MS / 1000}s)`);
let app: TestApp;
const answered: Answered[] = [];
let created: number[] = [];

test.before(async () => {
  app = await startTestApp({ THROTTLE_ANON: `${LIMIT}/${WINDOW_MS / 1000}s` }, 'http-client');
  app.server.prependListener('request', (req, res) => {
    const arrived = performance.now();
    res.once('finish', () =>
      answered.push({ path: req.url ?? '', status: res.statusCode, arrived, finished: performance.now() }),
    );
  });
  // The writer is authenticated (its own, generous scope); the readers below are anonymous.
  const token = await app.login('writer');
  for (let i = 0; i < TASKS; i += 1) {
    const response = await request(app.base, 'POST', '/api/tasks/', { token, body: { title: `task ${i}` } });
    assert.is(response.status, 201, response.text);
    created.push(response.body.id as number);
  }
  created = created.sort((a, b) => a - b);
  answered.length = 0;
});
test.after(() => app?.close());

test('following next in every pagination style visits every task exactly once, through 429s', async () => {
  const client = retryingClient();
  const walks = {
    'page number': '/api/tasks/?page_size=8',
    'limit/offset': '/api/tasks/?limit=8',
    cursor: '/api/tasks/?cursor=&page_size=8',
    'cursor, -id': '/api/tasks/?cursor=&ordering=-id&page_size=8',
  };
  for (const [style, path] of Object.entries(walks)) {
    const seen = await client.paginate.all<{ id: number }, Page>(`${app.base}${path}`, {
      pagination: {
        transform: (response) => response.body.results,
        paginate: ({ response }) => (response.body.next ? { url: new URL(response.body.next) } : false),
      },
    });
    const ids = seen.map((task) => task.id);
    assert.is(new Set(ids).size, ids.length, `${style}: no task twice`);
    assert.equal(
      [...ids].sort((a, b) => a - b),
      created,
      `${style}: every task`,
    );
  }
  const throttled = answered.filter((a) => a.status === 429).length;
  assert.ok(throttled > 0, `the walks (12 pages at ${LIMIT} per window) met the limit: ${throttled} answers were 429`);
  assert.ok(
    answered.every((a) => a.status === 200 || a.status === 429),
    `only 200s and 429s: ${answered.map((a) => a.status)}`,
  );
});

test('a burst over the limit completes in the time Retry-After predicted, never admitting more than the limit', async () => {
  // Start on an empty window: the walks' last admission has left it.
  const lastAdmission = Math.max(...answered.filter((a) => a.status === 200).map((a) => a.finished));
  await sleep(Math.max(0, lastAdmission + WINDOW_MS + 100 - performance.now()));
  const client = retryingClient();
  const from = answered.length;
  const began = performance.now();
  const waits = await Promise.all(
    Array.from({ length: BURST }, async (_, i) => {
      let waitedMs = 0;
      const response = await client.get<Page>(`${app.base}/api/tasks/?page_size=${i + 1}`, {
        hooks: { beforeRetry: [(error) => void (waitedMs += 1000 * Number(error.response?.headers['retry-after']))] },
      });
      assert.is(response.statusCode, 200);
      assert.is(response.body.results.length, Math.min(i + 1, TASKS));
      return waitedMs;
    }),
  );
  const elapsed = performance.now() - began;
  const predicted = Math.max(...waits);
  const burst = answered.slice(from);
  const admitted = burst.filter((a) => a.status === 200);

  assert.is(admitted.length, BURST, 'each request admitted once');
  assert.is(
    burst.length - admitted.length,
    burst.filter((a) => a.status === 429).length,
    'every other answer was a 429',
  );
  // Three windows' worth: the last third cannot be admitted before two windows have passed.
  assert.ok(elapsed >= 2 * WINDOW_MS - 50, `not faster than the limit allows: ${elapsed.toFixed(0)} ms`);
  assert.ok(
    predicted <= 2 * WINDOW_MS + 3_000,
    `Retry-After never overstated the wait much: the longest chain was ${predicted} ms`,
  );
  assert.ok(elapsed >= predicted, `not before the predicted ${predicted} ms: ${elapsed.toFixed(0)} ms`);
  assert.ok(elapsed <= predicted + 5_000, `within 5 s of the predicted ${predicted} ms: ${elapsed.toFixed(0)} ms`);
  console.log(
    `burst of ${BURST} at ${LIMIT}/${WINDOW_MS / 1000}s: ${elapsed.toFixed(0)} ms (Retry-After chain ${predicted} ms), ` +
      `${burst.length - admitted.length} 429s, any ${LIMIT + 1} admissions spanned at least ${tightestSpan(admitted, LIMIT + 1).toFixed(0)} ms`,
  );
});

test('over the whole run, no window admitted more than the limit (server-side instants and metrics agree)', async () => {
  const admitted = answered.filter((a) => a.status === 200);
  const span = tightestSpan(admitted, LIMIT + 1);
  assert.ok(
    span >= WINDOW_MS - 50,
    `any ${LIMIT + 1} admissions span at least the window: the tightest spans ${span.toFixed(0)} ms`,
  );
  assert.is(await throttleCount(app, 'allowed'), admitted.length, 'the allowed anon decisions are the 200s');
  assert.is(
    await throttleCount(app, 'throttled'),
    answered.length - admitted.length,
    'the throttled anon decisions are the 429s',
  );
});

test.run();
