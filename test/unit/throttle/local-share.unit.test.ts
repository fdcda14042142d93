import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { createMetrics } from '../../../src/base/metrics.js';
import { LOCAL_SLOTS, LocalLogs, localShare } from '../../../src/throttle/local-logs.js';
import { LocalShare } from '../../../src/throttle/local-share.js';
import { parseRate } from '../../../src/throttle/rate.js';
import type { ScopeRule } from '../../../src/throttle/scopes.js';
import type { Check } from '../../../src/throttle/throttler.js';

// While Redis is unreachable each web worker enforces its share of every limit alone
// (docs/throttling.md "When Redis is unreachable"): the arithmetic of the share, the in-memory
// sliding log that enforces it, and the degraded mode a worker enters and leaves once each.

const rule = (rate: string, scope = 'anon'): ScopeRule => ({ scope, rate: parseRate(rate), keyedBy: 'ip' });
const check = (r: ScopeRule, ident = 'ip:192.0.2.1'): Check => ({ rule: r, ident });

const Share = suite('the share of a limit one worker enforces');

Share('the limit divided by the workers, rounded, at least one request', () => {
  assert.is(localShare(10, 2), 5);
  assert.is(localShare(20, 3), 7);
  assert.is(localShare(10, 4), 3);
  assert.is(localShare(100, 16), 6);
  assert.is(localShare(1, 4), 1, 'a worker always admits something: a good client is served');
  assert.is(localShare(20, 1), 20, 'one worker: the whole limit');
  assert.is(localShare(20, 0), 20, 'no count: as one worker');
});

Share(
  'spread over every worker, a client gets at most 1.5 times its limit when the limit is at least the workers',
  () => {
    for (let limit = 1; limit <= 300; limit += 1)
      for (let workers = 1; workers <= limit; workers += 1) {
        const total = workers * localShare(limit, workers);
        assert.ok(total <= limit + workers / 2, `${limit} over ${workers}: ${total}`);
        assert.ok(total <= 1.5 * limit, `${limit} over ${workers}: ${total}`);
      }
  },
);

Share.run();

const Logs = suite('the in-memory sliding log of a worker');

Logs('admits its share in a window, then refuses until the oldest admission has left it', () => {
  const logs = new LocalLogs();
  const anon = rule('10/5s');
  const answers = Array.from({ length: 7 }, (_, i) => logs.consume([check(anon)], 2, 1_000 + i)[0]!);
  assert.equal(
    answers.map((d) => [d.allowed, d.remaining]),
    [
      [true, 4],
      [true, 3],
      [true, 2],
      [true, 1],
      [true, 0],
      [false, 0],
      [false, 0],
    ],
  );
  const refused = answers[5]!;
  assert.equal([refused.limit, refused.windowMs, refused.local, refused.degraded], [10, 5_000, true, true]);
  // The first admission (t = 1000) sits in the slot [1000, 1500): forgotten once that slot has left the window.
  assert.is(refused.resetMs, 1_500 + 5_000 - 1_005);
  assert.is(refused.retryAfterS, Math.ceil(refused.resetMs / 1000));
  assert.is(logs.consume([check(anon)], 2, 6_499)[0]!.allowed, false, 'not before');
  const again = logs.consume([check(anon)], 2, 6_500)[0]!;
  assert.equal([again.allowed, again.remaining], [true, 4], 'then the whole share: all five left together');
});

Logs('never admits more than the share in any window, and forgets an admission at most a tenth late', () => {
  const logs = new LocalLogs();
  const anon = rule('12/4s');
  const share = localShare(12, 3);
  let seed = 7;
  const random = () => (seed = (seed * 16_807) % 2_147_483_647) / 2_147_483_647;
  const admitted: number[] = [];
  for (let now = 0; now < 60_000; now += Math.floor(random() * 120)) {
    const decision = logs.consume([check(anon)], 3, now)[0]!;
    if (decision.allowed) admitted.push(now);
    else
      assert.ok(
        admitted.filter((t) => t > now - 4_000 - 4_000 / LOCAL_SLOTS).length >= share,
        `refused at ${now} with fewer than ${share} admitted in the window and a tenth`,
      );
    assert.ok(admitted.filter((t) => t > now - 4_000).length <= share, `at ${now}`);
  }
  // A share is admitted again at most a tenth of a window and one gap between requests after the window.
  const least = Math.floor(60_000 / (4_000 + 4_000 / LOCAL_SLOTS + 120)) * share;
  assert.ok(admitted.length >= least, `the flood was admitted at its share's pace: ${admitted.length} of ${least}`);
});

