import { startPacedClient } from '../harness/paced.js';
import { latencies as summarise } from '../harness/stats.js';

export type GoodMode = 'get' | 'login' | 'off';

/** The good client's answers in one window, as a row reports them. */
export interface Latencies {
  n: number;
  p50Ms: number;
  p99Ms: number;
  /** Answers other than 2xx (0: no answer within 10 s), by status. */
  failures: Record<number, number>;
}

export interface GoodClient {
  setMode(mode: GoodMode): void;
  /** The answers to requests sent between `from` and `to` (epoch ms) in `mode`. */
  latencies(mode: GoodMode, from: number, to: number): Latencies;
}

/**
 * The well-behaved client of `npm run bench:abuse`, a paced client (harness/paced.ts): it reads page 1 with `user`'s
 * token at `rates.get` a second, or logs in as `user` (whose password seed.ts made `<name>-password`) at `rates.login`
 * a second, each request on a new connection, at a fixed rate whatever the answers take. A login comes from an address
 * of its own each time, as many users behind many addresses would: the per-address login budget is the abuser's to
 * meet, not this client's.
 */
export async function startGoodClient(
  base: string,
  { token, username }: { token: string; username: string },
  rates: { get: number; login: number },
): Promise<GoodClient> {
  const client = await startPacedClient();
  const requests = {
    get: {
      method: 'GET',
      path: '/api/tasks/',
      headers: { Authorization: `Bearer ${token}`, 'X-Forwarded-For': '10.251.0.1' },
    },
    login: {
      method: 'POST',
      path: '/api/auth/token/',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ username, password: `${username}-password` }),
      newAddress: true,
    },
  } as const;
  return {
    setMode: (mode) =>
      client.pace(
        mode === 'off' ? null : { label: mode, base, perS: rates[mode], requests: [{ kind: mode, ...requests[mode] }] },
      ),
    latencies(mode, from, to) {
      const samples = client.samples(mode, mode, from, to);
      const answers = samples.map(({ outcome, ms }) => ({
        status: typeof outcome === 'object' ? outcome.status : 0,
        ms,
      }));
      const { count: n, p50: p50Ms, p99: p99Ms } = summarise(answers.map((a) => a.ms));
      const failures: Record<number, number> = {};
      for (const { status } of answers)
        if (status < 200 || status > 299) failures[status] = (failures[status] ?? 0) + 1;
      return { n, p50Ms, p99Ms, failures };
    },
  };
}
