import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import type { Decision } from '../../../src/throttle/throttler.js';
import { longestWait, rateLimitHeaders, throttledDetail } from '../../../src/edge/throttle-answers.js';
import { clientIp, ipKey } from '../../../src/throttle/identity.js';
import { parseRate } from '../../../src/throttle/rate.js';
import { buildScopes } from '../../../src/throttle/scopes.js';

const rates = suite('a configured rate reads as N per window');

rates('the units of docs/architecture.md "Throttling", short, long and plural', () => {
  const cases: Array<[string, number, number]> = [
    ['20/min', 20, 60_000],
    ['100/m', 100, 60_000],
    ['5/minute', 5, 60_000],
    ['5/minutes', 5, 60_000],
    ['3/s', 3, 1_000],
    ['3/sec', 3, 1_000],
    ['3/second', 3, 1_000],
    ['3/seconds', 3, 1_000],
    ['10/hour', 10, 3_600_000],
    ['10/h', 10, 3_600_000],
    ['10/hours', 10, 3_600_000],
    ['1000/day', 1000, 86_400_000],
    ['1000/d', 1000, 86_400_000],
    ['1000/days', 1000, 86_400_000],
  ];
  for (const [text, limit, windowMs] of cases) {
    assert.equal(parseRate(text), { limit, windowMs, text }, text);
  }
});

rates('a multiple of the unit: N/<k><unit>', () => {
  assert.equal(parseRate('300/5m'), { limit: 300, windowMs: 300_000, text: '300/5m' });
  assert.equal(parseRate('3/2s'), { limit: 3, windowMs: 2_000, text: '3/2s' });
  assert.equal(parseRate('10/12hours'), { limit: 10, windowMs: 43_200_000, text: '10/12hours' });
});

rates('surrounding whitespace is ignored, the text is kept as given', () => {
  assert.equal(parseRate(' 20/min\n'), { limit: 20, windowMs: 60_000, text: ' 20/min\n' });
});

rates('bad rates are refused with the expected syntax in the message', () => {
  const bad = [
    '',
    '20',
    '/min',
    '20/',
    '0/min',
    '20/0m',
    '-1/min',
    '1.5/min',
    '20/fortnight',
    '20/M',
    '20 / min',
    '20/min/x',
    'abc/min',
    '20/5',
    '100001/s',
    '1/367d',
  ];
  for (const text of bad) {
    assert.throws(
      () => parseRate(text),
      (error: Error) => error.message.startsWith(`invalid rate ${JSON.stringify(text)}: expected N/<unit>`),
      text,
    );
  }
});

const scopes = suite('the scope table is built from config');

scopes('the four scopes of docs/architecture.md "Throttling" know what they are keyed by', () => {
  const table = buildScopes({ anon: '20/min', user: '100/min', 'token-obtain': '5/min', reports: '10/hour' });
  assert.equal(table.get('anon'), { scope: 'anon', rate: parseRate('20/min'), keyedBy: 'ip' });
  assert.equal(table.get('token-obtain')?.keyedBy, 'ip');
  assert.equal(table.get('user')?.keyedBy, 'user');
  assert.equal(table.get('reports')?.rate, { limit: 10, windowMs: 3_600_000, text: '10/hour' });
});

scopes('another scope must say what it is keyed by; a bad rate or name is refused', () => {
  assert.equal(buildScopes({ exports: '2/day' }, { exports: 'user' }).get('exports')?.keyedBy, 'user');
  assert.throws(() => buildScopes({ exports: '2/day' }), /needs keyedBy/);
  assert.throws(() => buildScopes({ anon: 'lots' }), /invalid rate "lots"/);
  assert.throws(() => buildScopes({ 'a}b': '1/s' }, { 'a}b': 'ip' }), /invalid throttle scope name/);
});

const identity = suite('the client IP is the socket unless trusted proxies say otherwise');

identity('with 0 hops X-Forwarded-For is ignored, so it cannot be spoofed', () => {
  assert.is(clientIp('203.0.113.9', '10.9.8.7', 0), '203.0.113.9');
  assert.is(clientIp('203.0.113.9', undefined, 0), '203.0.113.9');
});

identity('with N hops the client is the N-th address from the right', () => {
  assert.is(clientIp('10.0.0.1', '198.51.100.7', 1), '198.51.100.7');
  assert.is(clientIp('10.0.0.1', 'spoofed, 198.51.100.7', 1), '198.51.100.7');
  assert.is(clientIp('10.0.0.2', 'spoofed, 198.51.100.7, 10.0.0.1', 2), '198.51.100.7');
  assert.is(clientIp('10.0.0.2', '198.51.100.7 ,  10.0.0.1', 2), '198.51.100.7');
});

identity('a header too short, absent or not an address falls back to the socket', () => {
  assert.is(clientIp('10.0.0.2', '198.51.100.7', 2), '10.0.0.2');
  assert.is(clientIp('10.0.0.2', undefined, 2), '10.0.0.2');
  assert.is(clientIp('10.0.0.2', '', 1), '10.0.0.2');
  assert.is(clientIp('10.0.0.2', 'unknown', 1), '10.0.0.2');
  assert.is(clientIp('10.0.0.2', '1.2.3.4, <script>', 1), '10.0.0.2');
  assert.is(clientIp('10.0.0.2', '999.1.1.1', 1), '10.0.0.2');
});

