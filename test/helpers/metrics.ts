import { execFileSync } from 'node:child_process';
import { request as httpRequest } from 'node:http';

/** One sample of a Prometheus text exposition. */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Parses the Prometheus text format (the sample lines; comments are skipped). */
export function parseMetrics(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!match) throw new Error(`unparsable metrics line: ${line}`);
    const labels: Record<string, string> = {};
    for (const [, key, value] of (match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[key!] = value!;
    samples.push({ name: match[1]!, labels, value: Number(match[3]) });
  }
  return samples;
}

/** The sum of the samples named `name` whose labels include `labels` (0 when none). */
export function sumOf(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  return samples
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((total, s) => total + s.value, 0);
}

/** The longest a test waits on one answer of a host: far above any answer's deadline. */
const ANSWER_WAIT_MS = 30_000;

/** Fetches a host's `/metrics` and parses it. */
export async function scrape(metricsBase: string): Promise<{ text: string; samples: Sample[] }> {
  // Bounded: a scrape the host never answers fails here, named, instead of hanging the file.
  const response = await fetch(`${metricsBase}/metrics`, { signal: AbortSignal.timeout(ANSWER_WAIT_MS) });
  const text = await response.text();
  if (response.status !== 200) throw new Error(`/metrics answered ${response.status}: ${text}`);
  return { text, samples: parseMetrics(text) };
}

/**
 * One request on a connection of its own (no keep-alive), so a cluster's primary hands
 * successive requests to different workers. Resolves with the status, or `error` when the
 * connection failed or went ANSWER_WAIT_MS without a byte before a response arrived.
 */
export function requestOnNewConnection(
  base: string,
  method: string,
  path: string,
  options: { headers?: Record<string, string>; body?: string } = {},
): Promise<number | 'error'> {
  return new Promise((resolve) => {
    const req = httpRequest(new URL(path, base), { method, agent: false, headers: options.headers }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
      res.on('error', () => resolve('error'));
    });
    req.on('error', () => resolve('error'));
    req.setTimeout(ANSWER_WAIT_MS, () => {
      console.log(`# no answer within ${ANSWER_WAIT_MS} ms: ${method} ${path}`);
      req.destroy();
    });
    req.end(options.body);
  });
}

/** The PIDs of a process's direct children (empty when it has none). */
export function childPids(pid: number): number[] {
  try {
    return execFileSync('ps', ['-o', 'pid=', '--ppid', String(pid)], { encoding: 'utf8' })
      .split('\n')
      .map((line) => Number(line.trim()))
      .filter((n) => n > 0);
  } catch {
    return [];
  }
}
