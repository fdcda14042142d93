import { Counter, Gauge, type Registry } from 'prom-client';

/**
 * The series of plans and overrides (docs/throttling.md "Plans and overrides"), part of every child's metrics
 * (metrics.ts `createMetrics`): refusals by the policy that set the limit, and the overrides in force.
 */
export function policyMetrics(registers: Registry[]) {
  return {
    throttlePlanRefusals: new Counter({
      name: 'paceline_throttle_plan_refusals_total',
      help:
        'Refusals by scope and by the policy that set the limit (docs/throttling.md "Plans and overrides"): the ' +
        "client's plan (`default`: the settings) or `override` while one is in force.",
      labelNames: ['scope', 'plan'] as const,
      registers,
    }),
    throttleOverrides: new Gauge({
      name: 'paceline_throttle_override_ends_seconds',
      help:
        'Each override of a limit in force, as the Unix time it ends: its id, the kind of client it is for ' +
        '(`user` or `address`), the pseudonym of that client where the who view names one, and its scopes.',
      labelNames: ['override', 'target', 'client', 'scopes'] as const,
      // Every worker reads the same overrides: the host reports them once.
      aggregator: 'max',
      registers,
    }),
  };
}
