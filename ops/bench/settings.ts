/**
 * A benchmark's whole-number setting from the environment (`BENCH_SECONDS=10`, `1_000` allowed): `fallback`
 * when unset or empty; anything else under `min` or not whole stops the run with one line and exit 2.
 */
export function readBenchCount(name: string, fallback: number, min = 1): number {
  const text = process.env[name];
  if (text === undefined || text === '') return fallback;
  const value = Number(text.replace(/_/g, ''));
  if (!Number.isInteger(value) || value < min) {
    process.stderr.write(`${name} must be a whole number of at least ${min}, got "${text}"\n`);
    process.exit(2);
  }
  return value;
}
