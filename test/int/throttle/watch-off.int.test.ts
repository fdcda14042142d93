import { Writable } from 'node:stream';
import { pino } from 'pino';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from '../../helpers/app.js';
import { request } from '../../helpers/http.js';
import { parseMetrics, sumOf } from '../../helpers/metrics.js';

// docs/throttling.md "Who is throttled": THROTTLE_WATCH=off keeps no view of who is throttled — no near-limit
// counts, no pseudonym in the refusal's log line — while the throttle answers and counts its decisions as with it on.

interface Watched {
  app: TestApp;
  lines: Array<Record<string, unknown>>;
}

async function start(watch: 'on' | 'off'): Promise<Watched> {
  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n'))
        if (line) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  const env = { THROTTLE_ANON: '5/min', TRUST_PROXY_HOPS: '1', THROTTLE_WATCH: watch, LOG_LEVEL: 'info' };
  const app = await startTestApp(env, `throttle-watch-${watch}`, { logger: pino({ level: 'info' }, sink) });
  return { app, lines };
}

/** 8 requests of one client against anon 5/min: its statuses, near-limit admissions, decisions and refusal line. */
async function flood({ app, lines }: Watched) {
  const ip = '198.51.100.40';
  const statuses: number[] = [];
  for (let i = 0; i < 8; i++)
    statuses.push((await request(app.base, 'GET', '/api/tasks/', { headers: { 'X-Forwarded-For': ip } })).status);
  const samples = parseMetrics(await app.deps.metrics.registry.metrics());
  const refusal = lines.find((line) => line.client === `ip:${ip}` && line.status === 429);
  return {
    statuses,
    nearLimit: sumOf(samples, 'paceline_throttle_near_limit_total', { scope: 'anon' }),
    throttled: sumOf(samples, 'paceline_throttle_decisions_total', { scope: 'anon', decision: 'throttled' }),
    pseudonym: refusal?.pseudonym,
  };
}

const test = suite('THROTTLE_WATCH=off');
let on: Watched;
let off: Watched;

test.before(async () => {
  [on, off] = await Promise.all([start('on'), start('off')]);
});

test.after(async () => {
  await Promise.all([on?.app.close(), off?.app.close()]);
});

test('off: the same answers and decisions, but no near-limit counts and no pseudonym in the refusal line', async () => {
  const [watched, unwatched] = [await flood(on), await flood(off)];
  const statuses = [200, 200, 200, 200, 200, 429, 429, 429];
  assert.equal(watched.statuses, statuses);
  assert.equal(unwatched.statuses, statuses);
  assert.is(watched.throttled, 3);
  assert.is(unwatched.throttled, 3);
  // 5/min with THROTTLE_NEAR_LIMIT_RATIO 0.2: the admissions that left 1 and 0.
  assert.is(watched.nearLimit, 2);
  assert.is(unwatched.nearLimit, 0);
  assert.match(String(watched.pseudonym), /^c-[0-9a-f]{16}$/);
  assert.is(unwatched.pseudonym, undefined);
});

test.run();
