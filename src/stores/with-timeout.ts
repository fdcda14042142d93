/**
 * `promise`, or a rejection after `ms`: a slow Redis is as good as none. Judged after one more poll for I/O, as
 * the throttle's deadline is (src/throttle/batcher.ts), so a reply this process was too busy to read still counts.
 */
export function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => setImmediate(() => reject(new Error(`${what} timed out after ${ms} ms`))), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}
