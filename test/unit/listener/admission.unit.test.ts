import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { AdaptiveLimit } from '../../../src/listener/adaptive-limit.js';
import { Admission, type Level, type ShedReason, type Waiter } from '../../../src/listener/admission.js';

// docs/throttling.md "Past capacity: admission and shedding": the learnt limit and the queue, on a fake clock.

const Limit = suite('the limit a worker learns from latency');

/** Feeds `count` requests of `ms` each, `inFlight` in progress, one every ms of the fake clock. */
function feed(
  limit: AdaptiveLimit,
  count: number,
  ms: number,
  inFlight: (limit: number) => number,
  clock: { t: number },
) {
  for (let i = 0; i < count; i += 1) limit.sample(ms, inFlight(limit.value), (clock.t += 1));
}

Limit('while latency holds, a worker that uses its limit grows it, up to the maximum', () => {
  const limit = new AdaptiveLimit({ min: 4, max: 64, initial: 10 });
  const clock = { t: 0 };
  feed(limit, 10_000, 20, (value) => value, clock);
  assert.is(limit.value, 64);
});

Limit('an idle worker keeps its limit: using half of it says nothing about capacity', () => {
  const limit = new AdaptiveLimit({ min: 4, max: 64, initial: 20 });
  feed(limit, 2_000, 20, () => 3, { t: 0 });
  assert.is(limit.value, 20);
});

Limit('a worker that does not use half its limit keeps it even as its requests get slower', () => {
  const limit = new AdaptiveLimit({ min: 4, max: 64, initial: 40 });
  const clock = { t: 0 };
  feed(limit, 1_000, 5, () => 10, clock);
  feed(limit, 1_000, 50, () => 15, clock); // ten times slower, but never more than 15 of 40 in progress
  assert.is(limit.value, 40);
});

Limit('when requests get slower than 1.5x their baseline, the limit comes down, not below the minimum', () => {
  const limit = new AdaptiveLimit({ min: 4, max: 64, initial: 40 });
  const clock = { t: 0 };
  feed(limit, 1_000, 20, (value) => value, clock);
  const before = limit.value;
  feed(limit, 600, 200, (value) => value, clock); // ten times slower: the host is past capacity
  assert.ok(limit.value < before * 0.8, `${before} → ${limit.value}`);
  feed(limit, 5_000, 2_000, (value) => value, clock);
  assert.ok(limit.value >= 4, `never under the minimum: ${limit.value}`);
});

Limit('under a sustained overload the limit stays down: the baseline does not follow the slower requests up', () => {
  const limit = new AdaptiveLimit({ min: 4, max: 64, initial: 40 });
  const clock = { t: 0 };
  feed(limit, 1_000, 20, (value) => value, clock);
  feed(limit, 20_000, 200, (value) => value, clock); // 20 s of requests ten times slower, the limit always full
  assert.ok(limit.value <= 12, `limit ${limit.value}, baseline ${limit.baselineMs.toFixed(0)} ms`);
});

Limit('a worker that does not fill its limit learns a slower baseline within seconds', () => {
  const limit = new AdaptiveLimit({ min: 4, max: 64, initial: 40 });
  const clock = { t: 0 };
  feed(limit, 1_000, 20, () => 5, clock);
  feed(limit, 20_000, 200, () => 5, clock);
  assert.ok(limit.baselineMs > 190, `baseline ${limit.baselineMs.toFixed(0)} ms`);
  assert.is(limit.value, 40);
});

const Queue = suite('admission: the queue, its classes and its deadline');

interface Probe {
  events: string[];
  waiter(label: string, level: Level, at?: number, gone?: () => boolean): Waiter;
}

function probe(): Probe {
  const events: string[] = [];
  return {
    events,
    waiter: (label, level, at = 0, gone = () => false) => ({
      level,
      queuedAt: at,
      start: () => events.push(`start ${label}`),
      shed: (reason: ShedReason) => events.push(`shed ${label} ${reason}`),
      gone,
    }),
  };
}

const pinned = (value: number) => new AdaptiveLimit({ min: value, max: value });

