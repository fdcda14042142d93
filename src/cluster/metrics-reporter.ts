import type { Registry } from 'prom-client';
import type { WatchedScope } from '../throttle/throttle-watch.js';
import { METRICS_REPLY, METRICS_REQUEST, type MetricsReply } from './metrics-protocol.js';

/**
 * Answers the primary's requests for this child's metrics over the cluster IPC channel.
 * `throttled` adds the child's heaviest refused clients to each report. `sendFinal()` resolves once the last report is handed to the channel, before the child exits.
 */
export function reportMetricsToPrimary(
  registry: Registry,
  throttled?: () => WatchedScope[],
): { sendFinal(): Promise<void> } {
  const send = async (id: number | null) => {
    const reply: MetricsReply = { type: METRICS_REPLY, id, metrics: await registry.getMetricsAsJSON() };
    if (throttled) reply.throttled = throttled();
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