Logs('a request is admitted only if every check has room, and then recorded in each', () => {
  const logs = new LocalLogs();
  const [wide, narrow] = [rule('10/min', 'anon'), rule('2/min', 'docs')];
  const both = [check(wide), check(narrow)];
  assert.ok(logs.consume(both, 1, 0).every((d) => d.allowed));
  assert.ok(logs.consume(both, 1, 1).every((d) => d.allowed));
  const third = logs.consume(both, 1, 2);
  assert.equal(
    third.map((d) => [d.scope, d.allowed, d.remaining]),
    [
      ['anon', true, 8],
      ['docs', false, 0],
    ],
    'refused by docs; anon had room and counts the request as not made',
  );
  assert.is(logs.consume([check(wide)], 1, 3)[0]!.remaining, 7, 'the refused request was recorded nowhere');
});

Logs('holds at most its maximum of clients, dropping the one used longest ago', () => {
  const logs = new LocalLogs(3);
  const anon = rule('1/min');
  for (const ident of ['ip:a', 'ip:b', 'ip:c']) logs.consume([check(anon, ident)], 1, 0);
  assert.is(logs.consume([check(anon, 'ip:a')], 1, 1)[0]!.allowed, false, 'a is used again: the most recent');
  logs.consume([check(anon, 'ip:d')], 1, 2);
  assert.is(logs.size, 3);
  assert.is(logs.consume([check(anon, 'ip:a')], 1, 3)[0]!.allowed, false, 'a was kept');
  assert.is(logs.consume([check(anon, 'ip:b')], 1, 4)[0]!.allowed, true, 'b, used longest ago, was dropped');
  for (let i = 0; i < 1_000; i += 1) logs.consume([check(anon, `ip:${i}`)], 1, 5);
  assert.is(logs.size, 3);
});

Logs('a rule with another window starts the log afresh; clear() forgets everything', () => {
  const logs = new LocalLogs();
  logs.consume([check(rule('1/min'))], 1, 0);
  assert.is(logs.consume([check(rule('1/min'))], 1, 1)[0]!.allowed, false);
  assert.is(logs.consume([check(rule('1/2min'))], 1, 2)[0]!.allowed, true);
  logs.clear();
  assert.is(logs.size, 0);
  assert.is(logs.consume([check(rule('1/2min'))], 1, 3)[0]!.allowed, true);
});

Logs.run();

const Mode = suite('the degraded mode of one worker');

Mode('entered by the first local decision and left by the first answer from Redis, each said once', async () => {
  const metrics = createMetrics();
  const lines: Array<[object, string]> = [];
  const census = { workers: 2, isCounted: true };
  let now = 0;
  const share = new LocalShare({
    census,
    logger: { warn: (fields: object, message: string) => lines.push([fields, message]) } as never,
    metrics,
    now: () => now,
  });
  const degraded = async () => (await metrics.throttleDegraded.get()).values[0]?.value;
  assert.is(await degraded(), 0);
  share.answered();
  assert.is(lines.length, 0, 'nothing to leave');
  const anon = rule('10/min');
  const answers = Array.from({ length: 8 }, () => share.consume([check(anon)])[0]!);
  assert.is(answers.filter((d) => d.allowed).length, 5, 'half of 10 with two workers');
  assert.ok(share.isDegraded);
  assert.is(await degraded(), 1);
  assert.is(lines.length, 1, 'one line for eight decisions');
  assert.equal(lines[0]![0], { workers: 2, counted: true });
  now = 3_000;
  share.answered();
  share.answered();
  assert.not.ok(share.isDegraded);
  assert.is(await degraded(), 0);
  assert.is(lines.length, 2, 'one line to leave');
  assert.equal(lines[1]![0], { localDecisions: 8, degradedS: 3 });
  assert.is(share.consume([check(anon)])[0]!.remaining, 4, 'the next outage starts with logs of its own');
  assert.is(lines.length, 3);
});

Mode.run();
