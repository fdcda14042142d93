import { mergeHeavyHitters } from '../throttle/heavy-hitters.js';
import type { WatchedClient, WatchedScope } from '../throttle/throttle-watch.js';

/** One scope's heaviest refused clients on this host, with real identities (for the CLI) and pseudonyms. */
export interface HostTop {
  scope: string;
  /** Refusals of the scope in the window, every client. */
  total: number;
  clients: WatchedClient[];
}

/**
 * The host's top `k` refused clients per scope, from its processes' reports (docs/throttling.md
 * "Who is throttled"): their counts summed per client, each within the sum of the processes'
 * bounds, then the `k` heaviest kept.
 */
export function mergeWatched(reports: ReadonlyArray<readonly WatchedScope[]>, k: number): HostTop[] {
  const byScope = new Map<string, WatchedScope[]>();
  for (const report of reports) {
    for (const scope of report) {
      const list = byScope.get(scope.scope);
      if (list) list.push(scope);
      else byScope.set(scope.scope, [scope]);
    }
  }
  const tops: HostTop[] = [];
  for (const [scope, parts] of byScope) {
    const names = new Map<string, string>();
    for (const part of parts) for (const { ident, client } of part.clients) names.set(ident, client);
    const merged = mergeHeavyHitters(
      parts.map((part) => ({
        entries: part.clients.map(({ ident, count, error }) => ({ key: ident, count, error })),
        floor: part.floor,
      })),
    );
    tops.push({
      scope,
      total: parts.reduce((sum, part) => sum + part.total, 0),
      clients: merged
        .slice(0, k)
        .map(({ key, count, error }) => ({ ident: key, client: names.get(key) ?? key, count, error })),
    });
  }
  return tops.sort((a, b) => (a.scope < b.scope ? -1 : 1));
}
