import cluster from 'node:cluster';

/** What a benchmark's primary sends each forked worker: the stores to use and the port to serve on. */
export interface BenchSetup {
  databaseUrl: string;
  redisUrl: string;
  httpPort: number;
}

/**
 * The settings a benchmark worker's loadConfig starts from: its stores, a fixed cursor secret and
 * no log. A bench spreads its own settings after these.
 */
export function benchSettings(setup: BenchSetup): Record<string, string> {
  return {
    DATABASE_URL: setup.databaseUrl,
    REDIS_URL: setup.redisUrl,
    CURSOR_SECRET: 'bench-cursor-secret-0123456789',
    LOG_LEVEL: 'silent',
  };
}

/** In a forked worker: says 'ready', then runs `serve` with the setup the primary sends first. */
export function serveWhenSetUp<S>(serve: (setup: S) => void | Promise<void>): void {
  process.once('message', (setup: S) => void serve(setup));
  process.send?.('ready');
}

/**
 * A benchmark's entry point: in the primary, runs `primary` with the command line's numbers
 * (process.argv[2] on, each one missing taken from `defaults`); in a worker, {@link serveWhenSetUp}.
 */
export async function runBench<S>(
  primary: (...args: number[]) => Promise<void>,
  defaults: number[],
  serve: (setup: S) => void | Promise<void>,
): Promise<void> {
  if (!cluster.isPrimary) return serveWhenSetUp(serve);
  await primary(...defaults.map((fallback, i) => Number(process.argv[2 + i] ?? fallback)));
}
