import { ESLint } from 'eslint';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import type { RedisOptions } from '../../../src/embedded/redis.js';

// docs/testing.md "Stores as shipped": a Redis without the password and the service's ACL user
// cannot be started by a test unless the test says why.

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
  // @ts-expect-error a Redis with no password must say why (npm test runs the type checker over this file)
  const unmarked: RedisOptions = { dataDir: 'redis', port: 6390, persistent: false };
  // @ts-expect-error a password and a reason for none contradict each other
  const both: RedisOptions = { dataDir: 'redis', port: 6390, persistent: false, password: 'p', withoutPassword: 'w' };
  assert.equal(
    [shipped.password, marked.withoutPassword, unmarked.port, both.port],
    ['a-password', 'its absence', 6390, 6390],
  );
});

test.run();
