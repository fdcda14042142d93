import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { scriptArgs } from '../../helpers/node-script.js';

// `npm run soak` for half a minute (docs/security.md "Soak"): the real entry point with its own throwaway stores
// under a steady mixed load with throttled clients. Over the run no request fails (no 5xx, none
// unanswered), the over-limit clients are answered 429, no child restarts, and Redis's key count
// and each child's RSS stay within the soak's bounds. SOAK_SECONDS changes the length.

const test = suite('soak');
const seconds = Number(process.env.SOAK_SECONDS || 30);

test(`a ${seconds}-second soak: no 5xx, throttled clients throttled, keys and RSS bounded`, async () => {
  const child = spawn(process.execPath, [...scriptArgs('ops/soak/soak.ts'), '--seconds', String(seconds)], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk) => (output += chunk));
  child.stderr.on('data', (chunk) => (output += chunk));
  // Stores and cluster start, the run, and the teardown, with room for a loaded host.
  const timer = setTimeout(() => child.kill('SIGINT'), (seconds + 240) * 1000);
  const [code] = await once(child, 'exit');
  clearTimeout(timer);
  const line = output.split('\n').find((l) => l.startsWith('SOAK '));
  assert.ok(line, `the soak printed its summary:\n${output}`);
  const report = JSON.parse(line!.slice(5));
  assert.equal(report.failures, [], output);
  assert.is(code, 0, output);
  assert.is(report.counts.server, 0, 'no 5xx');
  assert.is(report.counts.unanswered, 0, 'every request answered');
  assert.ok(report.counts.ok > 100, `requests succeeded (${report.counts.ok})`);
  assert.ok(report.counts.throttled > 0, 'the greedy clients were answered 429');
  assert.ok(report.keys.end <= report.keys.bound, `Redis keys ${report.keys.end} within ${report.keys.bound}`);
  for (const child of report.rss)
    assert.ok(child.endMb <= child.boundMb, `child ${child.pid} RSS ${child.endMb} MB within ${child.boundMb} MB`);
});

test.run();
