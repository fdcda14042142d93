import { readFile } from 'node:fs/promises';

/** One request of verify's `--history` (docs/verify.md "History format"), invoke and completion paired. */
export interface HistoryRequest {
  process: string;
  f: string;
  url: string;
  /** Seconds since verify's first request. */
  invoke: number;
  complete: number;
  status: number | null;
  retryAfter?: number;
}

type HistoryPhase = { name: string; from: number; to: number; requests: HistoryRequest[] };

/** The requests of the history in `file` (none when it is missing), in the order they were sent. */
export async function readHistory(file: string): Promise<HistoryRequest[]> {
  const text = await readFile(file, 'utf8').catch(() => '');
  const invokes = new Map<number, { process: string; f: string; time: number; url: string }>();
  const requests: HistoryRequest[] = [];
  for (const line of text.split('\n').filter((l) => l !== '')) {
    const entry = JSON.parse(line) as {
      type: string;
      op: number;
      process: string;
      f: string;
      time: number;
      value?: { url?: string; status?: number; body?: { detail?: unknown } };
    };
    if (entry.type === 'invoke') {
      invokes.set(entry.op, { process: entry.process, f: entry.f, time: entry.time, url: entry.value?.url ?? '' });
      continue;
    }
    const sent = invokes.get(entry.op);
    if (sent === undefined) continue;
    const status = entry.type === 'ok' ? (entry.value?.status ?? null) : null;
    const detail = entry.value?.body?.detail;
    const stated = typeof detail === 'string' ? /available in (\d+) second/.exec(detail)?.[1] : undefined;
    requests.push({
      process: sent.process,
      f: sent.f,
      url: sent.url,
      invoke: sent.time / 1e9,
      complete: entry.time / 1e9,
      status,
      ...(status === 429 && stated !== undefined ? { retryAfter: Number(stated) } : {}),
    });
  }
  return requests.sort((a, b) => a.invoke - b.invoke);
}

/**
 * The run's requests by phase: the logins and identity checks, each of `taskChecks` (its name and the clients only
 * it uses, in the order they run) from its first request to the next one's (a shared client's requests fall in the
 * phase they were sent in), the clean-up after the last, and the limits check (its own clients, beside the others).
 */
export function historyPhases(requests: HistoryRequest[], taskChecks: [string, string[]][]): HistoryPhase[] {
  const limits = requests.filter((r) => /^limits-\d+-\d+$/.test(r.process));
  const setup = requests.filter((r) => /-(login|identity|anonymous)$/.test(r.process));
  const tasks = requests.filter((r) => !limits.includes(r) && !setup.includes(r));
  const firstOf = (names: string[]) => tasks.find((r) => names.includes(r.process))?.invoke;
  // The first check's (the cursor check's) writer seeds its tasks before the walker's first page.
  const starts = taskChecks.map(([name, clients], i) => ({
    name,
    from: i === 0 ? tasks[0]?.invoke : firstOf(clients),
  }));
  const lastClients = taskChecks.at(-1)?.[1] ?? [];
  const lastEnd = Math.max(...tasks.filter((r) => lastClients.includes(r.process)).map((r) => r.complete));
  const bounds = [...starts, { name: 'clean-up', from: Number.isFinite(lastEnd) ? lastEnd : undefined }];
  const end = Math.max(...requests.map((r) => r.complete));
  const span = (list: HistoryRequest[]) => ({
    from: Math.min(...list.map((r) => r.invoke)),
    to: Math.max(...list.map((r) => r.complete)),
  });
  const result: HistoryPhase[] = [];
  if (setup.length > 0) result.push({ name: 'logins', ...span(setup), requests: setup });
  bounds.forEach((bound, i) => {
    if (bound.from === undefined) return;
    const next = bounds.slice(i + 1).find((b) => b.from !== undefined)?.from ?? Infinity;
    const inside = tasks.filter((r) => r.invoke >= bound.from! && r.invoke < next);
    const to = Math.max(Math.min(next, end), ...inside.map((r) => r.complete));
    result.push({ name: bound.name, from: bound.from, to, requests: inside });
  });
  if (limits.length > 0) result.push({ name: 'limits', ...span(limits), requests: limits });
  return result;
}

/** A request's latency in seconds. */
export const tookSeconds = (r: HistoryRequest): number => r.complete - r.invoke;

/** The `count` slowest of `requests`. */
export const slowestOf = (requests: HistoryRequest[], count = 1): HistoryRequest[] =>
  [...requests].sort((a, b) => tookSeconds(b) - tookSeconds(a)).slice(0, count);
