// The client's address behind trusted proxies (TRUSTED_PROXIES, TRUST_PROXY_HOPS): whose forwarded headers count
// (docs/architecture.md "Throttling").
import type { IncomingMessage } from 'node:http';
import { isIP, isIPv4 } from 'node:net';
import type { ProxyList } from '../settings/proxy-list.js';
import { clientIp } from '../throttle/identity.js';
import { maskIpv6, parseIpv6, unmapIpv4 } from '../throttle/ipv6.js';

/** What decides whether a request's forwarded headers count (a `Config` is one). */
export interface ProxySettings {
  readonly TRUST_PROXY_HOPS: number;
  /** Unset: any peer is trusted (the behaviour before the list existed). */
  readonly TRUSTED_PROXIES?: ProxyList | undefined;
}

/** Whether a socket address (IPv4, IPv6, or IPv4-mapped IPv6) is in the list. */
export function isTrustedProxy(list: ProxyList, address: string | undefined): boolean {
  if (!address || list.length === 0) return false;
  let known = verdicts.get(list);
  if (!known) verdicts.set(list, (known = new Map()));
  let verdict = known.get(address);
  if (verdict === undefined) {
    verdict = matches(list, address);
    // Bounded: emptied when full (a direct client with many IPv6 addresses cannot grow it).
    if (known.size >= 1024) known.clear();
    known.set(address, verdict);
  }
  return verdict;
}

const verdicts = new WeakMap<ProxyList, Map<string, boolean>>();

function matches(list: ProxyList, raw: string): boolean {
  const address = raw.replace(/%.*$/, '').toLowerCase();
  const family = isIP(address);
  if (family === 0) return false;
  let groups = isIPv4(address) ? parseIpv6(`::ffff:${address}`) : parseIpv6(address);
  // `::ffff:10.1.2.3` and `::ffff:a01:203` are the same peer; parse both the same way.
  const mapped = unmapIpv4(groups);
  if (mapped !== undefined) groups = parseIpv6(`::ffff:${mapped}`);
  return list.some((entry) => maskIpv6(groups, entry.prefix).every((group, i) => group === entry.groups[i]));
}

/**
 * How many proxies' forwarded values to believe for a request from `peer`: `TRUST_PROXY_HOPS`
 * when the peer is a trusted proxy (or no list is set), else 0, so a client that reaches the port
 * directly is known by its socket address and links by its Host header.
 */
export function forwardedHops(settings: ProxySettings, peer: string | undefined): number {
  const hops = settings.TRUST_PROXY_HOPS;
  if (hops === 0 || settings.TRUSTED_PROXIES === undefined) return hops;
  return isTrustedProxy(settings.TRUSTED_PROXIES, peer) ? hops : 0;
}

/**
 * The client's address: the one a trusted proxy forwarded (`X-Forwarded-For`, `TRUST_PROXY_HOPS` from the right), else
 * the socket's; what the throttle and the login's CPU budget count a client by.
 */
export function clientAddressOf(req: IncomingMessage, settings: ProxySettings): string {
  const peer = req.socket.remoteAddress;
  // Node joins a repeated X-Forwarded-For into one value, as Koa's ctx.get returns it.
  const forwarded = req.headers['x-forwarded-for'] as string | undefined;
  return clientIp(peer, forwarded || undefined, forwardedHops(settings, peer));
}
