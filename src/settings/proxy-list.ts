import { isIP } from 'node:net';
import { maskIpv6, parseIpv6, type Ipv6Groups } from '../throttle/ipv6.js';

/**
 * The proxies whose forwarded headers (`X-Forwarded-For`, `-Proto`, `-Host`) are believed
 * (`TRUSTED_PROXIES`): addresses and CIDRs, IPv4 and IPv6. IPv4 entries are kept as IPv4-mapped
 * IPv6 ranges (`10.0.0.0/8` → `::ffff:10.0.0.0/104`), so a dual-stack socket's `::ffff:10.1.2.3`
 * matches them.
 */
export type ProxyList = ReadonlyArray<Readonly<{ groups: Ipv6Groups; prefix: number }>>;

/**
 * Parses `10.0.0.0/8,127.0.0.1,::1`.
 * @throws Error naming the first bad entry.
 */
export function parseProxyList(text: string): ProxyList {
  const entries = text
    .split(',')
    .map((entry) => entry.trim())
    .filter(Boolean);
  return Object.freeze(entries.map(parseEntry));
}

function parseEntry(entry: string): { groups: Ipv6Groups; prefix: number } {
  const match = /^([^/]+)(?:\/(\d{1,3}))?$/.exec(entry);
  const address = match?.[1] ?? '';
  const family = isIP(address);
  const bits = family === 4 ? 32 : 128;
  const prefix = match?.[2] === undefined ? bits : Number(match[2]);
  if (family === 0 || prefix > bits) {
    throw new Error(`"${entry}" is not an IPv4 or IPv6 address or CIDR (such as 10.0.0.0/8 or fd00::/8)`);
  }
  const groups = family === 4 ? parseIpv6(`::ffff:${address}`) : parseIpv6(address.toLowerCase());
  const full = family === 4 ? prefix + 96 : prefix;
  return Object.freeze({ groups: maskIpv6(groups, full), prefix: full });
}
