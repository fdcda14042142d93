import { randomBytes } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { createUser } from '../../src/auth/users.repository.js';
import { loadConfig } from '../../src/settings/config.js';
import { buildDeps, type Deps } from '../../src/deps.js';
import type { ExtraRoutes } from '../../src/api/app.js';
import { createApiListener } from '../../src/listener/listener.js';
import { createApiServer } from '../../src/server/server.js';
import { createTestDatabase } from './database.js';
import { request, type TestResponse } from './http.js';

export interface TestApp {
  /** `http://127.0.0.1:<port>` */
  base: string;
  deps: Deps;
  databaseUrl: string;
  redisPrefix: string;
  /** The listening HTTP server (a test may watch its requests). */
  server: Server;
  /** Creates a user and returns a live token for it. */
  login(username: string, password?: string): Promise<string>;
  close(): Promise<void>;
}

export interface TestAppOptions {
  /** Replaces the app's logger (a test that reads what was logged). */
  logger?: Logger;
  /** Extra routers mounted after the API's (`createApi`'s `extraRoutes`). */
  routes?: ExtraRoutes;
  /** Settings that depend on the fresh database's URL (a replica of that database). */
  databaseEnv?: (databaseUrl: string) => Record<string, string>;
}

/**
 * POST /api/auth/token/ as a client does: a 503 (the login budget unchecked in time, as a loaded host may answer)
 * is tried again after Retry-After, at most five times in all, each said.
 */
export async function postLogin(base: string, username: string, password: string): Promise<TestResponse> {
  const body = { username, password };
  let response = await request(base, 'POST', '/api/auth/token/', { body });
  for (let tries = 1; response.status === 503 && tries < 5; tries += 1) {
    console.log(`# the login of ${username} was answered 503 (${response.text}); again after Retry-After`);
    await sleep(1_000 * Number(response.headers.get('retry-after') ?? 1));
    response = await request(base, 'POST', '/api/auth/token/', { body });
  }
  return response;
}

/**
 * Starts the real Koa application in this process on a free port, against a fresh database and
 * a private Redis key prefix. Throttling is on with generous default rates unless `env` says
 * otherwise. `env` takes any configuration variable.
 */
export async function startTestApp(
  env: Record<string, string> = {},
  label = 'app',
  options: TestAppOptions = {},
): Promise<TestApp> {
  const redisUrl = process.env.TEST_REDIS_URL;
  if (!redisUrl) throw new Error('TEST_REDIS_URL is not set: run tests with `npm test`');
  const database = await createTestDatabase(label);
  const redisPrefix = `test:${label}:${randomBytes(4).toString('hex')}:`;
  const config = loadConfig({
    DATABASE_URL: database.url,
    REDIS_URL: redisUrl,
    REDIS_PREFIX: redisPrefix,
    CURSOR_SECRET: 'test-cursor-secret-0123456789',
    LOG_LEVEL: 'silent',
    // The shared Redis of a loaded test host may answer later than the shipped 250 ms: a late answer would refuse
    // a write (its head unpublished) or a throttle check with 503. Tests of those deadlines set their own.
    THROTTLE_TIMEOUT_MS: '2000',
    THROTTLE_ANON: '100000/min',
    THROTTLE_USER: '100000/min',
    THROTTLE_TOKEN_OBTAIN: '100000/min',
    THROTTLE_REPORTS: '100000/min',
    THROTTLE_LOGIN: '100000/min',
    DATABASE_POOL_SIZE: '5',
    // Logins wait for a hashing slot as long as a loaded test machine needs; budget tests set their own.
    LOGIN_HASH_WAIT_MS: '30000',
    ...env,
    ...options.databaseEnv?.(database.url),
  });
  const { deps, close } = await buildDeps(config, 'test');
  if (options.logger) deps.logger = options.logger;
  // The production server with its limits (timeouts, connection cap) and listener, on a free port.
  const server = createApiServer(config, createApiListener(deps, options.routes));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  let closed = false;
  return {
    base,
    deps,
    databaseUrl: database.url,
    redisPrefix,
    server,
    async login(username, password = `${username}-pass-123`) {
      await createUser(deps.db, username, password);
      const response = await postLogin(base, username, password);
      if (response.status !== 200) {
        // What the app's Redis looked like then: a 503 is the login budget left unchecked.
        const began = performance.now();
        const ping = await deps.redis.ping().then(
          () => `PING answered in ${(performance.now() - began).toFixed(0)} ms`,
          (error: Error) => `PING failed: ${error.message}`,
        );
        const redis = `its Redis client ${deps.redis.status}, ${ping}`;
        throw new Error(`login of ${username} failed: ${response.status} ${response.text} (${redis})`);
      }
      return response.body.token as string;
    },
    async close() {
      if (closed) return;
      closed = true;
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await close();
      await database.drop();
    },
  };
}
