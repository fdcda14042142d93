/**
 * The well-behaved client of `npm run bench:abuse`, in a process of its own so that its clock is
 * not the abuser's event loop. Forked with its settings as JSON in argv[2]; sends requests at a
 * fixed rate whatever the answers take (an open loop: a slow service does not slow the client
 * down, so slowness shows in the latencies), each on a new connection, and reports every answer
 * to the parent as a `Sample`. The parent switches the mode (`{ mode }`); it stops once the parent disconnects.
 */
import { request } from 'node:http';

export type GoodMode = 'get' | 'login' | 'off';

export interface GoodClientSettings {
  base: string;
  token: string;
  username: string;
  password: string;
  /** Requests per second, by mode. */
  rates: { get: number; login: number };
}

/** One answer: when it was sent (epoch ms), how long it took, its status (0: no answer). */
export interface Sample {
  mode: GoodMode;
  sentAt: number;
  ms: number;
  status: number;
}

const TIMEOUT_MS = 10_000;
/** More unanswered requests than this and the client skips a beat rather than pile up sockets. */
const MAX_OUTSTANDING = 200;

function send(settings: GoodClientSettings, mode: 'get' | 'login', sequence: number): void {
  const sentAt = Date.now();
  const started = performance.now();
  const body = mode === 'login' ? JSON.stringify({ username: settings.username, password: settings.password }) : '';
  // A login comes from an address of its own each time, as many users behind many addresses
  // would: the per-address login budget is the abuser's to meet, not this client's.
  const headers: Record<string, string> =
    mode === 'login'
      ? {
          'Content-Type': 'application/json',
          'X-Forwarded-For': `10.250.${(sequence >> 8) & 255}.${sequence & 255}`,
        }
      : { Authorization: `Bearer ${settings.token}`, 'X-Forwarded-For': '10.251.0.1' };
  outstanding += 1;
  let reported = false;
  const report = (status: number) => {
    if (reported) return;
    reported = true;
    outstanding -= 1;
    if (process.connected) process.send!({ mode, sentAt, ms: performance.now() - started, status } satisfies Sample);
  };
  const req = request(
    `${settings.base}${mode === 'login' ? '/api/auth/token/' : '/api/tasks/'}`,
    { method: mode === 'login' ? 'POST' : 'GET', headers, agent: false, timeout: TIMEOUT_MS },
    (res) => {
      res.on('data', () => {});
      res.on('end', () => report(res.statusCode ?? 0));
      res.on('error', () => report(0));
    },
  );
  req.on('timeout', () => req.destroy(new Error('timeout')));
  req.on('error', () => report(0));
  req.end(body);
}

let outstanding = 0;
let mode: GoodMode = 'off';
let stopped = false;

async function run(settings: GoodClientSettings): Promise<void> {
  let sequence = 0;
  let next = performance.now();
  while (!stopped) {
    const current = mode;
    const interval = current === 'off' ? 100 : 1000 / settings.rates[current];
    next += interval;
    if (current !== 'off' && outstanding < MAX_OUTSTANDING) send(settings, current, (sequence += 1));
    // Late (a busy machine): catch up at once, but never by more than one beat.
    next = Math.max(next, performance.now() - interval);
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, next - performance.now())));
  }
}

const settings = JSON.parse(process.argv[2] ?? '{}') as GoodClientSettings;
process.on('message', (message: { mode: GoodMode }) => (mode = message.mode));
process.on('disconnect', () => (stopped = true));
await run(settings);
