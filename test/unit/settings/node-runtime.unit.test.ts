import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { NODE_MAJOR, runtimeProblem } from '../../../src/settings/node-runtime.js';

// docs/operations.md "Upgrading the runtime": the entry points stop in one line on another Node.js line.

test(`Node.js ${NODE_MAJOR} at any minor runs`, () => {
  assert.is(runtimeProblem(`${NODE_MAJOR}.0.0`, '/usr/bin/node'), undefined);
  assert.is(runtimeProblem(`${NODE_MAJOR}.99.1`, '/usr/bin/node'), undefined);
  assert.is(runtimeProblem(process.versions.node, process.execPath), undefined, 'the runtime running this test');
});

test('an older or a newer line is refused in one line that names both and what to do', () => {
  for (const version of ['20.20.2', `${NODE_MAJOR - 1}.12.0`, `${NODE_MAJOR + 2}.1.0`]) {
    const problem = runtimeProblem(version, '/usr/bin/node');
    assert.ok(problem, version);
    assert.not.match(problem!, /\n/);
    assert.match(problem!, `runs on Node.js ${NODE_MAJOR}, and /usr/bin/node is ${version}`);
    assert.match(problem!, 'npm start');
  }
});

test.run();
