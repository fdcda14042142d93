/**
 * The metrics the primary records itself, beside the sum of its children's: children restarted,
 * collections made for scrapes, settings reloads, the host's most refused clients with the
 * window they are counted over. MetricsHub (metrics-hub.ts) adds them to every exposition.
 */
import { Counter, Gauge, Registry } from 'prom-client';
import type { ChildRole } from './supervisor.js';

/** Creates the primary's metrics in a registry of their own: the top window set, restarts and reloads at zero. */
export function createPrimaryMetrics(topWindowMs: number) {
  const registry = new Registry();
  const registers = [registry];
  const metrics = {
    registry,
    restarts: new Counter({
      name: 'paceline_worker_restarts_total',
      labelNames: ['role'] as const,
      registers,
      help: 'Children that exited unexpectedly and were restarted by the primary, by role.',
    }),
    collections: new Counter({
      name: 'paceline_metrics_collections_total',
      registers,
      help: "Collections of every child's metrics made for /metrics scrapes; concurrent scrapes share one.",
    }),
    reloads: new Counter({
      name: 'paceline_settings_reloads_total',
      labelNames: ['outcome'] as const,
      registers,
      help: 'Settings reloads (SIGHUP) by outcome: applied (web workers replaced) or refused (a bad setting).',
    }),
    topClients: new Gauge({
      name: 'paceline_throttle_top_client_refused',
      labelNames: ['scope', 'client'] as const,
      registers,
      help:
        "The host's THROTTLE_TOP_K most refused clients per scope: requests refused over THROTTLE_TOP_WINDOW, by " +
        "pseudonym (user:<id> for users); within 1/(10·K) of the scope's refusals.",
    }),
    topWindow: new Gauge({
      name: 'paceline_throttle_top_window_seconds',
      registers,
      help: 'THROTTLE_TOP_WINDOW, in seconds: the window paceline_throttle_top_client_refused counts refusals over.',
    }),
  };
  metrics.topWindow.set(topWindowMs / 1000);
  for (const role of ['web', 'jobs'] satisfies ChildRole[]) metrics.restarts.inc({ role }, 0);
  for (const outcome of ['applied', 'refused']) metrics.reloads.inc({ outcome }, 0);
  return metrics;
}

export type PrimaryMetrics = ReturnType<typeof createPrimaryMetrics>;
