import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { scriptArgs } from '../../helpers/node-script.js';

// docs/architecture.md "Observability": access logs are buffered, and the buffer reaches stdout when the process
// ends, whether it is stopped (SIGTERM) or crashes (an uncaught exception).
const flush = suite('buffered access logs reach stdout when the process ends');
const COUNT = 300;

/** Runs the helper in `mode`, returning its exit code and the request ids of its stdout's lines. */
async function run(mode: 'sigterm' | 'crash'): Promise<{ code: number | null; ids: string[] }> {
  const child = spawn(process.execPath, [...scriptArgs('test/helpers/log-then-stop.ts'), mode, String(COUNT)], {
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  let out = '';
  child.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
  if (mode === 'sigterm') {
    await once(child, 'message');
    child.kill('SIGTERM');
  }
  const [code] = (await once(child, 'exit')) as [number | null];
  const ids = out
    .split('\n')
    .filter(Boolean)
    .map((line) => (JSON.parse(line) as { requestId: string }).requestId);
  return { code, ids };
}

const expected = Array.from({ length: COUNT }, (_, index) => `line-${index}`);

flush('after SIGTERM every line logged before the exit is in the output, the last one included', async () => {
  const { code, ids } = await run('sigterm');
  assert.is(code, 0);
  assert.equal(ids, expected);
});

flush('after an uncaught exception every line logged before it is in the output', async () => {
  const { code, ids } = await run('crash');
  assert.is.not(code, 0);
  assert.equal(ids, expected);
});

flush.run();
