import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { createClockOffset } from '../../src/throttle/consume.js';

// The throttler converts its deadline into Redis's clock with this estimate: it must never make
// a deadline early (that would drop checks that were answered in time), and must follow Redis's
// clock when it steps.

const Offset = suite('the estimate of Redis\'s clock against this process\'s');

Offset('none before the first sample; then the quickest call of the last two spans', () => {
  const offset = createClockOffset();
  assert.is(offset.estimate(), undefined);
  offset.sample(1_000.8, 0);
  offset.sample(1_000.2, 10);
  offset.sample(1_003, 20);
  assert.is(offset.estimate(), 1_000.2, 'the least delay seen');
  offset.sample(1_004, 10_500);
  assert.is(offset.estimate(), 1_000.2, 'the previous span still counts');
  offset.sample(1_004.5, 21_000);
  assert.is(offset.estimate(), 1_004, 'two spans later the old samples are gone: a forward step is followed');
});

Offset('a backward step is followed at once; reset forgets everything before it', () => {
  const offset = createClockOffset();
  offset.sample(5_000, 0);
  offset.sample(2_000, 5);
  assert.is(offset.estimate(), 2_000);
  offset.reset(9_000, 6);
  assert.is(offset.estimate(), 9_000);
  offset.sample(9_000.5, 7);
  assert.is(offset.estimate(), 9_000);
});

Offset.run();
