import { interleave, runWrk, type Load, type Slice as WrkResult } from '../harness/send.js';
import { log } from '../harness/run.js';
import { median, sumOf } from '../harness/stats.js';
import type { Latencies } from './good-client.js';
import type { RowResult } from './report.js';
import { measure, perRequest, quiet, type Bench, type Window } from './window.js';

interface Flood {
  name: string;
  request: string;
  tree: 'bare' | 'open' | 'guarded';
  load: Load;
  /** The refusal flood: costs are per refused request and the good client is compared. */
  refused?: boolean;
}

/** One flood's slice: wrk's figures, its costs per request, the good client's answers, the primary's FDs. */
type Slice = ReturnType<typeof perRequest> & { wrk: WrkResult; good: Latencies; fdsBefore: number; fdsMax: number };

const WARMUP_S = 1;

/** The yardsticks and the 429 flood, all loaded by `wrk -t2 -c32` from one forwarded address each. */
function floods(bench: Bench): Flood[] {
  const from = (address: string) => ({ 'X-Forwarded-For': address });
  return [
    { name: 'bare node:http', request: 'GET / (page-1 bytes)', tree: 'bare', load: { url: `${bench.bare.base}/` } },
    {
      name: 'page 1, anonymous (yardstick)',
      request: 'GET /api/tasks/',
      tree: 'open',
      load: { url: `${bench.open.base}/api/tasks/`, headers: from('10.1.0.2') },
    },
    {
      name: '/healthz (yardstick)',
      request: 'GET /healthz',
      tree: 'open',
      load: { url: `${bench.open.base}/healthz`, headers: from('10.1.0.3') },
    },
    {
      name: '1. 429 flood, one anonymous address',
      request: 'GET /api/tasks/, anon budget spent',
      tree: 'guarded',
      load: { url: `${bench.guarded.base}/api/tasks/`, headers: from('10.1.0.1') },
      refused: true,
    },
  ];
}

/** The good client's answers over several windows: counts and failures summed, the medians of p50 and p99. */
function merged(list: Latencies[]): Latencies {
  const failures: Record<number, number> = {};
  for (const each of list)
    for (const [status, n] of Object.entries(each.failures))
      failures[Number(status)] = (failures[Number(status)] ?? 0) + n;
  const [p50Ms, p99Ms] = [median(list.map((l) => l.p50Ms)), median(list.map((l) => l.p99Ms))];
  return { n: sumOf(list, (l) => l.n), p50Ms, p99Ms, failures };
}

/**
 * Row 1: BENCH_ROUNDS interleaved rounds (rotated order) of the bare server, page 1 and /healthz
 * on the open instance, and the 429 flood on the guarded one, each BENCH_SECONDS, the good
 * client reading page 1 on the guarded instance throughout; a quiet window opens each round.
 */
export async function runFloodRows(bench: Bench): Promise<RowResult[]> {
  const list = floods(bench);
  const quiets: Window<Latencies>[] = [];
  for (const flood of list) await runWrk(flood.load, WARMUP_S); // and spends the flood address's budget
  const slices = await interleave(list, bench.rounds, async (flood, round): Promise<Slice> => {
    if (flood === list[round % list.length]) quiets.push(await quiet(bench, 'get'));
    const window = await measure(bench, () => runWrk(flood.load, bench.seconds));
    const wrk = window.value;
    const costs = perRequest(window, quiets.at(-1)!, flood.tree, flood.refused ? wrk.non2xx : wrk.requests);
    const good = bench.good.latencies('get', window.from, window.to);
    log(
      `round ${round + 1}/${bench.rounds}  ${flood.name.padEnd(38)} ${Math.round(wrk.reqPerS).toString().padStart(6)} req/s, ` +
        `good client p99 ${good.p99Ms.toFixed(1)} ms`,
    );
    return { wrk, ...costs, good, fdsBefore: window.fdsBefore, fdsMax: window.fdsMax };
  });
  return summarise(list, slices, quiets);
}

function summarise(list: Flood[], slices: Map<Flood, Slice[]>, quiets: Window<Latencies>[]): RowResult[] {
  const reqPerS = (flood: Flood) => median(slices.get(flood)!.map((s) => s.wrk.reqPerS));
  const bare = reqPerS(list[0]!);
  const page1 = reqPerS(list[1]!);
  const healthz = list[2]!;
  return list.map((flood): RowResult => {
    const runs = slices.get(flood)!;
    const sum = (pick: (s: Slice) => number) => sumOf(runs, pick);
    const requests = sum((s) => s.wrk.requests);
    const refused = sum((s) => s.wrk.non2xx);
    const cpuUs = median(runs.map((s) => s.cpuUs));
    const result: RowResult = {
      name: flood.name,
      request: flood.request,
      requests,
      reqPerS: reqPerS(flood),
      statuses: `${refused.toLocaleString('en-US')} non-2xx, ${sum((s) => s.wrk.socketErrors)} socket errors`,
      vsBare: reqPerS(flood) / bare,
      pg: flood.tree === 'bare' ? undefined : median(runs.map((s) => s.pg)),
      redis: flood.tree === 'bare' ? undefined : median(runs.map((s) => s.redis)),
      cpuUs,
      fds: { before: Math.min(...runs.map((s) => s.fdsBefore)), max: Math.max(...runs.map((s) => s.fdsMax)) },
      goal: '',
      facts: [],
    };
    if (!flood.refused) return result;
    const ratio = reqPerS(flood) / page1;
    const healthzCpu = median(slices.get(healthz)!.map((s) => s.cpuUs));
    result.good = { mode: 'get', quiet: merged(quiets.map((q) => q.value)), during: merged(runs.map((s) => s.good)) };
    result.goal = `≥ 1.5× page 1's req/s (here ${ratio.toFixed(2)}×); 0 Redis, 0 PG per refusal`;
    result.met = ratio >= 1.5 && (result.redis ?? 0) < 0.01 && (result.pg ?? 0) < 0.01;
    result.facts.push(
      `${refused.toLocaleString('en-US')} of ${requests.toLocaleString('en-US')} flood requests refused; the flood ran at ` +
        `${ratio.toFixed(2)}× page 1's req/s. Service CPU per refusal ${cpuUs.toFixed(0)} µs against ` +
        `${healthzCpu.toFixed(0)} µs per /healthz answer (item 1 asks for less).`,
    );
    return result;
  });
}
