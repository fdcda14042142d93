import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { ConfigError, loadConfig } from '../../../src/settings/config.js';
import { concurrencyFields, concurrencyRefusal } from '../../../src/edge/throttle-answers.js';
import { LocalSlots } from '../../../src/throttle/local-slots.js';

// THROTTLE_CONCURRENCY and THROTTLE_CONCURRENCY_EXPIRY_MS (docs/configuration.md), the fields a
// concurrency limit adds (docs/throttling.md "Concurrency limits") and a worker's share of it.

const test = suite('concurrency limit settings');

/** The ConfigError `env` stops a start with. */
function refusalOf(env: Record<string, string>): Error | undefined {
  try {
    loadConfig(env);
  } catch (error) {
    return error as Error;
  }
  return undefined;
}

test('given no setting, when loaded, then no scope is limited and an entry counts at most 60 s', () => {
  const config = loadConfig({});
  assert.equal(config.THROTTLE_CONCURRENCY, {});
  assert.is(config.THROTTLE_CONCURRENCY_EXPIRY_MS, 60_000);
});

test('given scope=N pairs, when loaded, then each scope gets its limit as a number', () => {
  const config = loadConfig({
    THROTTLE_CONCURRENCY: ' user=4, exports=1,anon=10 ,',
    THROTTLE_CONCURRENCY_EXPIRY_MS: '45000',
  });
  assert.equal(config.THROTTLE_CONCURRENCY, { user: 4, exports: 1, anon: 10 });
  assert.is(config.THROTTLE_CONCURRENCY_EXPIRY_MS, 45_000);
});

test('given a bad value, when loaded, then the start stops with one line naming it', () => {
  const cases: Array<[Record<string, string>, string]> = [
    [
      { THROTTLE_CONCURRENCY: 'user' },
      'invalid THROTTLE_CONCURRENCY="user": expected scope=N pairs separated by commas',
    ],
    [{ THROTTLE_CONCURRENCY: 'User=2' }, 'expected scope=N pairs separated by commas, got "User=2"'],
    [{ THROTTLE_CONCURRENCY: 'user=2=3' }, 'expected scope=N pairs separated by commas, got "user=2=3"'],
    [{ THROTTLE_CONCURRENCY: 'user=0' }, 'expected a whole number from 1 to 10000, got "user=0"'],
    [{ THROTTLE_CONCURRENCY: 'user=1.5' }, 'expected a whole number from 1 to 10000, got "user=1.5"'],
    [{ THROTTLE_CONCURRENCY: 'user=10001' }, 'expected a whole number from 1 to 10000, got "user=10001"'],
    [{ THROTTLE_CONCURRENCY: 'login=1' }, 'the login scope counts usernames; limit its route by token-obtain'],
    [{ THROTTLE_CONCURRENCY_EXPIRY_MS: '50' }, 'invalid THROTTLE_CONCURRENCY_EXPIRY_MS="50"'],
  ];
  for (const [env, message] of cases) {
    const error = refusalOf(env);
    assert.instance(error, ConfigError, JSON.stringify(env));
    assert.ok(error!.message.includes(message), `${JSON.stringify(env)}: ${error!.message}`);
    assert.not.match(error!.message, /\n/);
  }
});

test('given settings that contradict, when loaded, then the start names the rule they break', () => {
  assert.is(
    refusalOf({ THROTTLE_CONCURRENCY: 'user=2', THROTTLE_CONCURRENCY_EXPIRY_MS: '20000' })?.message,
    'invalid THROTTLE_CONCURRENCY_EXPIRY_MS="20000": must not be below HTTP_REQUEST_TIMEOUT_MS (30000) while ' +
      'THROTTLE_CONCURRENCY is set',
  );
  assert.is(
    refusalOf({ THROTTLE_CONCURRENCY: 'reports=1', THROTTLE_SHADOW_SCOPES: 'reports' })?.message,
    'invalid THROTTLE_CONCURRENCY="reports=1": the reports scope runs wholly in shadow (THROTTLE_SHADOW_SCOPES), ' +
      'which never refuses; give it no concurrency limit',
  );
  // Without a limit the bound means nothing, and with a short request timeout a short bound holds.
  assert.is(loadConfig({ THROTTLE_CONCURRENCY_EXPIRY_MS: '20000' }).THROTTLE_CONCURRENCY_EXPIRY_MS, 20_000);
  const short = { HTTP_HEADERS_TIMEOUT_MS: '2000', HTTP_REQUEST_TIMEOUT_MS: '2000' };
  assert.is(
    loadConfig({ ...short, THROTTLE_CONCURRENCY: 'user=2', THROTTLE_CONCURRENCY_EXPIRY_MS: '2000' })
      .THROTTLE_CONCURRENCY_EXPIRY_MS,
    2_000,
  );
});

test('given a limit, when answered, then the fields use the draft quota unit and the 429 waits 1 second', () => {
  assert.equal(concurrencyFields('user:concurrent', 4, 3), {
    policy: '"user:concurrent";q=4;qu="concurrent-requests"',
    state: '"user:concurrent";r=3',
  });
  const answer = concurrencyRefusal('user:concurrent', 4, true);
  assert.equal(answer.fields, [
    'RateLimit-Policy',
    '"user:concurrent";q=4;qu="concurrent-requests"',
    'RateLimit',
    '"user:concurrent";r=0',
    'Paceline-Throttle',
    'local',
    'Retry-After',
    '1',
    'Content-Type',
    'application/json; charset=utf-8',
  ]);
  assert.is(answer.body.toString(), '{"detail":"Request was throttled. Expected available in 1 second."}');
});

test('given Redis unreachable, when a worker decides alone, then it admits its share until released', async () => {
  const census = { workers: 2 };
  const slots = new LocalSlots(census);
  const request = { scope: 'user', ident: 'user:7', limit: 4 };
  const held = [slots.acquire(request), slots.acquire(request)];
  assert.equal(
    held.map((slot) => [slot.admitted, slot.remaining, slot.degraded]),
    [
      [true, 1, true],
      [true, 0, true],
    ],
  );
  assert.is(slots.acquire(request).admitted, false, 'a third is past the share of 4 / 2 workers');
  assert.is(slots.acquire({ ...request, ident: 'user:8' }).admitted, true, 'another client has its own share');
  await held[0]!.release();
  await held[0]!.release();
  assert.is(slots.acquire(request).admitted, true, 'a released slot is free again, once');
  assert.is(slots.acquire(request).admitted, false);
  census.workers = 8;
  assert.is(slots.acquire({ ...request, ident: 'user:9' }).admitted, true, 'at least 1 per worker');
  assert.is(slots.acquire({ ...request, ident: 'user:9' }).admitted, false);
});

test.run();
