/** Stops the run with one line and exit 2: a setting the benchmark cannot use. */
export function refuse(name: string, text: string, allowed: string): never {
  process.stderr.write(`${name} must be ${allowed}, got "${text}"\n`);
  process.exit(2);
}

/**
 * A benchmark's whole-number setting from the environment (`BENCH_SECONDS=10`, `1_000` allowed), or from the
 * command line's `flag` when it has one (`--seconds 20`): `fallback` when unset or empty; anything else under `min`
 * or not whole stops the run with one line and exit 2.
 */
export function readBenchCount(name: string, fallback: number, min = 1, flag?: string): number {
  const at = flag === undefined ? -1 : process.argv.indexOf(flag);
  const text = (at >= 0 ? process.argv[at + 1] : undefined) ?? process.env[name];
  if (text === undefined || text === '') return fallback;
  const value = Number(text.replace(/_/g, ''));
  if (!Number.isInteger(value) || value < min) refuse(name, text, `a whole number of at least ${min}`);
  return value;
}

/** A text setting from the environment: `fallback` when unset or empty. */
export const readBenchText = (name: string, fallback = ''): string => process.env[name] || fallback;

/** The command line's numbers (`node … bench.ts 10 2 50`), each one missing taken from `defaults`. */
export const readArgs = (defaults: number[]): number[] =>
  defaults.map((fallback, i) => Number(process.argv[2 + i] ?? fallback));
