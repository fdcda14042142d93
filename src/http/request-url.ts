import type { Context } from 'koa';

/**
 * The absolute URL the client used. Scheme and host come from `X-Forwarded-Proto` /
 * `X-Forwarded-Host` only when proxies are trusted (`TRUST_PROXY_HOPS` > 0); otherwise from
 * the connection and the Host header, so a client cannot make links point elsewhere.
 */
export function requestUrl(ctx: Context, trustProxyHops: number): URL {
  const forwarded = (name: string) => (trustProxyHops > 0 ? ctx.get(name).split(',')[0]?.trim() : '') || '';
  const encrypted = (ctx.req.socket as { encrypted?: boolean }).encrypted === true;
  const proto = forwarded('X-Forwarded-Proto') || (encrypted ? 'https' : 'http');
  const host = forwarded('X-Forwarded-Host') || ctx.get('Host') || `${ctx.req.socket.localAddress}:${ctx.req.socket.localPort}`;
  try {
    return new URL(ctx.originalUrl, `${proto}://${host}`);
  } catch {
    return new URL(ctx.originalUrl, `http://${ctx.req.socket.localAddress}:${ctx.req.socket.localPort}`);
  }
}
