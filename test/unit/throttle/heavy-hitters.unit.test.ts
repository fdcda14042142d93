import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { mergeHeavyHitters, SpaceSaving, type HeavyHitter } from '../../../src/throttle/heavy-hitters.js';
import { TopClients, WINDOW_SLOTS } from '../../../src/throttle/top-clients.js';

// The heaviest refused clients of a scope, in bounded memory: every count within total / capacity
// of the truth, and every client seen more often than that held (docs/throttling.md "Who is throttled").

const K = 10;
const CAPACITY = 10 * K;

/** A seeded generator (mulberry32): the same stream on every run. */
function seeded(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** `length` draws of Zipf(s) over `clients` keys. */
function zipf(clients: number, s: number, length: number, seed: number): string[] {
  const weights = Array.from({ length: clients }, (_, i) => 1 / (i + 1) ** s);
  const sum = weights.reduce((a, b) => a + b, 0);
  const cumulative: number[] = [];
  let acc = 0;
  for (const weight of weights) cumulative.push((acc += weight / sum));
  const random = seeded(seed);
  return Array.from({ length }, () => {
    const u = random();
    let lo = 0;
    let hi = clients - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((cumulative[mid] as number) < u) lo = mid + 1;
      else hi = mid;
    }
    return `ip:10.0.${lo >> 8}.${lo & 255}`;
  });
}

function truth(stream: readonly string[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const key of stream) counts.set(key, (counts.get(key) ?? 0) + 1);
  return counts;
}

function trueTop(counts: Map<string, number>, k: number): string[] {
  return [...counts]
    .sort((a, b) => b[1] - a[1])
    .slice(0, k)
    .map(([key]) => key);
}

/** Every counter within its stated error and within total / capacity; every true top-k key held. */
function assertWithinBound(entries: HeavyHitter[], counts: Map<string, number>, total: number, k: number): void {
  const bound = total / CAPACITY;
  for (const { key, count, error } of entries) {
    const actual = counts.get(key) ?? 0;
    assert.ok(Math.abs(count - actual) <= error, `${key}: ${count} vs ${actual}, error ${error}`);
    assert.ok(error <= bound, `${key}: error ${error} over N/m = ${bound}`);
  }
  const held = new Map(entries.map((entry) => [entry.key, entry]));
  for (const key of trueTop(counts, k)) {
    if ((counts.get(key) ?? 0) > bound) assert.ok(held.has(key), `${key} (${counts.get(key)}) not held`);
  }
}

const sketch = suite('the heavy-hitters sketch');

sketch('a seeded Zipf stream: the true top 10 are the reported top 10, each within N/m', () => {
  const stream = zipf(20_000, 1.1, 300_000, 28);
  const summary = new SpaceSaving(CAPACITY);
  for (const key of stream) summary.add(key);
  const counts = truth(stream);
  assertWithinBound(summary.entries(), counts, stream.length, K);
  assert.equal(
    new Set(
      summary
        .entries()
        .slice(0, K)
        .map((e) => e.key),
    ),
    new Set(trueTop(counts, K)),
  );
});

/** 5 heavy clients of 2,000 requests each and 100,000 clients of one, in a given order. */
function adversarial(order: 'heavy-first' | 'heavy-last' | 'interleaved'): string[] {
  const heavy = Array.from({ length: 5 }, (_, i) => `ip:192.0.2.${i + 1}`);
  const heavies = heavy.flatMap((key) => Array.from({ length: 2_000 }, () => key));
  const singles = Array.from({ length: 100_000 }, (_, i) => `ip:10.${i >> 16}.${(i >> 8) & 255}.${i & 255}`);
  if (order === 'heavy-first') return [...heavies, ...singles];
  if (order === 'heavy-last') return [...singles, ...heavies];
  // Each heavy request between runs of new clients: the order that evicts most.
  const stream: string[] = [];
  const perGap = singles.length / heavies.length;
  heavies.forEach((key, i) => stream.push(...singles.slice(i * perGap, (i + 1) * perGap), key));
  return stream;
}

for (const order of ['heavy-first', 'heavy-last', 'interleaved'] as const) {
  sketch(`an adversarial order (${order}): the 5 heavy clients are the top 5, each within N/m`, () => {
    const stream = adversarial(order);
    const summary = new SpaceSaving(CAPACITY);
    for (const key of stream) summary.add(key);
    const counts = truth(stream);
    assertWithinBound(summary.entries(), counts, stream.length, 5);
    assert.equal(
      summary
        .entries()
        .slice(0, 5)
        .map((e) => e.key)
        .sort(),
      trueTop(counts, 5).sort(),
    );
  });
}

sketch('summaries of two processes merge within the sum of their bounds', () => {
  const stream = zipf(5_000, 1.2, 100_000, 7);
  const halves = [new SpaceSaving(CAPACITY), new SpaceSaving(CAPACITY)];
  stream.forEach((key, i) => halves[i % 2]?.add(key));
  const merged = mergeHeavyHitters(halves.map((s) => ({ entries: s.entries(), floor: s.floor })));
  assertWithinBound(merged, truth(stream), stream.length, K);
});

sketch('memory stays bounded with 1,000,000 distinct clients', () => {
  let now = 0;
  const top = new TopClients(K, 300_000, () => now);
  for (let i = 0; i < 1_000_000; i++) {
    top.add('anon', `ip:${i >>> 24}.${(i >>> 16) & 255}.${(i >>> 8) & 255}.${i & 255}`);
    now += 1; // 1,000,000 ms: the window moves on while the flood lasts
  }
  const [report] = top.report();
  assert.ok(report);
  assert.ok(report.clients.length <= CAPACITY);
  assert.ok(top.counters() <= WINDOW_SLOTS * CAPACITY, `${top.counters()} counters held`);
});

sketch('a refusal older than the window is forgotten', () => {
  let now = 0;
  const top = new TopClients(K, 60_000, () => now);
  top.add('anon', 'ip:192.0.2.1');
  now = 30_000;
  top.add('anon', 'ip:192.0.2.1');
  assert.equal(top.report()[0]?.clients[0]?.count, 2);
  now = 61_000;
  assert.equal(top.report()[0]?.clients[0]?.count, 1);
  now = 200_000;
  assert.equal(top.report(), []);
});

sketch.run();
