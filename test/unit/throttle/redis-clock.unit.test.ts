import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { createRedisClock } from '../../../src/throttle/redis-clock.js';

// The throttler turns the moment it gives up into Redis's clock with this estimate, less the
// quickest round trip: a call Redis starts later records nothing. The estimate must follow the
// quickest calls, and follow Redis's clock when it steps.

const Clock = suite("what the quickest recent calls show of Redis's clock");

Clock('nothing before the first answer; then the least offset and round trip of the last two spans', () => {
  const clock = createRedisClock();
  assert.is(clock.estimate(), undefined);
  clock.sample(0, 1_000.75, 1.5); // offset 1000.75, round trip 1.5
  clock.sample(10, 1_010.25, 10.5); // 1000.25, 0.5
  clock.sample(20, 1_023, 29); // 1003, 9
  assert.equal(clock.estimate(), { offsetMs: 1_000.25, roundTripMs: 0.5 }, 'the quickest figures seen');
  clock.sample(10_500, 11_504, 10_502);
  assert.equal(clock.estimate(), { offsetMs: 1_000.25, roundTripMs: 0.5 }, 'the previous span still counts');
  clock.sample(21_000, 22_004.5, 21_003);
  assert.equal(
    clock.estimate(),
    { offsetMs: 1_004, roundTripMs: 2 },
    'two spans on, the old samples are gone: a forward step is followed',
  );
});

Clock('a backward step is followed at once; reset forgets everything before it', () => {
  const clock = createRedisClock();
  clock.sample(0, 5_000, 1);
  clock.sample(5, 2_005, 6);
  assert.equal(clock.estimate(), { offsetMs: 2_000, roundTripMs: 1 });
  clock.reset(6, 9_006, 9);
  assert.equal(clock.estimate(), { offsetMs: 9_000, roundTripMs: 3 });
  clock.sample(7, 9_007.5, 8);
  assert.equal(clock.estimate(), { offsetMs: 9_000, roundTripMs: 1 });
});

Clock.run();
