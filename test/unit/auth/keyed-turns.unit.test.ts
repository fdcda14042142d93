import { setTimeout as sleep } from 'node:timers/promises';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { KeyedTurns, TurnTimeoutError } from '../../../src/auth/unknown-tokens.js';

// docs/architecture.md "Bounded work": token lookups of one address take turns, and a turn that has
// not come within its wait is given up (the request is answered 503) instead of queueing without end.

const WAIT_MS = 40;
const Turns = suite('token lookups of one address take turns, each waited for a bounded time');

Turns('given a holder, when it releases, the next in line gets its turn', async () => {
  const turns = new KeyedTurns(WAIT_MS);
  const release = await turns.enter('anon 203.0.113.1');
  let entered = false;
  const next = turns.enter('anon 203.0.113.1').then((end) => ((entered = true), end));
  await sleep(1);
  assert.is(entered, false, 'waits while the first holds its turn');
  release();
  (await next)();
  assert.ok(entered);
});

Turns('given a holder past the wait, the one waiting gives up; the next still waits for the holder', async () => {
  const turns = new KeyedTurns(WAIT_MS);
  const release = await turns.enter('anon 203.0.113.1');
  const startedAt = performance.now();
  const refused = await turns.enter('anon 203.0.113.1').catch((error: unknown) => error);
  assert.instance(refused, TurnTimeoutError);
  assert.ok(performance.now() - startedAt >= WAIT_MS - 1, 'given up only after the wait');
  let entered = false;
  const next = turns.enter('anon 203.0.113.1').then((end) => ((entered = true), end));
  await sleep(1);
  assert.is(entered, false, 'a newcomer still waits for the holder, not for the one that gave up');
  release();
  (await next)();
  assert.ok(entered);
  (await turns.enter('anon 203.0.113.1'))();
});

Turns('another address never waits for this one', async () => {
  const turns = new KeyedTurns(WAIT_MS);
  await turns.enter('anon 203.0.113.1');
  (await turns.enter('anon 203.0.113.2'))();
});

Turns.run();
