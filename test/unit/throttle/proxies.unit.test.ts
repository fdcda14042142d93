import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { clientIp } from '../../../src/throttle/identity.js';
import { forwardedHops, isTrustedProxy } from '../../../src/server/client-address.js';
import { parseProxyList } from '../../../src/settings/proxy-list.js';

const proxies = suite('TRUSTED_PROXIES: which peers may forward');

proxies('IPv4 addresses and CIDRs match plain and IPv4-mapped IPv6 peers', () => {
  const list = parseProxyList('10.0.0.0/8, 127.0.0.1, 192.168.1.128/25');
  for (const peer of [
    '10.1.2.3',
    '::ffff:10.1.2.3',
    '::FFFF:a01:203',
    '127.0.0.1',
    '::ffff:127.0.0.1',
    '192.168.1.200',
  ]) {
    assert.ok(isTrustedProxy(list, peer), peer);
  }
  for (const peer of [
    '11.0.0.1',
    '127.0.0.2',
    '192.168.1.127',
    '::1',
    '::a01:203',
    '2001:db8::1',
    'not-an-ip',
    '',
    undefined,
  ]) {
    assert.not.ok(isTrustedProxy(list, peer), String(peer));
  }
});

proxies('IPv6 addresses and CIDRs, with zones and any case', () => {
  const list = parseProxyList('::1,FD00::/8,2001:db8:1::/48');
  for (const peer of ['::1', 'fd12:3456::1', 'FD00::9', '2001:db8:1:ffff::1', 'fd00::1%eth0'])
    assert.ok(isTrustedProxy(list, peer), peer);
  for (const peer of ['::2', 'fe00::1', '2001:db8:2::1', '127.0.0.1']) assert.not.ok(isTrustedProxy(list, peer), peer);
  assert.ok(isTrustedProxy(parseProxyList('::ffff:0:0/96'), '203.0.113.9'), 'a mapped IPv6 range holds IPv4 peers');
  assert.ok(isTrustedProxy(parseProxyList('0.0.0.0/0'), '::ffff:203.0.113.9'));
  assert.not.ok(isTrustedProxy(parseProxyList('0.0.0.0/0'), '2001:db8::1'));
});

proxies('a bad entry is named', () => {
  for (const bad of [
    '10.0.0.0/33',
    '::/129',
    'proxy.internal',
    '10.0.0.0/',
    '10.0.0.0/8/8',
    '10.0.0.256',
    '1.2.3.4:80',
    '/8',
  ]) {
    assert.throws(
      () => parseProxyList(`127.0.0.1,${bad}`),
      (error: Error) => error.message.startsWith(`"${bad}" is not`),
      bad,
    );
  }
});

proxies('hops count only from a trusted peer; without a list every peer is trusted, as before', () => {
  const list = parseProxyList('10.0.0.0/8');
  assert.is(forwardedHops({ TRUST_PROXY_HOPS: 2, TRUSTED_PROXIES: list }, '10.0.0.1'), 2);
  assert.is(forwardedHops({ TRUST_PROXY_HOPS: 2, TRUSTED_PROXIES: list }, '203.0.113.9'), 0);
  assert.is(forwardedHops({ TRUST_PROXY_HOPS: 0, TRUSTED_PROXIES: list }, '10.0.0.1'), 0);
  assert.is(forwardedHops({ TRUST_PROXY_HOPS: 1 }, '203.0.113.9'), 1);
  const from = (peer: string) =>
    clientIp(peer, 'spoofed, 198.51.100.7', forwardedHops({ TRUST_PROXY_HOPS: 1, TRUSTED_PROXIES: list }, peer));
  assert.is(from('::ffff:10.9.9.9'), '198.51.100.7');
  assert.is(from('203.0.113.9'), '203.0.113.9');
});

proxies.run();