Queue(
  'past the limit, requests queue; a full queue sheds a lower class for a higher one; slots go highest first',
  () => {
    const now = { t: 0 };
    const admission = new Admission(pinned(2), { queueSize: 2, queueMs: 1_000 }, () => now.t);
    const { events, waiter } = probe();
    admission.admit(waiter('w1', 3));
    admission.admit(waiter('w2', 3));
    admission.admit(waiter('docs', 0));
    admission.admit(waiter('anon', 1));
    admission.admit(waiter('read', 2));
    admission.admit(waiter('write', 3));
    admission.admit(waiter('docs2', 0));
    assert.equal(events, ['start w1', 'start w2', 'shed docs displaced', 'shed anon displaced', 'shed docs2 full']);
    admission.finish(10, 2);
    admission.finish(10, 2);
    assert.equal(events.slice(5), ['start write'], 'a read may fill only 90 % of 2 slots: one');
    admission.finish(10, 1);
    assert.equal(events.slice(6), ['start read']);
    admission.close();
  },
);

/**
 * A worker whose limit is pinned at one request in progress (a queue of 10, queueMs 100, on a fake clock), its slot
 * held by a write started at 0 ('start running').
 */
function busyWorker() {
  const now = { t: 0 };
  const admission = new Admission(pinned(1), { queueSize: 10, queueMs: 100 }, () => now.t);
  const { events, waiter } = probe();
  admission.admit(waiter('running', 3));
  return { now, admission, events, waiter };
}

/** Lets the queue's sweeper (every queueMs / 4 of real time) run once at least. */
const sweep = () => new Promise((resolve) => setTimeout(resolve, 60));

Queue('a burst may wait up to a second; a standing backlog holds no more than the limit, oldest shed first', () => {
  const { now, admission, events, waiter } = busyWorker();
  admission.admit(waiter('burst', 2, 0));
  now.t = 500;
  admission.finish(500, 1);
  assert.equal(events, ['start running', 'start burst'], 'a burst: 500 ms of wait is served');
  admission.admit(waiter('left', 3, 500, () => true));
  admission.admit(waiter('slow', 2, 500));
  now.t = 1_600; // the worker has not caught up since 500: standing
  admission.admit(waiter('fresh', 2, 1_600));
  assert.equal(events.slice(2), ['shed slow full'], 'over the limit of 1 waiting: the oldest of the lowest class');
  admission.finish(1_100, 1);
  assert.equal(events.slice(3), ['start fresh'], 'the client that left gets neither');
  admission.close();
});

Queue(
  'a queue emptied by shedding is still standing: the next request waits queueMs at most, not a second',
  async () => {
    const { now, admission, events, waiter } = busyWorker();
    admission.admit(waiter('a', 2, 0));
    admission.admit(waiter('b', 2, 0));
    now.t = 1_200;
    await sweep();
    assert.equal(events, ['start running', 'shed b waited', 'shed a waited']);
    admission.admit(waiter('c', 2, 1_200));
    now.t = 1_350;
    admission.finish(1_350, 1);
    assert.equal(events.slice(3), ['shed c waited'], '150 ms in a backlog the worker never caught up with');
    admission.admit(waiter('d', 2, 1_350)); // a slot is free and nothing waits: the worker has caught up
    now.t = 1_400;
    admission.admit(waiter('e', 2, 1_400));
    now.t = 1_900;
    admission.finish(550, 1);
    assert.equal(events.slice(4), ['start d', 'start e'], 'a burst again: 500 ms of wait is served');
    admission.close();
  },
);

Queue('while its oldest has waited under queueMs a class is served in order; past it, newest first', () => {
  const { now, admission, events, waiter } = busyWorker();
  admission.admit(waiter('a', 2, 0));
  admission.admit(waiter('b', 2, 10));
  now.t = 50;
  admission.finish(50, 1);
  assert.equal(events, ['start running', 'start a'], 'in order');
  admission.admit(waiter('c', 2, 150));
  now.t = 160;
  admission.finish(110, 1);
  assert.equal(events.slice(2), ['start c'], 'b has waited 150 ms: the newest goes first');
  now.t = 170;
  admission.finish(10, 1);
  assert.equal(events.slice(3), ['start b'], 'still within its patience (a burst: a second)');
  admission.close();
});

Limit.run();
Queue.run();
