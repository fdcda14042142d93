import { METHODS } from 'node:http';
import Router from '@koa/router';
import type { Middleware } from 'koa';
import { pathToRegexp } from 'path-to-regexp';
import { Errors } from '../base/errors.js';
import type { Deps } from '../deps.js';
import type { Guard, GuardMiddleware } from '../edge/guard.js';
import type { RefuseKnown } from '../edge/known-refusal.js';
import type { ScopeName, ScopeRule } from '../throttle/index.js';
import type { Operation } from './openapi/operation.js';

const METHOD_ORDER = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'];
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * What an anonymous client may do on a resource's paths before a method they lack is refused, in
 * DRF's terms: `any` (AllowAny: 405), `read` (IsAuthenticatedOrReadOnly: an unsafe method is 401
 * first) or `none` (IsAuthenticated: every method is 401 first).
 */
export type AnonymousAccess = 'any' | 'read' | 'none';

/** A route as the listener sees it before Koa: its template, its guard's early refusal, its declared priority. */
export interface DeclaredRoute {
  template: string;
  refuseKnown: RefuseKnown | undefined;
  priority: Operation['priority'];
  /** A list whose answers the read cache keeps for everyone (its operation's `list.cached`). */
  cached: boolean;
}

/** One declared route or a path's other methods, with what the listener's lookup needs of it. */
interface Entry extends DeclaredRoute {
  /** The methods it is registered for: its own, or every method its path does not answer. */
  methods: readonly string[];
  regexp: RegExp;
  params: number;
}

/** The routes one resource declares: each with its operation, then the other methods of its paths. */
export interface ResourceRouter {
  route(operation: Operation, middleware: readonly Middleware[]): void;
  refuseOtherMethods(guardFor: (path: string) => Middleware, anonymous?: AnonymousAccess): void;
}

/** What a resource's routes are built with. */
export interface RouteParts {
  deps: Deps;
  guard: Guard;
  /** The throttle's rules, as the routes have declared them so far. */
  rules: ReadonlyMap<ScopeName, ScopeRule>;
  /** Every operation the routes declared, once all are (the API document is built from them on first use). */
  operations: () => readonly Operation[];
}

/** One room of src/api/: the routes it declares, each with its operation, in the order of the API document. */
export type Routes = (router: ResourceRouter, parts: RouteParts) => void;

/**
 * Every route of the API on one @koa/router, through its documented API only (docs/architecture.md
 * "The request's journey"): `exclusive: 'specificity'` runs one route per request, the one with the
 * fewest path parameters (`/api/tasks/stats/` before `/api/tasks/:id/`); the routes of one path never
 * share a method, so no two routes it could choose between tie. The router matches once per request. Beside it, what was declared: the operations in
 * the order of the API document, each path's `Allow`, and `lookup`, the same choice made before
 * Koa (the listener's class and early refusal), compiled by the path-to-regexp the router compiles with
 * (test/int/api/routing.int.test.ts pins the two together).
 */
export class ApiRoutes {
  readonly router = new Router({ sensitive: true, strict: true, exclusive: 'specificity' });
  readonly #operations: Operation[] = [];
  readonly #entries: Entry[] = [];
  readonly #allow = new Map<string, Set<string>>();
  readonly #found = new Map<string, Entry | null>();

