import type { Registry } from 'prom-client';

export const METRICS_REQUEST = 'paceline:metrics:get';
export const METRICS_REPLY = 'paceline:metrics';

/** A child's report: its registry as JSON; `id` answers a request, null is the final report. */
export interface MetricsReply {
  type: typeof METRICS_REPLY;
  id: number | null;
  metrics: unknown[];
}

/**
 * Answers the primary's requests for this child's metrics over the cluster IPC channel.
 * `sendFinal()` resolves once the last report is handed to the channel, before the child exits.
 */
export function reportMetricsToPrimary(registry: Registry): { sendFinal(): Promise<void> } {
  const send = async (id: number | null) => {
    const reply: MetricsReply = { type: METRICS_REPLY, id, metrics: await registry.getMetricsAsJSON() };
    await new Promise<void>((resolve) => {
      if (!process.send || !process.connected) return resolve();
      process.send(reply, undefined, {}, () => resolve());
    });
  };
  process.on('message', (message: { type?: string; id?: number }) => {
    if (message?.type === METRICS_REQUEST) void send(message.id ?? null).catch(() => {});
  });
  return { sendFinal: () => send(null).catch(() => {}) };
}
