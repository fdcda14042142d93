import type { FloodResult } from './flood.js';
import type { MixResult, MixRun } from './mix.js';
import { latencies } from '../harness/stats.js';
import type { PacedClient, PacedSample } from '../harness/paced.js';
import { PROBE_INTERVAL_MS, PROBE_PATHS, PROBE_TIMEOUT_MS, type Outcome } from './outcomes.js';
import { sendOnce } from '../harness/http-pool.js';
import { cpuSeconds } from '../harness/service.js';
import type { LoadProcess } from './processes.js';
import {
  readAdmission,
  serviceCpuSeconds,
  settle,
  type AdmissionSample,
  type Counters,
  type Instance,
} from './service.js';

/** Idle time before each run, once the instance has settled (see `settle`). */
export const REST_MS = 4_000;

/** Times page 1 is asked, each on a new connection, before each run: new connections spread over both workers. */
export const WARM_PAGE_ASKS = 10;

/**
 * Asks page 1 WARM_PAGE_ASKS times, one after another, each on a new connection, so that each web worker has
 * served it and keeps it in its read cache (until a create publishes a new head): the newcomer's cached page.
 */
async function warmPage(base: string): Promise<void> {
  for (let i = 0; i < WARM_PAGE_ASKS; i += 1)
    await new Promise<Outcome>((resolve) =>
      sendOnce(base, { method: 'GET', path: PROBE_PATHS.page }, performance.now(), PROBE_TIMEOUT_MS, resolve),
    );
}

/** What one scenario measured beside the load's own figures. */
export interface Measured {
  mode: Instance['mode'];
  /** The window the load ran in (epoch ms): the health probes sent in it are the scenario's. */
  from: number;
  to: number;
  target: string;
  /** The instance's counters from settled before to settled after. */
  delta: Counters;
  /** CPU of the load process and of the service (primary and workers) over the run, in % of one core. */
  loadCpuPct: number;
  serviceCpuPct: number;
  /** The instance's admission gauges once a second through the run (none with admission off). */
  admission: AdmissionSample[];
}

export interface MixScenario extends Measured {
  label: string;
  /** The rate as a multiple of the capacity found. */
  multiple: number;
  mix: MixResult;
}

export interface FloodScenario extends Measured {
  flood: FloodResult;
}

/** The figures of one kind of probe in a window: latencies of the answered ones, and how many got none in time. */
export interface Health {
  sent: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** Probes with no answer within PROBE_TIMEOUT_MS, or whose connection failed. */
  unanswered: number;
  /** Answers other than 200. */
  not200: number;
}

export interface Bench {
  load: LoadProcess;
  /** A newcomer: `/healthz` and, half a beat later, page 1, each on a new connection, every PROBE_INTERVAL_MS. */
  prober: PacedClient;
  read: (instance: Instance) => Promise<Counters>;
}

async function measure<T>(bench: Bench, instance: Instance, seconds: number, run: () => Promise<T>) {
  const target = instance.cluster.base;
  const probes = Object.entries(PROBE_PATHS).map(([kind, path]) => ({ kind, method: 'GET' as const, path }));
  bench.prober.pace({ label: target, base: target, perS: 1000 / PROBE_INTERVAL_MS, requests: probes });
  const before = await settle(() => bench.read(instance), REST_MS);
  await warmPage(target);
  const cpuBefore = { load: cpuSeconds(bench.load.pid), service: serviceCpuSeconds(instance) };
  const from = Date.now();
  const admission: AdmissionSample[] = [];
  const sample = () =>
    void readAdmission(instance).then(
      (gauges) => admission.push(gauges),
      () => {},
    );
  const sampling = instance.mode === 'on' ? setInterval(sample, 1_000) : undefined;
  const result = await run().finally(() => clearInterval(sampling));
  const wall = (Date.now() - from) / 1000;
  const loadCpu = cpuSeconds(bench.load.pid) - cpuBefore.load;
  const serviceCpu = serviceCpuSeconds(instance) - cpuBefore.service;
  const after = await settle(() => bench.read(instance));
  const delta: Counters = {
    pgStatements: after.pgStatements - before.pgStatements,
    completions: after.completions - before.completions,
  };
  return {
    result,
    measured: {
      mode: instance.mode,
      from,
      to: from + seconds * 1000,
      target,
      delta,
      loadCpuPct: (100 * loadCpu) / wall,
      serviceCpuPct: (100 * serviceCpu) / wall,
      admission,
    },
  };
}

/** The mix open-loop at `run.ratePerS` (`multiple` × capacity) on `instance`, the probes at it too. */
export async function runMixScenario(
  bench: Bench,
  instance: Instance,
  label: string,
  multiple: number,
  run: MixRun,
): Promise<MixScenario> {
  const { result, measured } = await measure(bench, instance, run.seconds, () => bench.load.mix(run));
  return { ...measured, label, multiple, mix: result };
}

/** The connection flood on `instance`, the probes at the same instance. */
export async function runFloodScenario(
  bench: Bench,
  instance: Instance,
  connections: number,
  seconds: number,
): Promise<FloodScenario> {
  const { result, measured } = await measure(bench, instance, seconds, () =>
    bench.load.flood({ base: instance.cluster.base, connections, seconds, timeoutMs: PROBE_TIMEOUT_MS }),
  );
  return { ...measured, flood: result };
}

/** A newcomer's requests in a scenario's window, each on a new connection: `/healthz` and the cached page 1. */
export interface Newcomer {
  healthz: Health;
  page: Health;
}

export function newcomerOf(
  prober: PacedClient,
  { target, from, to }: Pick<Measured, 'target' | 'from' | 'to'>,
): Newcomer {
  const health = (kind: keyof Newcomer) => healthOf(prober.samples(target, kind, from, to));
  return { healthz: health('healthz'), page: health('page') };
}

function healthOf(probes: readonly PacedSample[]): Health {
  const answered = probes.flatMap(({ outcome }) => (typeof outcome === 'object' ? [outcome] : []));
  const { p50, p99, max } = latencies(answered.map((answer) => answer.ms));
  const not200 = answered.filter((answer) => answer.status !== 200).length;
  return {
    sent: probes.length,
    p50Ms: p50,
    p99Ms: p99,
    maxMs: max,
    unanswered: probes.length - answered.length,
    not200,
  };
}
