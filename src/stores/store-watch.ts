import type { Logger } from 'pino';
import { describeStoreError, storeFailureLine, type StoreSetting } from './store-errors.js';

/** One store the primary watches: its setting, its address, and a check that rejects while it cannot be used. */
export interface WatchedStore {
  /** How the store is named in lines: `PostgreSQL` or `Redis`. */
  name: string;
  setting: StoreSetting;
  address?: string;
  /** Rejects with the reason the store cannot be used; bounded by the check itself. */
  check(): Promise<void>;
  close(): Promise<void>;
}

export interface StoreWatchOptions {
  /** How often the stores are checked while every one answers. */
  checkEveryMs: number;
  /** How often they are checked while one is down, to say soon that it is back. */
  recheckEveryMs: number;
  /** While a store stays down, its line is logged again at most this often. */
  repeatEveryMs: number;
}

/** The primary's view of its stores: the failing ones, each with its one line. */
export interface StoreWatch {
  /** The stores that failed their last check, with their lines (after the first round of checks). */
  failing(): Array<{ name: string; line: string }>;
  close(): Promise<void>;
}

/**
 * Checks each store now and then every `checkEveryMs` (`recheckEveryMs` while one is down), and logs what an operator needs
 * (docs/operations.md "When a store is down"): a store that fails is logged once, as one line
 * naming its setting, the cause and what to do, again every `repeatEveryMs` while it lasts, and
 * once more when it answers again. Resolves after the first round of checks.
 */
export async function watchStores(
  stores: readonly WatchedStore[],
  logger: Logger,
  options: StoreWatchOptions,
): Promise<StoreWatch> {
  const state = new Map<WatchedStore, { line: string; loggedAt: number; since: number } | undefined>();
  const checkOne = async (store: WatchedStore) => {
    try {
      await store.check();
      const was = state.get(store);
      state.set(store, undefined);
      if (was)
        logger.info({ store: store.setting, downForS: seconds(Date.now() - was.since) }, `${store.name} answers again`);
    } catch (error) {
      const line = storeFailureLine(store.setting, store.address, describeStoreError(error, store.setting));
      const was = state.get(store);
      const now = Date.now();
      if (was && was.line === line && now - was.loggedAt < options.repeatEveryMs) return;
      const since = was?.since ?? now;
      state.set(store, { line, loggedAt: now, since });
      logger.error({ store: store.setting, downForS: seconds(now - since) }, `${store.name} cannot be used: ${line}`);
    }
  };
  let closed = false;
  let timer: NodeJS.Timeout | undefined;
  let round: Promise<unknown> = Promise.resolve();
  const next = async (): Promise<void> => {
    round = Promise.all(stores.map(checkOne));
    await round;
    if (closed) return;
    const anyDown = [...state.values()].some((down) => down !== undefined);
    timer = setTimeout(next, anyDown ? options.recheckEveryMs : options.checkEveryMs);
    timer.unref();
  };
  await next();
  let closing: Promise<void> | undefined;
  return {
    failing: () =>
      stores.flatMap((store) => {
        const down = state.get(store);
        return down ? [{ name: store.name, line: down.line }] : [];
      }),
    close: () =>
      (closing ??= (async () => {
        closed = true;
        clearTimeout(timer);
        await round.catch(() => {});
        await Promise.allSettled(stores.map((store) => store.close()));
      })()),
  };
}

function seconds(ms: number): number {
  return Math.round(ms / 1000);
}
