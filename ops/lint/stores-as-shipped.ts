// Repository checks, run by `npm run lint` (node --import tsx ops/lint/stores-as-shipped.ts):
// docs/testing.md "Stores as shipped": a Redis without the password and the service's ACL user
// cannot be started by a test, a benchmark or the service unless it says why. Both guards are the
// lint's own: the eslint rule against a redis-server spawned by hand, and the type of startRedis's
// options: the type checker (the lint's last step, over this file too) fails when a line below
// marked as an expected type error is not one.
// A failed check prints its suite, test and message, and the script exits non-zero.
import { fileURLToPath } from 'node:url';
import { ESLint } from 'eslint';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { RedisOptions } from '../../src/embedded/redis.js';

// eslint.config.js is the repository's, whichever folder the script is started from.
process.chdir(fileURLToPath(new URL('../../', import.meta.url)));

const test = suite('a test cannot start a Redis unlike the one npm start runs without saying so');

test('the lint refuses a redis-server spawned by hand in a test, a benchmark or the service', async () => {
  const eslint = new ESLint();
  const source = "import { spawn } from 'node:child_process';\nspawn('redis-server', ['--port', '6390']);\n";
  for (const filePath of ['test/int/some.int.test.ts', 'ops/bench/some.ts', 'src/stores/other.ts']) {
    const [result] = await eslint.lintText(source, { filePath });
    const messages = result!.messages.map((message) => message.message);
    assert.ok(
      messages.some((message) => message.startsWith('Start Redis with startRedis')),
      `${filePath}: ${JSON.stringify(messages)}`,
    );
  }
});

test('startRedis takes a password, or a reason for having none; the type checker refuses neither', () => {
  const shipped: RedisOptions = { dataDir: 'redis', port: 6390, persistent: false, password: 'a-password' };
  const marked: RedisOptions = { dataDir: 'redis', port: 6390, persistent: false, withoutPassword: 'its absence' };
  // @ts-expect-error a Redis with no password must say why (the lint's type check runs over this file)
  const unmarked: RedisOptions = { dataDir: 'redis', port: 6390, persistent: false };
  // @ts-expect-error a password and a reason for none contradict each other
  const both: RedisOptions = { dataDir: 'redis', port: 6390, persistent: false, password: 'p', withoutPassword: 'w' };
  assert.equal(
    [shipped.password, marked.withoutPassword, unmarked.port, both.port],
    ['a-password', 'its absence', 6390, 6390],
  );
});

test.run();
