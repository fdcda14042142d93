import type Router from '@koa/router';
import compose from 'koa-compose';
import type { Context, Middleware, Next } from 'koa';
import { Errors } from '../errors.js';
import type { GuardMiddleware } from './guard.js';
import type { RefuseKnown } from './known-refusal.js';

/** What the table reads of a @koa/router layer: its template, methods, middleware and matcher. */
interface RouteLayer {
  path: string | RegExp;
  methods: string[];
  stack: Middleware[];
  paramNames: unknown[];
  regexp: RegExp;
  captures(path: string): string[];
  params(path: string, captures: string[], existing?: Record<string, string>): Record<string, string>;
}

/** The layers one set of matching templates selects, and each method's chain through them (built on first use). */
interface Match {
  layers: RouteLayer[];
  chains: Map<string, Middleware | null>;
  gates: Map<string, GatedRoute | null>;
  templates: Map<string, string | null>;
}

/** A route whose guard may refuse a request before its chain: its template and that guard's early refusal. */
export interface GatedRoute {
  template: string;
  refuseKnown: RefuseKnown;
}

/**
 * Every router's routes in one table, resolved once per request (docs/architecture.md "HTTP API"): the
 * layers a path selects, and their chain per method, are composed the first time that combination
 * is seen and kept. Serves exactly what mounting each router's `routes()` in turn served: the same
 * layers in the same order, `ctx.params` and `ctx._matchedRoute` set as each layer runs.
 */
export class RouteTable {
  readonly #layers: RouteLayer[];
  /** Each distinct template's matcher with the bit it sets in a match key. */
  readonly #templates: Array<{ regexp: RegExp; bit: string }>;
  /** Paths written without parameters: their match key, found without running any matcher. */
  readonly #literal = new Map<string, string>();
  readonly #matches = new Map<string, Match>();