identity('IPv4-mapped IPv6, ports, brackets and zones are stripped', () => {
  assert.is(clientIp('::ffff:127.0.0.1', undefined, 0), '127.0.0.1');
  assert.is(clientIp('::FFFF:7f00:1', undefined, 0), '127.0.0.1');
  assert.is(clientIp('10.0.0.1', '::ffff:198.51.100.7', 1), '198.51.100.7');
  assert.is(clientIp('10.0.0.1', '198.51.100.7:4711', 1), '198.51.100.7');
  assert.is(clientIp('10.0.0.1', '[2001:db8::1]:443', 1), '2001:db8::1');
  assert.is(clientIp('fe80::1%eth0', undefined, 0), 'fe80::1');
});

identity('no socket address at all gives the empty string', () => {
  assert.is(clientIp(undefined, undefined, 0), '');
});

const keys = suite('an IP becomes a throttle key; IPv6 counts per /64');

keys('IPv4 is kept as is', () => {
  assert.is(ipKey('198.51.100.7', 64), '198.51.100.7');
});

keys('IPv6 is masked to the prefix and written canonically', () => {
  assert.is(ipKey('2001:DB8:1:2:aaaa:bbbb:cccc:dddd', 64), '2001:db8:1:2::/64');
  assert.is(ipKey('2001:db8:1:2::1'), '2001:db8:1:2::/64');
  assert.is(ipKey('2001:0db8:0001:0002:ffff::'), '2001:db8:1:2::/64');
  assert.is(ipKey('2001:db8:1:2:3:4:5:6', 48), '2001:db8:1::/48');
  assert.is(ipKey('2001:db8:1:2:3:4:5:6', 56), '2001:db8:1::/56');
  assert.is(ipKey('2001:db8:1:2ff:3:4:5:6', 56), '2001:db8:1:200::/56');
  assert.is(ipKey('2001:db8::1', 128), '2001:db8::1/128');
  assert.is(ipKey('::1', 64), '::/64');
  assert.is(ipKey('2001:0:0:1::1', 128), '2001:0:0:1::1/128');
});

keys('two addresses of one /64 share a key, the next /64 does not', () => {
  assert.is(ipKey('2001:db8:1:2::1'), ipKey('2001:db8:1:2:ffff:ffff:ffff:ffff'));
  assert.is.not(ipKey('2001:db8:1:2::1'), ipKey('2001:db8:1:3::1'));
});

keys('mapped IPv4 is IPv4; anything else is returned unchanged', () => {
  assert.is(ipKey('::ffff:1.2.3.4'), '1.2.3.4');
  assert.is(ipKey(''), '');
  assert.is(ipKey('not-an-ip'), 'not-an-ip');
});

keys('an address keeps its key however often and among however many others it is seen', () => {
  // More distinct addresses than the per-process memo of worked-out IPv6 keys holds.
  for (let round = 0; round < 2; round++) {
    for (let i = 0; i < 5000; i++) {
      const group = i.toString(16);
      assert.is(ipKey(`2001:db8:${group}:1::${group}`, 64), `2001:db8:${group}:1::/64`);
      assert.is(clientIp(`2001:DB8:${group}::1`, undefined, 0), `2001:db8:${group}::1`);
    }
  }
  assert.is(ipKey('2001:db8:1:2:3:4:5:6', 48), '2001:db8:1::/48');
  assert.is(ipKey('2001:db8:1:2:3:4:5:6', 128), '2001:db8:1:2:3:4:5:6/128');
  assert.is(clientIp('not-an-ip', undefined, 0), 'not-an-ip');
  assert.is(clientIp('not-an-ip', undefined, 0), 'not-an-ip');
});

const headers = suite('the RateLimit fields and the 429 detail');

const decision = (over: Partial<Decision>): Decision => ({
  scope: 'user',
  allowed: true,
  limit: 100,
  windowMs: 60_000,
  remaining: 42,
  resetMs: 17_001,
  retryAfterS: 0,
  ...over,
});

headers('one scope gives the fields of docs/architecture.md "Throttling"', () => {
  assert.equal(rateLimitHeaders([decision({})]), {
    'RateLimit-Policy': '"user";q=100;w=60',
    RateLimit: '"user";r=42;t=18',
  });
});

headers('t is the ceiling in seconds and matches Retry-After on a 429', () => {
  const refused = decision({ allowed: false, remaining: 0, resetMs: 36_400, retryAfterS: 37 });
  assert.is(rateLimitHeaders([refused]).RateLimit, '"user";r=0;t=37');
  assert.is(rateLimitHeaders([decision({ resetMs: 0, remaining: 100 })]).RateLimit, '"user";r=100;t=0');
});

headers('several scopes are list members in order', () => {
  const fields = rateLimitHeaders([
    decision({}),
    decision({ scope: 'reports', limit: 10, windowMs: 3_600_000, remaining: 3, resetMs: 1_200_000 }),
  ]);
  assert.is(fields['RateLimit-Policy'], '"user";q=100;w=60, "reports";q=10;w=3600');
  assert.is(fields.RateLimit, '"user";r=42;t=18, "reports";r=3;t=1200');
  assert.equal(rateLimitHeaders([]), {});
});

headers('the detail names the wait, singular for one second', () => {
  assert.is(throttledDetail(37), 'Request was throttled. Expected available in 37 seconds.');
  assert.is(throttledDetail(1), 'Request was throttled. Expected available in 1 second.');
  assert.is(throttledDetail(60), 'Request was throttled. Expected available in 60 seconds.');
});

headers('when several scopes refuse, the longest wait wins', () => {
  const user = decision({ allowed: false, retryAfterS: 5 });
  const reports = decision({ scope: 'reports', allowed: false, retryAfterS: 1800 });
  assert.is(longestWait([user, reports]), reports);
  assert.is(longestWait([reports, user]), reports);
  assert.is(longestWait([decision({}), user]), user);
  assert.is(longestWait([decision({})]), undefined);
});

rates.run();
scopes.run();
identity.run();
keys.run();
headers.run();
