import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { createHashBudget } from '../../../src/auth/hash-budget.js';

// docs/security.md "Login CPU budget": at most `concurrency` hashes at once; a free slot goes to
// the waiting client with the fewest recent failures plus attempts under way, a client whose last
// attempt succeeded first; past the wait, a refusal with Retry-After.

/** A piece of work that finishes when the test says so, and records that it started. */
function gate(started: string[], name: string) {
  let finish!: () => void;
  const done = new Promise<void>((resolve) => (finish = resolve));
  return {
    work: async () => {
      started.push(name);
      await done;
      return name;
    },
    finish: () => finish(),
  };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

const Budget = suite('the login CPU budget');

Budget('given one slot taken, when a flooder and a client that has logged in wait, the client goes first', async () => {
  const budget = createHashBudget({ concurrency: 1, waitMs: 60_000 });
  budget.settle('good', true);
  for (let i = 0; i < 3; i++) budget.settle('flood', false);
  const started: string[] = [];
  const first = gate(started, 'first');
  const floods = [1, 2, 3].map((i) => gate(started, `flood-${i}`));
  const good = gate(started, 'good');
  const running = [budget.run('other', first.work), ...floods.map((f) => budget.run('flood', f.work))];
  const goodTurn = budget.run('good', good.work);
  await tick();
  assert.equal(started, ['first'], 'one at a time');
  first.finish();
  await running[0];
  await tick();
  assert.equal(started, ['first', 'good'], 'the client with a success goes ahead of earlier flood attempts');
  good.finish();
  assert.equal(await goodTurn, { ok: true, value: 'good' });
  for (const f of floods) f.finish();
  await Promise.all(running);
  assert.equal(started, ['first', 'good', 'flood-1', 'flood-2', 'flood-3']);
});

Budget('given equal histories, the client with fewer attempts under way goes first, then arrival order', async () => {
  const budget = createHashBudget({ concurrency: 1, waitMs: 60_000 });
  const started: string[] = [];
  const gates = ['busy', 'a1', 'a2', 'a3', 'b1'].map((name) => gate(started, name));
  const clients = ['x', 'a', 'a', 'a', 'b'];
  const turns = gates.map((g, i) => budget.run(clients[i]!, g.work));
  for (const g of gates) {
    await tick();
    g.finish();
    await tick();
  }
  await Promise.all(turns);
  assert.equal(started, ['busy', 'b1', 'a1', 'a2', 'a3']);
});

Budget('given two slots, a flood gets one; the other is kept for a client whose last login succeeded', async () => {
  let inFlightPeak = 0;
  let refused = 0;
  const budget = createHashBudget({
    concurrency: 2,
    waitMs: 20,
    observer: {
      changed: (inFlight) => (inFlightPeak = Math.max(inFlightPeak, inFlight)),
      finished: () => {},
      refused: () => (refused += 1),
    },
  });
  budget.settle('good', true);
  const started: string[] = [];
  const held = gate(started, 'flood');
  const running = budget.run('x', held.work);
  const late = await budget.run('y', async () => 'never');
  assert.equal(late, { ok: false, retryAfterS: 1 }, 'past the wait: refused, with Retry-After');
  assert.equal([started, refused], [['flood'], 1]);
  const good = gate(started, 'good');
  const goodTurn = budget.run('good', good.work);
  await tick();
  assert.equal([started, inFlightPeak], [['flood', 'good'], 2]);
  good.finish();
  held.finish();
  assert.equal(await goodTurn, { ok: true, value: 'good' });
  await running;
});

Budget.run();