  constructor(routers: readonly Router[]) {
    this.#layers = routers.flatMap((router) => router.stack as unknown as RouteLayer[]);
    const byTemplate = new Map(this.#layers.map((layer) => [String(layer.regexp), layer.regexp]));
    this.#templates = [...byTemplate.values()].map((regexp, index) => ({ regexp, bit: String(index) }));
    for (const layer of this.#layers)
      if (typeof layer.path === 'string' && layer.paramNames.length === 0)
        this.#literal.set(layer.path, this.#keyOf(layer.path));
  }

  /** True when some route is declared at `path` (for any method). */
  has(path: string): boolean {
    return this.#match(path).layers.length > 0;
  }

  /**
   * Runs the chain `ctx.path` and `ctx.method` select, or `next` when no route takes the method
   * (as an unmatched router does).
   */
  dispatch(ctx: Context, next: Next): Promise<void> {
    const match = this.#match(ctx.path);
    ctx.matched = match.layers as Context['matched'];
    let chain = match.chains.get(ctx.method);
    if (chain === undefined) match.chains.set(ctx.method, (chain = this.#chainFor(match.layers, ctx.method)));
    return chain === null ? next() : chain(ctx, next);
  }

  /**
   * The route `method` selects at `path` when the first layer its chain enters is guarded: the template the chain
   * labels the request by, and the guard's early refusal, which its chain would run first. Undefined otherwise.
   */
  gatedRoute(path: string, method: string): GatedRoute | undefined {
    const match = this.#match(path);
    let gated = match.gates.get(method);
    if (gated === undefined) match.gates.set(method, (gated = gatedOf(match.layers, method)));
    return gated ?? undefined;
  }

  /** The template of the route `method` selects at `path` (what the request is labelled by), if any. */
  templateOf(path: string, method: string): string | undefined {
    const match = this.#match(path);
    let template = match.templates.get(method);
    if (template === undefined) {
      const first = chosenFor(match.layers, method)?.[0]?.path;
      match.templates.set(method, (template = typeof first === 'string' ? first : null));
    }
    return template ?? undefined;
  }

  #keyOf(path: string): string {
    let key = '';
    for (const { regexp, bit } of this.#templates) if (regexp.test(path)) key += `${bit},`;
    return key;
  }

  #match(path: string): Match {
    const key = this.#literal.get(path) ?? this.#keyOf(path);
    let match = this.#matches.get(key);
    if (!match) {
      const layers = this.#layers.filter((layer) => layer.regexp.test(path));
      this.#matches.set(key, (match = { layers, chains: new Map(), gates: new Map(), templates: new Map() }));
    }
    return match;
  }

  #chainFor(layers: readonly RouteLayer[], method: string): Middleware | null {
    const chosen = chosenFor(layers, method);
    if (!chosen) return null;
    const gate = gateOf(chosen);
    return compose(
      chosen.flatMap((layer, index) => [
        enterLayer(layer),
        ...(index === 0 && gate ? [gate.refusalGate] : []),
        ...layer.stack,
      ]),
    );
  }
}

/** The layers a chain for `method` runs, in order; null when no route takes the method. */
function chosenFor(layers: readonly RouteLayer[], method: string): RouteLayer[] | null {
  const chosen = layers.filter((layer) => layer.methods.length === 0 || layer.methods.includes(method));
  return chosen.some((layer) => layer.methods.length > 0) ? chosen : null;
}

/** The first route's guard, which may answer an already-refused client before the rest of its chain (guard.ts). */
function gateOf(chosen: readonly RouteLayer[]): GuardMiddleware | undefined {
  return chosen[0]?.stack.find((middleware) => 'refusalGate' in middleware) as GuardMiddleware | undefined;
}

/** What `gatedRoute` answers for these layers and method, or null. */
function gatedOf(layers: readonly RouteLayer[], method: string): GatedRoute | null {
  const chosen = chosenFor(layers, method);
  const gate = chosen && gateOf(chosen);
  const template = chosen?.[0]?.path;
  return gate && typeof template === 'string' ? { template, refuseKnown: gate.refuseKnown } : null;
}

/** What @koa/router does before each layer's middleware: its params and its template on `ctx`. */
function enterLayer(layer: RouteLayer): Middleware {
  const bare = layer.paramNames.length === 0;
  return (ctx, next) => {
    const params = bare ? { ...ctx.params } : layer.params(ctx.path, layer.captures(ctx.path), ctx.params);
    (ctx.request as { params?: Record<string, string> }).params = params;
    ctx.params = params;
    ctx.routerPath = layer.path as string;
    ctx._matchedRoute = layer.path as string;
    return next();
  };
}

/**
 * The routing of the app in one middleware: `/api/tasks` → 308 to `/api/tasks/` when that is a
 * route (method and query kept), the table's chain, the path's `Allow` on every answer of a
 * declared path (errors and 429s included, as DRF's views send it), and 404 for anything no route
 * answered. Its `gatedRoute` is the table's for a path the slash redirect does not take.
 */
export function routeRequests(
  routers: readonly Router[],
  allow: ReadonlyMap<string, string>,
): Middleware & { gatedRoute: RouteTable['gatedRoute']; templateOf: RouteTable['templateOf'] } {
  const table = new RouteTable(routers);
  const redirected = (path: string) =>
    (path === '/api' || path.startsWith('/api/')) && !path.endsWith('/') && table.has(`${path}/`);
  const middleware: Middleware = async (ctx, next) => {
    const path = ctx.path;
    if (redirected(path)) {
      const target = `${path}/${ctx.search}`;
      ctx.status = 308;
      ctx.set('Location', target);
      ctx.body = { detail: `Moved to ${target}` };
      return;
    }
    try {
      await table.dispatch(ctx, next);
    } finally {
      const methods = typeof ctx._matchedRoute === 'string' ? allow.get(ctx._matchedRoute) : undefined;
      if (methods !== undefined) ctx.set('Allow', methods);
    }
    if (ctx.body === undefined && ctx.status === 404) throw Errors.notFound();
  };
  const gatedRoute = (path: string, method: string) => (redirected(path) ? undefined : table.gatedRoute(path, method));
  // As @koa/router marks its routes() middleware with its router: what the app serves stays readable from it.
  const templateOf = (path: string, method: string) => (redirected(path) ? undefined : table.templateOf(path, method));
  return Object.assign(middleware, { router: routers, gatedRoute, templateOf });
}
