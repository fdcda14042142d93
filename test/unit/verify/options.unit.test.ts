import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { parseArgs } from '../../../clients/verify/args.js';
import { edgeMarginMs } from '../../../clients/verify/checks/limits-schedule.js';
import { scopeOf, statedLimit } from '../../../clients/verify/identity.js';

const options = suite('verify: any rate-limited endpoint, and identity checked');

options('--anonymous needs no user and runs the limits check alone; --path and --cursor-path are relative', () => {
  const parsed = parseArgs(['http://127.0.0.1:8000/prefix', '--anonymous', '--path', '/api/things/?x=1']);
  assert.equal(parsed.checks, ['limits']);
  assert.is(parsed.path, 'api/things/?x=1');
  assert.is(new URL(parsed.path, parsed.base).href, 'http://127.0.0.1:8000/prefix/api/things/?x=1');
  assert.is(parseArgs(['http://x', '--user', 'a:b', '--cursor-path', '/c/']).cursorPath, 'c/');
});

options('--anonymous with task checks still needs a user; --auth-scheme takes one word', () => {
  assert.throws(() => parseArgs(['http://x', '--anonymous', '--checks', 'limits,cursor']), /required for cursor/);
  assert.is(parseArgs(['http://x', '--user', 'a:b', '--auth-scheme', 'Token']).authScheme, 'Token');
  assert.is(parseArgs(['http://x', '--user', 'a:b']).authScheme, 'Bearer');
  assert.throws(() => parseArgs(['http://x', '--user', 'a:b', '--auth-scheme', 'To ken']), /one word/);
});

options('the RateLimit-Policy scope is the first policy’s name; the stated limit from any header that has one', () => {
  assert.is(scopeOf('"user";q=100;w=60, "user:concurrent";q=2'), 'user');
  assert.is(scopeOf('"anon";q=20;w=60'), 'anon');
  assert.is(scopeOf(undefined), undefined);
  assert.is(statedLimit({ 'ratelimit-policy': '"user";q=100;w=60', 'x-ratelimit-limit': '7' }), 100);
  assert.is(statedLimit({ 'ratelimit-limit': '20' }), 20);
  assert.is(statedLimit({ 'x-ratelimit-limit': '20, 20;w=60' }), 20);
  assert.is(statedLimit({ 'retry-after': '3' }), undefined);
});

options('--identity-path is relative like --path; --help runs nothing', () => {
  const parsed = parseArgs(['http://x/prefix', '--user', 'a:b', '--identity-path', '/api/profile/']);
  assert.is(parsed.identityPath, 'api/profile/');
  assert.is(parseArgs(['http://x', '--user', 'a:b']).identityPath, undefined);
  assert.throws(() => parseArgs(['http://x', '--user', 'a:b', '--identity-path', 'http://y/']), /takes a path/);
  assert.is(parseArgs(['--help']).help, true);
});

options('the bursts around the edge fill the limit at the rate, within a quarter of the window', () => {
  assert.is(edgeMarginMs({ limit: 10, windowMs: 2_000, rate: 60, tailMs: 5_000 }), 250);
  assert.is(edgeMarginMs({ limit: 100, windowMs: 60_000, rate: 60, tailMs: 9_000 }), 6_000);
  assert.is(edgeMarginMs({ limit: 60, windowMs: 3_000, rate: 60, tailMs: 5_000 }), 750);
});

options.run();
