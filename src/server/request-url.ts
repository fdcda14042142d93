import type { IncomingMessage } from 'node:http';
import type { Context } from 'koa';
import { forwardedHops, type ProxySettings } from './client-address.js';

const LABEL = '[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?';
// Dot-separated labels, or an IPv6 address in brackets, and an optional port.
const HOST = new RegExp(`^(?:${LABEL}(?:\\.${LABEL})*|\\[[0-9A-Fa-f:.]+\\])(?::\\d{1,5})?$`);

/**
 * The absolute URL the client used. Scheme and host come from `X-Forwarded-Proto` /
 * `X-Forwarded-Host` only when proxies are trusted (`TRUST_PROXY_HOPS` = N > 0) and the
 * connection comes from one of them (`TRUSTED_PROXIES`, when set), read like `X-Forwarded-For`:
 * the N-th value from the right, the one our own proxies wrote. Otherwise they come from the
 * connection and the Host header. Only `http`/`https` and well-formed hosts are used, so a client
 * cannot make links point at another scheme or at a path.
 */
export function requestUrl(ctx: Context, proxies: ProxySettings): URL {
  try {
    return new URL(ctx.originalUrl, requestOrigin(ctx, proxies));
  } catch {
    return new URL(ctx.originalUrl, `http://${ownAddress(ctx.req)}`);
  }
}

/** The scheme and host the client used, `http://host:port`, read as `requestUrl` says. */
export function requestOrigin(ctx: Context, proxies: ProxySettings): string {
  return originOf(ctx.req, proxies);
}

/** `requestOrigin` of a request before Koa has it (the listener, src/listener/classify.ts). */
export function originOf(req: IncomingMessage, proxies: ProxySettings): string {
  const trustProxyHops = forwardedHops(proxies, req.socket.remoteAddress);
  const header = (name: string) => String(req.headers[name] ?? '');
  const forwarded = (name: string) => {
    if (trustProxyHops === 0) return '';
    const values = header(name)
      .split(',')
      .map((v) => v.trim())
      .filter(Boolean);
    // Fewer values than proxies: none of them was written by ours, so none is trusted.
    return values.at(-trustProxyHops) ?? '';
  };
  const encrypted = (req.socket as { encrypted?: boolean }).encrypted === true;
  const claimedProto = forwarded('x-forwarded-proto').toLowerCase();
  const proto = claimedProto === 'http' || claimedProto === 'https' ? claimedProto : encrypted ? 'https' : 'http';
  const host = [forwarded('x-forwarded-host'), header('host')].find((h) => HOST.test(h)) ?? ownAddress(req);
  return `${proto}://${host}`;
}

function ownAddress(req: IncomingMessage): string {
  const { localAddress, localPort } = req.socket;
  return `${localAddress?.includes(':') ? `[${localAddress}]` : localAddress}:${localPort}`;
}

/** `path` as an absolute URL on the scheme and host the client used (see `requestUrl`). */
export function absoluteUrl(ctx: Context, proxies: ProxySettings, path: string): string {
  return new URL(path, requestUrl(ctx, proxies)).href;
}
