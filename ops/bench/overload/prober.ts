/**
 * The prober of `npm run bench:overload`, a process of its own: a newcomer's requests, each on a new TCP
 * connection, at a fixed rate whatever the answers take. Every 250 ms it sends `GET /healthz` (as an orchestrator's
 * probe comes) and, half a beat later, `GET /api/tasks/` (page 1, anonymous: a cached page). Each probe's outcome
 * goes to the parent as a `Probe`; `{ target }` points it at a service (null: pauses it), and `{ stop }` ends it
 * once every probe sent has its outcome (at most PROBE_TIMEOUT_MS later), then `{ drained }` is sent.
 */
import { PROBE_INTERVAL_MS, PROBE_PATHS, PROBE_TIMEOUT_MS, type Probe, type ProbeKind } from './outcomes.js';
import { sendOnce } from './send.js';

let target: string | null = null;
let stopped = false;
let outstanding = 0;
const drainedIfDone = () => {
  if (!stopped || outstanding > 0 || !process.connected) return;
  process.send!({ drained: true });
  process.disconnect();
};
process.on('message', (message: { target?: string | null; stop?: boolean }) => {
  if (message.target !== undefined) target = message.target;
  if (message.stop) stopped = true;
});
process.on('disconnect', () => process.exit(0));

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

function probe(kind: ProbeKind): void {
  const base = target;
  if (base === null || stopped) return;
  const sentAt = Date.now();
  outstanding += 1;
  sendOnce(base, { method: 'GET', path: PROBE_PATHS[kind] }, performance.now(), PROBE_TIMEOUT_MS, (outcome) => {
    outstanding -= 1;
    if (process.connected) process.send!({ target: base, kind, sentAt, outcome } satisfies Probe);
    drainedIfDone();
  });
}

let next = performance.now();
while (!stopped) {
  probe('healthz');
  await sleep(next + PROBE_INTERVAL_MS / 2 - performance.now());
  probe('page');
  // Late (a busy host): the next probe goes at once, but the schedule never bunches up more than one beat.
  next = Math.max(next + PROBE_INTERVAL_MS, performance.now() - PROBE_INTERVAL_MS);
  await sleep(next - performance.now());
}
drainedIfDone();
