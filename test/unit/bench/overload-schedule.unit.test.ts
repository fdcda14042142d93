import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import {
  createConnectionQueue,
  planArrivals,
  realClock,
  runOpenLoop,
  type LoopClock,
  type Plan,
} from '../../helpers/open-loop.js';

// The overload benchmark's load is open-loop (test/helpers/open-loop.ts, used by ops/bench/overload/mix.ts):
// requests leave at planned times, however long the answers take, and a late generator catches up skipping none.

/** A virtual clock: time moves only when the loop sleeps, or when a test says an issue took CPU time. */
function virtualClock(start = 1_000): LoopClock & { advance(ms: number): void } {
  let now = start;
  return {
    now: () => now,
    sleep: async (ms) => void (now += Math.max(0, ms)),
    advance: (ms) => void (now += ms),
  };
}

const plan = (times: number[]): Plan => ({ times: Float64Array.from(times), classes: new Uint8Array(times.length) });

const loop = suite('the open loop issues arrivals at their planned times');

loop('given answers that never come, when the loop runs, then each arrival leaves at its planned time', async () => {
  const clock = virtualClock();
  const issued: Array<[number, number, number]> = [];
  const unanswered: Array<Promise<never>> = [];
  await runOpenLoop(plan([0, 5, 5, 12.5, 40, 41]), clock, (index, plannedAt) => {
    issued.push([index, plannedAt, clock.now()]);
    unanswered.push(new Promise<never>(() => {}));
  });
  assert.equal(
    issued.map(([index]) => index),
    [0, 1, 2, 3, 4, 5],
  );
  assert.equal(
    issued.map(([, plannedAt]) => plannedAt),
    [1_000, 1_005, 1_005, 1_012.5, 1_040, 1_041],
  );
  for (const [index, plannedAt, at] of issued) assert.is(at, plannedAt, `arrival ${index} left late`);
  assert.is(unanswered.length, 6);
});

loop(
  'given an issue that costs 3 ms each and arrivals 1 ms apart, then none is skipped and each leaves late, in order',
  async () => {
    const clock = virtualClock(0);
    const times = Array.from({ length: 50 }, (_, i) => i);
    const issued: number[] = [];
    const late: number[] = [];
    await runOpenLoop(plan(times), clock, (index, plannedAt) => {
      issued.push(index);
      late.push(clock.now() - plannedAt);
      clock.advance(3);
    });
    assert.equal(issued, times);
    assert.ok(late.every((ms) => ms >= 0));
    assert.ok(late[49]! > late[1]!, 'the lateness grows while the loop cannot keep up');
  },
);

loop('with the real clock, answers taking a second do not hold up 26 arrivals planned over 250 ms', async () => {
  const answers: Array<Promise<void>> = [];
  const started = performance.now();
  await runOpenLoop(plan(Array.from({ length: 26 }, (_, i) => i * 10)), realClock, () => {
    answers.push(new Promise((resolve) => setTimeout(resolve, 1_000)));
  });
  const elapsed = performance.now() - started;
  assert.is(answers.length, 26);
  assert.ok(elapsed >= 250 && elapsed < 900, `the 26 arrivals took ${elapsed.toFixed(0)} ms`);
  await Promise.all(answers);
});

loop.run();

const plans = suite('a plan of arrivals');

plans('evenly spaced: rate × seconds arrivals, 1/rate apart', () => {
  const { times } = planArrivals({ ratePerS: 200, seconds: 2, weights: [1], seed: 1, spacing: 'even' });
  assert.is(times.length, 400);
  assert.is(times[0], 0);
  assert.ok(Math.abs(times[399]! - 1_995) < 1e-9);
});

plans('Poisson: about rate × seconds arrivals, within the window, in order, the same for the same seed', () => {
  const options = { ratePerS: 1_000, seconds: 10, weights: [0.5, 0.35, 0.15], seed: 7 };
  const { times, classes } = planArrivals(options);
  assert.ok(Math.abs(times.length - 10_000) < 400, `${times.length} arrivals`);
  assert.ok(times.every((t, i) => t >= 0 && t < 10_000 && (i === 0 || t >= times[i - 1]!)));
  const shares = [0, 1, 2].map((c) => classes.filter((k) => k === c).length / classes.length);
  shares.forEach((share, c) => assert.ok(Math.abs(share - options.weights[c]!) < 0.02, `class ${c}: ${share}`));
  assert.equal(planArrivals(options).times, times);
  assert.not.equal(planArrivals({ ...options, seed: 8 }).times, times);
});

plans.run();

const pool = suite('requests beyond the free connections wait, in order, until their deadline');

pool(
  'given 2 connections, then 2 go at once, the rest as connections free, and one past its deadline never goes',
  () => {
    const clock = virtualClock(0);
    const queue = createConnectionQueue(2, 2_000, clock);
    const sent: number[] = [];
    const expired: number[] = [];
    const releases: Array<() => void> = [];
    const submit = (id: number) =>
      queue.submit({
        plannedAt: clock.now(),
        send: (release) => {
          sent.push(id);
          releases.push(release);
        },
        expire: () => expired.push(id),
      });
    [1, 2, 3].forEach(submit);
    clock.advance(1_500);
    submit(4);
    assert.equal(sent, [1, 2]);
    assert.equal(queue.sizes(), { inFlight: 2, waiting: 2 });

    clock.advance(600); // 3 has waited 2.1 s, 4 only 0.6 s
    queue.expireDue();
    assert.equal(expired, [3]);
    releases[0]!();
    releases[0]!(); // a second release of the same request frees nothing more
    assert.equal(sent, [1, 2, 4]);
    assert.equal(queue.sizes(), { inFlight: 2, waiting: 0 });
  },
);

pool.run();
