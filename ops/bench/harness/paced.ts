import type { RequestSpec, Outcome } from './http-pool.js';
import { forkScript } from './run.js';

/** One request of a plan, and the kind its outcomes are filed under. */
export interface PacedRequest extends RequestSpec {
  kind: string;
  /** Sent from an address of its own each time (X-Forwarded-For 10.250.x.y from the request's number). */
  newAddress?: boolean;
}

/** What the client sends: `perS` times a second, each of `requests` in turn, spread evenly over the beat. */
export interface PacePlan {
  /** Filed with each outcome: the target, or the mode, the outcomes are picked by. */
  label: string;
  base: string;
  perS: number;
  requests: PacedRequest[];
}

/** One request's outcome: what it was, under which plan, when it was sent (epoch ms), ms until its outcome. */
export interface PacedSample {
  label: string;
  kind: string;
  sentAt: number;
  ms: number;
  outcome: Outcome;
}

/** How long a request may wait for its whole answer before it counts as unanswered. */
export const PACED_TIMEOUT_MS = 10_000;

export interface PacedClient {
  /** Sends `plan` from now on (null: nothing). */
  pace(plan: PacePlan | null): void;
  /** The outcomes of the requests of `kind` sent under `label` between `from` and `to` (epoch ms). */
  samples(label: string, kind: string, from: number, to: number): PacedSample[];
  /** Stops sending; resolves once every request sent has its outcome (at most PACED_TIMEOUT_MS + 5 s later). */
  drain(): Promise<void>;
}

/**
 * A newcomer or a well-behaved client in a process of its own (harness/paced-client.ts), so that its clock is not
 * the load's: it sends at a fixed rate whatever the answers take (an open loop: slowness shows in the latencies,
 * not in fewer requests), each request on a new connection, and reports every outcome here.
 */
export async function startPacedClient(): Promise<PacedClient> {
  const child = await forkScript(new URL('./paced-client.ts', import.meta.url));
  const seen: PacedSample[] = [];
  let drained: () => void = () => {};
  const done = new Promise<void>((resolve) => (drained = resolve));
  child.on('message', (message: PacedSample | { drained: true }) => {
    if ('drained' in message) drained();
    else seen.push(message);
  });
  child.on('exit', () => drained());
  return {
    pace: (plan) => child.connected && child.send({ plan }),
    samples: (label, kind, from, to) =>
      seen.filter((s) => s.label === label && s.kind === kind && s.sentAt >= from && s.sentAt < to),
    async drain() {
      if (child.connected) child.send({ drain: true });
      await Promise.race([done, new Promise((resolve) => setTimeout(resolve, PACED_TIMEOUT_MS + 5_000))]);
    },
  };
}
