import { mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { findFreePort } from '../../../src/embedded/ports.js';
import { newRedisPassword, startRedis } from '../../../src/embedded/redis.js';
import { embeddedRedisUrl } from '../../../src/stores/redis-service-user.js';
import { keepRunning, type KeptService } from '../../../src/embedded/keep-running.js';

/** The kept servers' password, as `npm start` gives its Redis one: the same across restarts. */
const PASSWORD = newRedisPassword();

// `npm start` without REDIS_URL runs redis-server as its child: one that dies (killed, OOM) must
// come back by itself, or throttling stays off (fail-open) until someone restarts the service.

const TMP = process.env.TEST_TMP_DIR ?? '';
if (!TMP) throw new Error('TEST_TMP_DIR is not set: run tests with `npm test`');

const Keeper = suite('an embedded store that exits on its own is started again');

/** A logger whose lines are kept, as the primary's JSON log. */
type LogLine = { level: number; msg: string; store?: string; exit?: string };

function capturingLogger() {
  const lines: LogLine[] = [];
  const stream = new Writable({
    write(chunk, _encoding, done) {
      for (const line of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(line));
      done();
    },
  });
  return { logger: pino({ level: 'info' }, stream), lines };
}

/** The pid of the redis-server answering on `port`, or undefined when none answers. */
async function serverPid(port: number): Promise<number | undefined> {
  const client = new Redis(embeddedRedisUrl(port, PASSWORD), {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  client.on('error', () => {}); // none answering is an answer here
  try {
    await client.connect();
    return Number(/process_id:(\d+)/.exec(await client.info('server'))?.[1]);
  } catch {
    return undefined;
  } finally {
    client.disconnect();
  }
}

async function waitFor<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

/** A redis-server on a free port kept by keepRunning, with its log lines; stopped and removed after `work`. */
async function withKeptRedis(
  work: (kept: { redis: KeptService; port: number; lines: LogLine[] }) => Promise<void>,
): Promise<void> {
  const dir = await mkdtemp(join(TMP, 'keeper-'));
  const port = await findFreePort();
  const { logger, lines } = capturingLogger();
  const redis = await keepRunning('Redis', logger, (onUnexpectedExit) =>
    startRedis({ dataDir: dir, port, persistent: false, password: PASSWORD, onUnexpectedExit }),
  );
  try {
    await work({ redis, port, lines });
  } finally {
    await redis.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

Keeper('a killed redis-server is back on the same port within seconds, logged as JSON; stop() ends it for good', () =>
  withKeptRedis(async ({ redis, port, lines }) => {
    const first = await waitFor('the first server', () => serverPid(port));
    process.kill(first, 'SIGKILL');
    const second = await waitFor('a new server', async () => {
      const pid = await serverPid(port);
      return pid !== undefined && pid !== first ? pid : undefined;
    });
    assert.ok(second > 0);
    const exit = lines.find((line) => line.msg === 'embedded Redis exited unexpectedly; restarting it');
    assert.equal([exit?.level, exit?.store, exit?.exit], [50, 'Redis', 'SIGKILL']);
    // The new server's process shows before it answers PING; the restart is logged once it does.
    const restarted = await waitFor('the restart logged', async () =>
      lines.some((line) => line.msg === 'embedded Redis restarted') ? true : undefined,
    );
    assert.ok(restarted);
    await redis.stop();
    assert.is(await serverPid(port), undefined, 'stopped for good');
  }),
);

Keeper('stop() during the back-off cancels the restart', () =>
  withKeptRedis(async ({ redis, port, lines }) => {
    process.kill((await serverPid(port))!, 'SIGKILL');
    await waitFor('the exit', async () => ((await serverPid(port)) === undefined ? true : undefined));
    const started = Date.now();
    await redis.stop();
    assert.ok(Date.now() - started < 250, 'stop does not wait for the 500 ms back-off');
    await sleep(1_000);
    assert.is(await serverPid(port), undefined, 'nothing was started after stop()');
    assert.not.ok(
      lines.some((line) => line.msg === 'embedded Redis restarted'),
      'not even started and stopped again',
    );
  }),
);

Keeper('hold(): an exit once shutdown has begun is neither restarted nor logged as an error', () =>
  withKeptRedis(async ({ redis, port, lines }) => {
    redis.hold();
    process.kill((await serverPid(port))!, 'SIGINT');
    await waitFor('the exit', async () => ((await serverPid(port)) === undefined ? true : undefined));
    await sleep(1_000);
    assert.is(await serverPid(port), undefined);
    assert.equal(
      lines.filter((line) => line.level >= 50),
      [],
    );
  }),
);

Keeper("a stop's deadline ends a server that cannot shut down by then, instead of its own 3 s grace", () =>
  withKeptRedis(async ({ redis, port }) => {
    const pid = (await serverPid(port))!;
    process.kill(pid, 'SIGSTOP'); // stopped: it cannot act on SIGTERM, as a server stuck writing its file
    const started = Date.now();
    await redis.stop(started + 800);
    const took = Date.now() - started;
    assert.throws(() => process.kill(pid, 0), /ESRCH/, 'the server is gone');
    // The deadline less the margin kept for the exit (about 550 ms), not the 3,000 ms a stop without one grants.
    assert.ok(took < 2_500, `stopped in ${took} ms`);
  }),
);

Keeper.run();
