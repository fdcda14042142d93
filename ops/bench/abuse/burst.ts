import { Agent, request } from 'node:http';

/** One request of a burst. */
export interface BurstRequest {
  method?: 'GET' | 'POST';
  path: string;
  headers?: Record<string, string>;
  body?: string;
}

/** What a burst did: how many answers of each status, how many bytes of body, how long it took. */
export interface BurstResult {
  requests: number;
  seconds: number;
  reqPerS: number;
  statuses: Record<number, number>;
  bodyBytes: number;
}

const TIMEOUT_MS = 30_000;

/**
 * Sends `total` requests to `base` as fast as `concurrency` keep-alive connections allow, the
 * i-th made by `make(i)`; a request that fails or gets no answer within 30 s counts as status 0.
 */
export async function burst(
  base: string,
  total: number,
  concurrency: number,
  make: (i: number) => BurstRequest,
): Promise<BurstResult> {
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  const statuses: Record<number, number> = {};
  let bodyBytes = 0;
  let issued = 0;
  const one = (spec: BurstRequest) =>
    new Promise<void>((resolve) => {
      let counted = false;
      const count = (status: number) => {
        if (counted) return;
        counted = true;
        statuses[status] = (statuses[status] ?? 0) + 1;
        resolve();
      };
      const req = request(
        `${base}${spec.path}`,
        { method: spec.method ?? 'GET', headers: spec.headers, agent, timeout: TIMEOUT_MS },
        (res) => {
          res.on('data', (chunk: Buffer) => (bodyBytes += chunk.length));
          res.on('end', () => count(res.statusCode ?? 0));
          res.on('error', () => count(0));
        },
      );
      req.on('timeout', () => req.destroy(new Error('timeout')));
      req.on('error', () => count(0));
      req.end(spec.body);
    });
  const lane = async () => {
    while (issued < total) await one(make((issued += 1) - 1));
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: Math.min(concurrency, total) }, lane));
  const seconds = (performance.now() - started) / 1000;
  agent.destroy();
  return { requests: total, seconds, reqPerS: total / seconds, statuses, bodyBytes };
}
