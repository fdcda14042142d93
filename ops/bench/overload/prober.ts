/**
 * The health prober of `npm run bench:overload`, a process of its own: `GET /healthz` every 250 ms, each on a
 * new TCP connection, as an orchestrator's probe comes, at a fixed rate whatever the answers take. Each probe's
 * outcome goes to the parent as a `Probe`; `{ target }` points it at a service (null: pauses it), and `{ stop }`
 * ends it once every probe sent has its outcome (at most PROBE_TIMEOUT_MS later), then `{ drained }` is sent.
 */
import { PROBE_INTERVAL_MS, PROBE_TIMEOUT_MS, type Probe } from './outcomes.js';
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

let next = performance.now();
while (!stopped) {
  const base = target;
  if (base !== null) {
    const sentAt = Date.now();
    outstanding += 1;
    sendOnce(base, { method: 'GET', path: '/healthz' }, performance.now(), PROBE_TIMEOUT_MS, (outcome) => {
      outstanding -= 1;
      if (process.connected) process.send!({ target: base, sentAt, outcome } satisfies Probe);
      drainedIfDone();
    });
  }
  // Late (a busy host): the next probe goes at once, but the schedule never bunches up more than one beat.
  next = Math.max(next + PROBE_INTERVAL_MS, performance.now() - PROBE_INTERVAL_MS);
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, next - performance.now())));
}
drainedIfDone();
