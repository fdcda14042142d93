import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { newRedisPassword, startRedis } from '../../../src/embedded/redis.js';
import { createThrottler, throttleKey } from '../../../src/throttle/consume.js';
import { parseRate } from '../../../src/throttle/rate.js';
import type { ScopeRule } from '../../../src/throttle/scopes.js';
import { privateRedisOptions } from '../../helpers/private-redis.js';
import { startTcpRelay, type TcpRelay } from '../../helpers/tcp-relay.js';

// THROTTLE_TIMEOUT_MS against a Redis 40 ms away (a delaying proxy on loopback): the worker's own
// event-loop lag must not turn checks into store errors, and a call Redis starts too late to
// answer in time must record nothing.

const PREFIX = `test:throttle-deadline:${process.pid}:`;
const RULE: ScopeRule = { scope: 'anon', rate: parseRate('100/min'), keyedBy: 'ip' };
const ONE_WAY_MS = 40;

const Deadline = suite("the throttle check's deadline with a distant Redis");
let proxy: TcpRelay;
let server: Awaited<ReturnType<typeof startRedis>>;
let redis: Redis;

/** The Redis URL, credentials included, with the delaying proxy's port. */
const throughProxy = () => Object.assign(new URL(server.url), { port: String(proxy.port) }).href;

Deadline.before(async () => {
  // a private server: the second test pauses it
  // The test pauses it as an operator would (CLIENT PAUSE), which the service's user may not.
  server = await startRedis({
    ...(await privateRedisOptions('throttle-deadline')),
    operatorPassword: newRedisPassword(),
  });
  proxy = await startTcpRelay(server.url, { delayMs: ONE_WAY_MS });
  redis = new Redis(server.url);
});

Deadline.after(async () => {
  await proxy.close();
  redis.disconnect();
  await server.stop();
});

/**
 * Checks until three have been answered in time (the first may not be: the connection, the ready
 * check and loading the script take round trips of their own), so the link is learnt.
 */
async function warmUp(throttler: ReturnType<typeof createThrottler>, ident: string): Promise<void> {
  let answered = 0;
  for (let attempt = 0; answered < 3; attempt += 1) {
    if (attempt === 20) throw new Error('the throttle never answered through the proxy');
    await throttler.consume([{ rule: RULE, ident }]).then(
      () => (answered += 1),
      () => {},
    );
  }
}

/** Blocks this process's event loop for `ms`, as a burst of CPU work does. */
function busy(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until);
}

Deadline("a call sent late by this process's own lag is still decided, with the round trip it needs", async () => {
  const link = new Redis(throughProxy());
  const throttler = createThrottler({ redis: link, keyPrefix: PREFIX, timeoutMs: 250 });
  try {
    await warmUp(throttler, 'ip:10.1.0.1');
    const checks = Array.from({ length: 3 }, (_, i) => throttler.consume([{ rule: RULE, ident: `ip:10.1.1.${i}` }]));
    busy(300); // the deadline passes before the call is even sent
    const outcomes = await Promise.allSettled(checks);
    assert.equal(
      outcomes.map((o) => o.status === 'fulfilled' && o.value[0]?.allowed),
      [true, true, true],
    );
  } finally {
    link.disconnect();
  }
});

Deadline('a call Redis can start only after the worker has given up records nothing', async () => {
  const link = new Redis(throughProxy());
  const throttler = createThrottler({ redis: link, keyPrefix: PREFIX, timeoutMs: 250 });
  try {
    await warmUp(throttler, 'ip:10.2.0.1');
    const admin = new Redis(server.operatorUrl!);
    try {
      await admin.client('PAUSE', 600, 'ALL'); // the call waits in Redis past 250 ms
    } finally {
      admin.disconnect();
    }
    const ident = 'ip:10.2.1.1';
    const outcome = await throttler.consume([{ rule: RULE, ident }]).then(
      () => 'decided',
      (error: Error) => error.message,
    );
    assert.is(outcome, 'throttle store did not answer within 250 ms');
    await sleep(800); // Redis has run it by now
    assert.is(
      await redis.exists(throttleKey(PREFIX, { rule: RULE, ident })),
      0,
      'nothing recorded for the refused check',
    );
  } finally {
    link.disconnect();
  }
});

Deadline.run();
