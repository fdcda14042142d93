import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { spawn } from 'node:child_process';
const s = suite('kills shared redis, leaves a sleep behind');
s('kills', async () => {
  spawn('sleep', ['300'], { stdio: 'ignore' }).unref();
  const pid = Number((await import('node:child_process')).execSync(`ps -eo pid,args | awk '/redis-server 127.0.0.1:${process.env.TEST_REDIS_PORT}$/ {print $1}'`).toString().trim());
  process.kill(pid, 'SIGKILL');
  assert.ok(pid > 0);
});
s.run();