  /** The routes of one resource: its operations join the API's in the order declared. */
  resource(): ResourceRouter {
    const paths: string[] = [];
    return {
      route: (operation, middleware) => {
        const method = operation.method.toUpperCase();
        const guard = middleware.find(isGuard);
        // A fixed cost above its scope's limit fails the start here, where the route has a name.
        guard?.cost?.check(`${method} ${operation.path}`);
        this.#operations.push(guard?.cost ? { ...operation, cost: guard.cost.units } : operation);
        this.router.register(operation.path, [method], [...middleware] as Parameters<Router['register']>[2]);
        const methods = method === 'GET' ? ['GET', 'HEAD'] : [method];
        this.#add(operation.path, methods, guard, operation.priority, operation.list?.cached === true);
        const allowed = this.#allow.get(operation.path) ?? new Set(['OPTIONS']);
        for (const answered of methods) allowed.add(answered);
        this.#allow.set(operation.path, allowed);
        if (!paths.includes(operation.path)) paths.push(operation.path);
      },
      // Registered for the methods the path does not answer only, so that no request matches two routes of one
      // path: which of two equals the router runs is not something its documentation and its code agree on.
      refuseOtherMethods: (guardFor, anonymous = 'any') => {
        for (const path of paths) {
          const allow = this.allowOf(path)!;
          const answered = this.#allow.get(path)!;
          const others = METHODS.filter((method) => method === 'OPTIONS' || !answered.has(method));
          const guard = guardFor(path);
          this.router.register(path, others, [
            guard,
            (ctx) => {
              if (!ctx.state.user && (anonymous === 'none' || (anonymous === 'read' && !SAFE_METHODS.has(ctx.method))))
                throw Errors.notAuthenticated();
              if (ctx.method !== 'OPTIONS') throw Errors.methodNotAllowed(ctx.method, allow);
              ctx.status = 204; // with Allow, as every answer of the path
            },
          ] as Parameters<Router['register']>[2]);
          this.#add(path, others, isGuard(guard) ? guard : undefined, undefined, false);
        }
      },
    };
  }

  /** Every declared operation, in the order declared: the API document's and the typed client's. */
  get operations(): readonly Operation[] {
    return this.#operations;
  }

  /** A declared path's `Allow`: its methods and OPTIONS, in DRF's order; undefined for another path. */
  allowOf(template: string): string | undefined {
    const methods = this.#allow.get(template);
    return methods && METHOD_ORDER.filter((m) => methods.has(m)).join(', ');
  }

  /** True when some route is declared at `path`. */
  has(path: string): boolean {
    return this.#entries.some((entry) => entry.regexp.test(path));
  }

  /** The route the router runs for `method` at `path`, if any (kept per method and path, up to a bound). */
  lookup(path: string, method: string): DeclaredRoute | undefined {
    const key = `${method} ${path}`;
    let found = this.#found.get(key);
    if (found === undefined) {
      found = this.#choose(path, method);
      // Only short paths a route takes are kept: a client's made-up paths cost a lookup, never memory.
      if (found !== null && path.length <= KEPT_PATH_LENGTH) {
        if (this.#found.size >= LOOKUPS_KEPT) this.#found.clear();
        this.#found.set(key, found);
      }
    }
    return found ?? undefined;
  }

  /** As the router chooses (exclusive 'specificity'): the route with the fewest parameters. */
  #choose(path: string, method: string): Entry | null {
    let chosen: Entry | null = null;
    for (const entry of this.#entries) {
      if (!entry.methods.includes(method)) continue;
      if ((!chosen || entry.params < chosen.params) && entry.regexp.test(path)) chosen = entry;
    }
    return chosen;
  }

  #add(
    template: string,
    methods: string[],
    guard: GuardMiddleware | undefined,
    priority: Operation['priority'],
    cached: boolean,
  ) {
    const declared = this.#entries.filter((entry) => entry.template === template).flatMap((entry) => entry.methods);
    const twice = methods.filter((method) => declared.includes(method));
    if (twice.length > 0) throw new Error(`${template} is declared twice for ${twice.join(', ')}`);
    const { regexp, keys } = pathToRegexp(template, { sensitive: true, trailing: false });
    const refuseKnown = guard?.refuseKnown;
    this.#entries.push({ template, methods, regexp, params: keys.length, refuseKnown, priority, cached });
    this.#found.clear();
  }
}

/** Lookups kept by method and path: every declared path many times over (ids included), within a bound. */
const LOOKUPS_KEPT = 10_000;
const KEPT_PATH_LENGTH = 256;

/** A route guard (src/edge/guard.ts), which carries its early refusal. */
function isGuard(middleware: Middleware): middleware is GuardMiddleware {
  return 'refuseKnown' in middleware;
}
