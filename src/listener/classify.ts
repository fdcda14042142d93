import type { IncomingMessage } from 'node:http';
import type { Deps } from '../deps.js';
import { readKey } from '../api/cached-read.js';
import type { DeclaredRoute } from '../api/router.js';
import { rememberedClient } from '../edge/authenticate.js';
import { originOf } from '../server/request-url.js';
import type { Level } from './admission.js';

/** What a request is, as the listener needs it before Koa: its route template, its class, its path's `Allow`. */
export interface Classified {
  /** `health`: a probe, never queued or shed; `memory`: an answer the worker keeps, not held behind others. */
  level: Level | 'health' | 'memory';
  route: string;
  allow?: string | undefined;
}

/** What classifying reads of the app (src/api/app.ts `createApi`). */
export interface RouteTable {
  lookup(path: string, method: string): DeclaredRoute | undefined;
  allowOf(template: string): string | undefined;
}

/**
 * A request's class for admission (admission.ts), from its route's declared priority, its
 * method and whether it carries credentials: a probe is never shed, nor an answer this worker keeps
 * in memory; docs and schema first, then anonymous requests, then authenticated reads, authenticated
 * writes last. An answer that needs no PostgreSQL (a kept page, the own budget) for a client known
 * without it (anonymous, or a token this worker remembers) takes the fast lane: it is not held behind
 * requests that do (a guess: the read itself checks the published head and the token epoch).
 */
export function classifyRequests(
  routes: RouteTable,
  deps: Pick<Deps, 'readCache' | 'config' | 'clock'>,
): (req: IncomingMessage) => Classified {
  const { readCache, config } = deps;
  return (req) => {
    const method = req.method ?? 'GET';
    const path = plainPath(req.url);
    const route = path === undefined ? undefined : routes.lookup(path, method);
    if (route === undefined) return { level: 1, route: 'unmatched' };
    const { template, priority } = route;
    const allowed = routes.allowOf(template);
    if (priority === 'health') return { level: 'health', route: template, allow: allowed };
    if (priority === 'docs') return { level: 0, route: template, allow: allowed };
    const anonymous = req.headers.authorization === undefined;
    const level = anonymous ? 1 : method === 'GET' || method === 'HEAD' || method === 'OPTIONS' ? 2 : 3;
    if (method !== 'GET' && method !== 'HEAD') return { level, route: template, allow: allowed };
    const client = anonymous ? 'anonymous' : rememberedClient(req.headers.authorization, deps);
    if (client === undefined) return { level, route: template, allow: allowed };
    if (priority === 'memory') return { level: 'memory', route: template, allow: allowed };
    if (!route.cached || !readCache) return { level, route: template, allow: allowed };
    // Kept for everyone, or for this viewer (a task's history, src/api/cached-read.ts `startRead`).
    const key = readKey(originOf(req, config), req.url!, config);
    const viewer = client === 'anonymous' ? client : `user ${client.id}`;
    const kept = readCache.holds(key) || readCache.holds(`${key} for ${viewer}`);
    return { level: kept ? 'memory' : level, route: template, allow: allowed };
  };
}

/**
 * A request target's path as Koa reads it (`ctx.path`, by parseurl), for the targets parseurl reads
 * without Node's URL parser: origin form, with none of the characters that send it there. A copy of
 * parseurl's fast path, held to the original by test/unit/listener/plain-path.unit.test.ts.
 */
export function plainPath(url: string | undefined): string | undefined {
  if (url === undefined || url.charCodeAt(0) !== 0x2f || SLOW_URL.test(url)) return undefined;
  const query = url.indexOf('?');
  return query === -1 ? url : url.slice(0, query);
}

/** The characters that make parseurl hand a URL to Node's full parser. */
const SLOW_URL = /[\t\n\f\r #\u00a0\ufeff]/;
