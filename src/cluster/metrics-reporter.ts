import type { Registry } from 'prom-client';

export const METRICS_REQUEST = 'paceline:metrics:get';
export const METRICS_REPLY = 'paceline:metrics';

/** Answers the primary's requests for this child's metrics over the cluster IPC channel. */
export function reportMetricsToPrimary(registry: Registry): { sendFinal(): Promise<void> } {
  const send = async (id: number | null) => {
    const metrics = await registry.getMetricsAsJSON();
    await new Promise<void>((resolve) => {
      if (!process.send || !process.connected) return resolve();
      process.send({ type: METRICS_REPLY, id, metrics }, undefined, {}, () => resolve());
    });
  };
  process.on('message', (message: { type?: string; id?: number }) => {
    if (message?.type === METRICS_REQUEST) void send(message.id ?? null).catch(() => {});
  });
  return { sendFinal: () => send(null).catch(() => {}) };
}
