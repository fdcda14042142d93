/**
 * The paced client's process (forked by startPacedClient in harness/paced.ts). A message `{ plan }` replaces what
 * it sends (null: nothing); `{ drain }` stops it once every request sent has its outcome, then `{ drained }` is
 * sent. Each outcome goes to the parent as a `PacedSample`.
 */
import { sendOnce } from './http-pool.js';
import { PACED_TIMEOUT_MS, type PacedRequest, type PacedSample, type PacePlan } from './paced.js';

/** More unanswered requests than this and the client skips a beat rather than pile up sockets. */
const MAX_OUTSTANDING = 200;

let plan = null as PacePlan | null;
let draining = false;
let outstanding = 0;
let sequence = 0;
const drainedIfDone = () => {
  if (!draining || outstanding > 0 || !process.connected) return;
  process.send!({ drained: true });
  process.disconnect();
};
process.on('message', (message: { plan?: PacePlan | null; drain?: boolean }) => {
  if (message.plan !== undefined) plan = message.plan;
  if (message.drain) draining = true;
});
process.on('disconnect', () => (draining = true));

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

function send(label: string, base: string, { kind, newAddress, ...spec }: PacedRequest): void {
  if (outstanding >= MAX_OUTSTANDING) return;
  const [sentAt, started] = [Date.now(), performance.now()];
  const n = (sequence += 1);
  const address: Record<string, string> = newAddress
    ? { 'X-Forwarded-For': `10.250.${(n >> 8) & 255}.${n & 255}` }
    : {};
  outstanding += 1;
  sendOnce(base, { ...spec, headers: { ...spec.headers, ...address } }, started, PACED_TIMEOUT_MS, (outcome) => {
    outstanding -= 1;
    if (process.connected)
      process.send!({ label, kind, sentAt, ms: performance.now() - started, outcome } satisfies PacedSample);
    drainedIfDone();
  });
}

let next = performance.now();
while (!draining) {
  const current = plan;
  const interval = current === null ? 100 : 1000 / current.perS;
  const requests = current?.requests ?? [];
  for (const [i, request] of requests.entries()) {
    if (i > 0) await sleep(next + (i * interval) / requests.length - performance.now());
    if (!draining) send(current!.label, current!.base, request);
  }
  // Late (a busy host): the next beat goes at once, but the schedule never bunches up more than one beat.
  next = Math.max(next + interval, performance.now() - interval);
  await sleep(next - performance.now());
}
drainedIfDone();
