import { isIP, isIPv4 } from 'node:net';
import { formatIpv6, maskIpv6, parseIpv6, unmapIpv4 } from './ipv6.js';

/**
 * The client's IP address for throttling.
 *
 * With `trustProxyHops` = 0 (the default deployment) `X-Forwarded-For` is ignored, so a client
 * cannot dodge its limit by inventing one. With N > 0 there are N trusted proxies in front and
 * the client is the N-th address from the right of the header (DRF's `NUM_PROXIES`). The socket
 * address is used when the header is absent, has fewer than N addresses, or that address is not
 * an IP. The caller passes 0 hops when the connection is not from a trusted proxy
 * (`forwardedHops`, `TRUSTED_PROXIES`). IPv4-mapped IPv6 (`::ffff:1.2.3.4`) becomes plain IPv4; ports and brackets
 * are dropped.
 *
 * @returns the address, or `''` when the socket address is unknown (the socket is gone).
 */
export function clientIp(
  socketAddress: string | undefined,
  xForwardedFor: string | undefined,
  trustProxyHops: number,
): string {
  const hops = Math.trunc(trustProxyHops);
  if (hops > 0 && xForwardedFor) {
    const addresses = xForwardedFor.split(',');
    const forwarded = addresses.length < hops ? undefined : normaliseAddress(addresses[addresses.length - hops] ?? '');
    if (forwarded !== undefined) return forwarded;
  }
  return normaliseAddress(socketAddress ?? '') ?? socketAddress ?? '';
}

/**
 * The throttle key part for an IP: IPv4 as is; IPv6 (whose holders usually get a whole /64)
 * masked to `ipv6Prefix` bits and written in RFC 5952 form with the prefix, e.g.
 * `2001:db8:1:2::/64`. Anything that is not an IP address is returned unchanged.
 *
 * @param ipv6Prefix 0–128, default 64.
 */
export function ipKey(ip: string, ipv6Prefix = 64): string {
  const address = normaliseAddress(ip);
  if (address === undefined || isIPv4(address)) return address ?? ip;
  const prefix = Math.min(128, Math.max(0, Math.trunc(ipv6Prefix)));
  return remember(`${prefix} ${address}`, () => `${formatIpv6(maskIpv6(parseIpv6(address), prefix))}/${prefix}`);
}

/** The scope whose addresses are login attempts (docs/security.md "Login CPU budget"). */
export const LOGIN_ADDRESS_SCOPE = 'token-obtain';

/**
 * The IPv6 prefix a scope counts addresses by: login attempts by LOGIN_IPV6_PREFIX (default /56,
 * a subscriber's delegation, so one household cannot multiply its login budget by its /64s),
 * everything else by ANON_IPV6_PREFIX (default /64).
 */
export function ipv6PrefixFor(
  scope: string,
  settings: { readonly LOGIN_IPV6_PREFIX: number; readonly ANON_IPV6_PREFIX: number },
): number {
  return scope === LOGIN_ADDRESS_SCOPE ? settings.LOGIN_IPV6_PREFIX : settings.ANON_IPV6_PREFIX;
}

/**
 * Results of the slow paths (IPv6 parsing and formatting, ~5 µs each) for addresses seen lately,
 * so a busy client's address is worked out once rather than per request. Bounded: emptied when full.
 */
const recent = new Map<string, string | null>();
const RECENT_MAX = 4096;

function remember<T extends string | null>(key: string, make: () => T): T {
  let value = recent.get(key) as T | undefined;
  if (value === undefined) {
    value = make();
    if (recent.size >= RECENT_MAX) recent.clear();
    recent.set(key, value);
  }
  return value;
}

/** A bare, valid IP address from a socket or header value, or undefined. */
function normaliseAddress(raw: string): string | undefined {
  // The usual cases first: bare IPv4, and IPv4 as a dual-stack socket reports it.
  if (isIPv4(raw)) return raw;
  if (raw.startsWith('::ffff:') && isIPv4(raw.slice(7))) return raw.slice(7);
  return (
    remember(`@${raw}`, () => {
      const address = stripPortAndZone(raw.trim().toLowerCase());
      const family = isIP(address);
      if (family === 4) return address;
      if (family !== 6) return null;
      return unmapIpv4(parseIpv6(address)) ?? address;
    }) ?? undefined
  );
}

function stripPortAndZone(address: string): string {
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(address);
  const bare = bracketed?.[1] ?? address.replace(/^(\d+\.\d+\.\d+\.\d+):\d+$/, '$1');
  return bare.replace(/%.*$/, '');
}
