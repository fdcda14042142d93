import type { Cluster, Redis } from 'ioredis';
import { DistinctRefused } from './distinct-refused.js';
import { createPseudonyms } from './pseudonym.js';
import { COUNTERS_PER_CLIENT, TopClients } from './top-clients.js';

/** One client among a process's heaviest refused of a scope, as it reports them to its primary. */
export interface WatchedClient {
  /** The throttle's identity (`ip:…`, `user:…`, a login's username): only the CLI shows it. */
  ident: string;
  /** The name metrics and logs use (see pseudonymOf). */
  client: string;
  count: number;
  error: number;
}

/** A process's report of one scope over the window: its counted clients and their merge floor. */
export interface WatchedScope {
  scope: string;
  total: number;
  /** The most a client this report does not list may have been refused here. */
  floor: number;
  clients: WatchedClient[];
}

/**
 * Who a process refused (docs/throttling.md "Who is throttled"): the heaviest clients per scope
 * over THROTTLE_TOP_WINDOW for its primary to merge, and distinct refused clients per scope
 * cluster-wide. `refused()` is the one call the throttle makes per refusal: memory only, no I/O.
 */
export class ThrottleWatch {
  readonly #top: TopClients;
  readonly #distinct: DistinctRefused;
  /** The pseudonym of a client, as metrics and the access log name it. */
  readonly pseudonym: (ident: string) => string;

  constructor(deps: {
    redis: Redis | Cluster;
    keyPrefix: string;
    secret: string;
    k: number;
    windowMs: number;
    now: () => number;
    onDistinct: (counts: ReadonlyMap<string, number>) => void;
    onError: (error: unknown) => void;
  }) {
    this.#top = new TopClients(deps.k, deps.windowMs, deps.now);
    this.#distinct = new DistinctRefused({ ...deps, onCounts: deps.onDistinct });
    this.pseudonym = createPseudonyms(deps.secret);
  }

  /** Counts one refused request of `ident` in `scope`. */
  refused(scope: string, ident: string): void {
    this.#top.add(scope, ident);
    this.#distinct.add(scope, ident);
  }

  /** Every scope's heaviest refused clients of this process over the window, with their pseudonyms. */
  report(): WatchedScope[] {
    const capacity = this.#top.k * COUNTERS_PER_CLIENT;
    return this.#top.report().map(({ scope, total, clients }) => ({
      scope,
      total,
      floor: clients.length >= capacity ? (clients[clients.length - 1]?.count ?? 0) : 0,
      clients: clients.map(({ key, count, error }) => ({ ident: key, client: this.pseudonym(key), count, error })),
    }));
  }

  /** Sends what is buffered now (tests; a draining process). */
  flush(): Promise<void> {
    return this.#distinct.flush();
  }

  /** Stops the flush timer; safe twice. */
  close(): void {
    this.#distinct.close();
  }
}
