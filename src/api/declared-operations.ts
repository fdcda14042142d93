import { Redis } from 'ioredis';
import { DummyDriver, Kysely, PostgresAdapter, PostgresIntrospector, PostgresQueryCompiler } from 'kysely';
import { pino } from 'pino';
import type { Database } from '../../db/database.js';
import { systemClock } from '../base/clock.js';
import { createMetrics } from '../base/metrics.js';
import type { Deps } from '../deps.js';
import { loadConfig } from '../settings/config.js';
import { createConcurrencyLimiter } from '../throttle/concurrency.js';
import { createThrottler } from '../throttle/index.js';
import { createApi } from './app.js';
import type { Operation } from './openapi/operation.js';

/**
 * Every operation the API's routes declare, in the order declared (the API document's), without serving:
 * for `npm run client` and the tests that read the API document from the code. The routes are built as the
 * app builds them, over stores that are never connected to: a route only uses them when it runs, and none
 * runs here.
 */
export function declaredOperations(): readonly Operation[] {
  return createApi(unconnectedDeps()).operations;
}

/** Deps with the default settings whose stores connect on first use, which never comes. */
function unconnectedDeps(): Deps {
  const config = loadConfig({});
  // ioredis connects on the first command when asked to; Kysely's DummyDriver never connects.
  const redis = new Redis({ lazyConnect: true });
  const db = new Kysely<Database>({
    dialect: {
      createAdapter: () => new PostgresAdapter(),
      createDriver: () => new DummyDriver(),
      createIntrospector: (kysely) => new PostgresIntrospector(kysely),
      createQueryCompiler: () => new PostgresQueryCompiler(),
    },
  });
  return {
    config,
    db,
    redis,
    clock: systemClock,
    logger: pino({ enabled: false }),
    metrics: createMetrics(),
    commands: {
      execute: () => Promise.reject(new Error('the declared routes do not run')),
      close: async () => {},
    },
    throttler: createThrottler({ redis, keyPrefix: config.REDIS_PREFIX }),
    slots: createConcurrencyLimiter({ redis, keyPrefix: config.REDIS_PREFIX, expiryMs: 1, timeoutMs: 1 }),
    cursorSecret: '',
  };
}
