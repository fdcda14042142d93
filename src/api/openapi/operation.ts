import type { Middleware } from 'koa';
import type { z } from 'zod';

/** The methods an operation can declare (HEAD is answered for every GET, OPTIONS for every path). */
export type Method = 'get' | 'post' | 'put' | 'patch' | 'delete';

/** A request header the API document describes once and an operation names. */
export type RequestHeader = 'If-Match' | 'If-None-Match' | 'Idempotency-Key';

/** A response header the API document describes once and a response names. */
export type ResponseHeader =
  'ETag' | 'Location' | 'Cache-Control' | 'Idempotent-Replayed' | 'Retry-After' | 'WWW-Authenticate';

export interface ResponseSpec {
  description: string;
  /** The JSON body, or several (any of them); none for 204 and 304. */
  body?: z.ZodType | readonly z.ZodType[];
  /** The media types the JSON body is served as (default `application/json` only). */
  jsonMedia?: readonly string[];
  /** A body that is not JSON (a page, a script): its media type. */
  media?: string;
  headers?: ResponseHeader[];
}

/**
 * One route as the router registers it and the API document describes it (docs/architecture.md
 * "API document"). `path` is in the router's syntax (`/api/tasks/:id/`).
 *
 * - `access`: who may call it, in DRF's terms: `public` (no guard: never throttled or
 *   authenticated), `optional` (a token is read when sent), `required` (401 without one).
 * - `list`: a paginated collection of the given envelopes, sorted by `ordering` (`id` → `id` or
 *   `-id`): the pagination parameters and a 400/404 for bad ones are added.
 * - The document adds what the guard answers to every guarded operation: 401 for a bad token,
 *   406, 429 with `Retry-After` and the RateLimit fields, 503; and 400/413/415 to one with a `body`.
 */
export interface Operation {
  method: Method;
  path: string;
  operationId: string;
  summary: string;
  description?: string;
  tag: string;
  access: 'public' | 'optional' | 'required';
  /**
   * How admission control treats it past capacity (docs/throttling.md "Past capacity: admission and
   * shedding"): `health` is never queued or shed, `docs` is shed first, `memory` is answered from what the worker
   * keeps and Redis (never PostgreSQL) and waits for no slot once its client is known; unset, its class follows
   * from the request (a write or a read, with credentials or without).
   */
  priority?: 'health' | 'docs' | 'memory';
  /** The path parameters, each a schema (the router takes them as text). */
  params?: Record<string, z.ZodType>;
  /** Query parameters besides the pagination ones. */
  query?: Record<string, z.ZodType>;
  /** `cached`: answered with an `ETag` and `Cache-Control: no-cache`, 304 for a current `If-None-Match`. */
  list?: { envelopes: readonly z.ZodType[]; ordering: string; cached?: boolean };
  headers?: RequestHeader[];
  body?: z.ZodType;
  responses: Record<number, ResponseSpec>;
  /**
   * What one request costs in its throttle scope's units when not 1, as its guard declares it (set by the router):
   * the document's `x-rate-limit-cost` (docs/throttling.md "Cost: requests that weigh more").
   */
  cost?: number | 'per request';
}

/** Declares an operation; the identity keeps its literal types checked. */
export function defineOperation(operation: Operation): Operation {
  return operation;
}

/** Registers `operation` on `router` with its middleware: the route and its document come from one value. */
export function route(
  router: { route(operation: Operation, middleware: readonly Middleware[]): void },
  operation: Operation,
  ...middleware: Middleware[]
): void {
  router.route(operation, middleware);
}

/** `/api/tasks/:id/` → `/api/tasks/{id}/`. */
export function documentPath(path: string): string {
  return path.replace(/:([A-Za-z_][A-Za-z0-9_]*)/g, '{$1}');
}
