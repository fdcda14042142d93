/**
 * What a refusal costs beside an answer, and a shed answer beside a refusal
 * (docs/benchmarks.md "What a refusal costs"): node:cluster workers running the service's server and listener (anon
 * 20/min, user 100000/s, access log at info to /dev/null), measured by autocannon on 127.0.0.1 in interleaved rounds:
 *
 *   flood    GET /api/tasks/ from one anonymous address (X-Forwarded-For) refused for the minute (429)
 *   page-1   GET /api/tasks/ with a user's token (answered 200 from the read cache)
 *   healthz  GET /healthz
 *   shed     GET /api/tasks/ from another anonymous address, shed by admission control (503 + Retry-After)
 *
 *   npm run bench:refusal-cost -- [seconds per load and round = 3] [rounds = 2] [connections = 20]
 *
 * The shed answers come from a second worker whose only admission slot one raw connection holds (holdSlot). The
 * other loads stay on the first worker, whose admission is the default: a limit of 1 would shed page-1's
 * authenticated reads too, and an anonymous request the worker keeps no answer for passes admission before its early
 * refusal (src/api/app.ts), so a held slot would shed the flood. Each load's CPU time is its own worker's.
 *
 * PROFILE_DIR=dir runs each worker under `--cpu-prof`, its profiles in dir/answers and dir/shed (one per thread: the
 * worker's own has thread id 0 in its name, the other is tsx's module loader). LOADS=flood (a comma list) runs only
 * those loads; the shed worker is forked only when shed or shed-healthz is named. LOADS may also name anon-page-1 (its
 * own address), task (one task, with the token) and shed-healthz (/healthz on the shed worker, against healthz on the
 * first: whether the two workers cost alike). Starts its own throwaway PostgreSQL and redis-server.
 */
import type { Worker } from 'node:cluster';
import { once } from 'node:events';
import { connect } from 'node:net';
import type autocannon from 'autocannon';
import pino from 'pino';
import { loadConfig } from '../../src/settings/config.js';
import { buildDeps } from '../../src/deps.js';
import { createApiListener } from '../../src/listener/listener.js';
import { createApiServer } from '../../src/server/server.js';
import { runLine } from './harness/report.js';
import { defer, runBench } from './harness/run.js';
import { createBenchUsers } from './harness/seed.js';
import { runAutocannon } from './harness/send.js';
import { startStores } from './harness/service.js';
import { readArgs, readBenchText } from './harness/settings.js';
import { sumOf } from './harness/stats.js';
import { measureVariants } from './harness/variants.js';
import { answer, ask, benchSettings, forkWorkers, runCluster, type BenchSetup } from './harness/workers.js';

/** A worker's stores and port, and whether it is the one whose single admission slot is held (the shed load's). */
type Setup = BenchSetup & { shed: boolean };

/** What a worker reports of its admission control: requests shed, started from memory, and in progress now. */
type AdmissionCounts = Record<'shed' | 'memory' | 'inProgress', number>;

/** The holder's announced body: at a byte a second, longer than any run. */
const HELD_BODY_BYTES = 60_000;

async function serve(setup: Setup): Promise<void> {
  const config = loadConfig({
    ...benchSettings(setup),
    REDIS_PREFIX: 'bench:refusal:',
    LOG_LEVEL: 'info',
    TRUST_PROXY_HOPS: '1',
    // ANON_RATE=100000/s for a profile of anon-page-1 (the flood is then answered, not refused).
    THROTTLE_ANON: process.env.ANON_RATE ?? '20/min',
    THROTTLE_USER: '100000/s',
    THROTTLE_TOKEN_OBTAIN: '100000/s',
    // The slot holder's request must not time out (the holder never completes its body).
    HTTP_REQUEST_TIMEOUT_MS: '3600000',
    ...(setup.shed ? { ADMISSION_LIMIT_MIN: '1', ADMISSION_LIMIT_MAX: '1', ADMISSION_QUEUE_SIZE: '0' } : {}),
  });
  const { deps } = await buildDeps(config, 'bench');
  deps.logger = pino({ level: 'info', base: { pid: process.pid, role: 'web' } }, pino.destination('/dev/null'));
  // The service's own server and listener: a known refusal is answered before the app (src/listener/early-refusal.ts).
  createApiServer(config, createApiListener(deps)).listen(setup.httpPort, '127.0.0.1', () =>
    process.send?.('listening'),
  );
  const { metrics } = deps;
  const sum = async (metric: { get(): Promise<{ values: { value: number }[] }> }) =>
    (await metric.get()).values.reduce((total, { value }) => total + value, 0);
  answer('admission', async (): Promise<AdmissionCounts> => {
    const [shed, memory, inProgress] = [metrics.admissionShed, metrics.admissionMemory, metrics.admissionInProgress];
    return { shed: await sum(shed), memory: await sum(memory), inProgress: await sum(inProgress) };
  });
  process.once('disconnect', () => process.exit(0));
}

/** Forks a worker serving `setup`, under `--cpu-prof` into `profileDir`/`name` when given. */
async function forkWorker(setup: Omit<Setup, 'httpPort'>, name: string, profileDir: string | undefined) {
  const profile = profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}/${name}`] : [];
  const { workers, base } = await forkWorkers(1, setup, profile);
  return { worker: workers[0]!, base, port: Number(new URL(base).port) };
}

/** A worker's admission counts. */
const admission = async (worker: Worker) => (await ask<AdmissionCounts>([worker], 'admission'))[0]!;

/**
 * Takes the only admission slot of the worker on `port`: an authenticated POST /api/tasks/ (a write, admitted
 * while the slot is free) that announces HELD_BODY_BYTES and sends one of them a second, so the app waits for its
 * body. Any answer to it means the slot was given back: `answered` says so.
 */
async function holdSlot(port: number, token: string): Promise<{ answered: () => string; release(): void }> {
  const socket = connect(port, '127.0.0.1');
  await once(socket, 'connect');
  let answer = '';
  socket.on('data', (chunk: Buffer) => (answer += chunk.toString('latin1')));
  socket.on('error', () => {});
  socket.write(
    `POST /api/tasks/ HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer ${token}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${HELD_BODY_BYTES}\r\n\r\n`,
  );
  const trickle = setInterval(() => socket.write(' '), 1_000);
  return {
    answered: () => answer.split('\r\n', 1)[0]!,
    release() {
      clearInterval(trickle);
      socket.destroy();
    },
  };
}

/** Waits up to 5 s for `worker` to report `inProgress` requests in progress; false if it never does. */
async function untilInProgress(worker: Worker, inProgress: number): Promise<boolean> {
  for (let tries = 0; tries < 50; tries += 1) {
    if ((await admission(worker)).inProgress === inProgress) return true;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return false;
}

async function primary(): Promise<void> {
  const [seconds, rounds, connections] = readArgs([3, 2, 20]) as [number, number, number];
  const stores = await startStores({ persistent: false, database: 'bench_refusal' });
  const [{ token }] = await createBenchUsers(stores.databaseUrl, 'bench');
  const named = readBenchText('LOADS') === '' ? undefined : readBenchText('LOADS').split(',');
  const profileDir = readBenchText('PROFILE_DIR') || undefined;
  const setup = { databaseUrl: stores.databaseUrl, redisUrl: stores.redisUrl };
  const { worker, base } = await forkWorker({ ...setup, shed: false }, 'answers', profileDir);
  const created = await fetch(`${base}/api/tasks/`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ title: 'bench' }),
  });
  const { id: taskId } = (await created.json()) as { id: number };
  const loads: Record<string, autocannon.Options> = {
    flood: { url: `${base}/api/tasks/`, headers: { 'x-forwarded-for': '198.18.0.1' } },
    'page-1': { url: `${base}/api/tasks/`, headers: { authorization: `Bearer ${token}` } },
    healthz: { url: `${base}/healthz` },
  };
  // Only when named, for a profile of the read path.
  const extra: Record<string, autocannon.Options> = {
    'anon-page-1': { url: `${base}/api/tasks/`, headers: { 'x-forwarded-for': '198.18.0.2' } },
    task: { url: `${base}/api/tasks/${taskId}/`, headers: { authorization: `Bearer ${token}` } },
  };
  /** The worker each load is measured on. */
  const servedBy = new Map<string, Worker>();
  let shedWorker: Worker | undefined;
  let holder: Awaited<ReturnType<typeof holdSlot>> | undefined;
  if (!named || named.includes('shed') || named.includes('shed-healthz')) {
    const shed = await forkWorker({ ...setup, shed: true }, 'shed', profileDir);
    shedWorker = shed.worker;
    holder = await holdSlot(shed.port, token);
    defer(() => holder?.release());
    if (!(await untilInProgress(shedWorker, 1)))
      throw new Error(`the shed worker's slot is not held (holder's answer: ${holder.answered() || 'none'})`);
    const load = { url: `${shed.base}/api/tasks/`, headers: { 'x-forwarded-for': '198.18.0.3' } };
    const sample = await fetch(load.url, { headers: load.headers });
    await sample.arrayBuffer();
    if (sample.status !== 503 || !sample.headers.has('retry-after'))
      throw new Error(`a shed sample was answered ${sample.status}, Retry-After ${sample.headers.get('retry-after')}`);
    loads.shed = load;
    servedBy.set('shed', shedWorker);
    extra['shed-healthz'] = { url: `${shed.base}/healthz` };
    servedBy.set('shed-healthz', shedWorker);
  }
  for (const name of Object.keys(loads)) if (named && !named.includes(name)) delete loads[name];
  for (const name of named ?? []) if (extra[name]) loads[name] = extra[name];
  const targets = Object.entries(loads).map(([name, load]) => ({
    variant: name,
    workers: [servedBy.get(name) ?? worker],
    load: { ...load, connections },
  }));
  for (const target of targets) await runAutocannon(target.load, 1);
  const shedBefore = shedWorker && (await admission(shedWorker));
  const answersBefore = await admission(worker);
  const runs = await measureVariants(targets, rounds, seconds, { order: 'alternate' });
  const totals = new Map(
    [...runs].map(([{ variant }, list]) => {
      const statuses = new Map<string, number>();
      for (const { result } of list)
        for (const [status, { count = 0 }] of Object.entries(result.statusCodeStats ?? {}))
          statuses.set(status, (statuses.get(status) ?? 0) + count);
      const total = (pick: (s: (typeof list)[number]) => number) => sumOf(list, pick);
      const [requests, cpuUs] = [total((s) => s.result.requests.total), total((s) => s.workersCpuUs)];
      return [variant, { requests, seconds: total((s) => s.seconds), non2xx: total((s) => s.non2xx), cpuUs, statuses }];
    }),
  );
  if (shedWorker && shedBefore) {
    // What was measured as shed was shed: the slot still held, every answer a 503, and as many counted shed.
    const after = await admission(shedWorker);
    const shed = totals.get('shed')!;
    const counted = after.shed - shedBefore.shed;
    const problems = [
      after.inProgress === 1 ? '' : `${after.inProgress} requests in progress, not the holder's 1`,
      holder?.answered() ? `the holder was answered ${holder.answered()}` : '',
      shed.statuses.get('503') === shed.requests ? '' : `statuses ${[...shed.statuses]} for ${shed.requests} answers`,
      // Up to one request per connection and round is still in flight when autocannon stops: shed, not counted there.
      counted >= shed.requests && counted <= shed.requests + connections * rounds
        ? ''
        : `${counted} shed counted for ${shed.requests} answers`,
    ].filter(Boolean);
    if (problems.length > 0) throw new Error(`the shed load was not all shed: ${problems.join('; ')}`);
  }
  // Which way the first worker's anonymous requests went: started from memory (page 1 kept) or through a slot.
  const answersAfter = await admission(worker);
  const rate = (name: string) => Math.round(totals.get(name)!.requests / totals.get(name)!.seconds);
  const cpuPerRequest = (name: string) => totals.get(name)!.cpuUs / totals.get(name)!.requests;
  console.log(
    await runLine(
      undefined,
      `1 worker per load, ${connections} connections, ${seconds} s × ${rounds} interleaved rounds`,
    ),
  );
  console.table(
    [...totals].map(([name, t]) => ({
      load: name,
      reqPerS: rate(name),
      statuses: [...t.statuses].map(([status, count]) => `${status}×${count}`).join(' '),
      non2xx: t.non2xx,
      workerCpuUsPerReq: Math.round(cpuPerRequest(name)),
    })),
  );
  if (totals.has('flood') && totals.has('page-1') && totals.has('healthz'))
    console.log(
      `flood / page-1 = ${(rate('flood') / rate('page-1')).toFixed(2)}×, flood / healthz = ${(rate('flood') / rate('healthz')).toFixed(2)}×`,
    );
  console.log(
    `first worker: ${answersAfter.memory - answersBefore.memory} requests started from memory without a slot, ` +
      `${answersAfter.shed - answersBefore.shed} shed`,
  );
  if (totals.has('flood') && totals.has('shed'))
    console.log(`shed / flood CPU per request = ${(cpuPerRequest('shed') / cpuPerRequest('flood')).toFixed(2)}×`);
  holder?.release();
  // Disconnected, a worker exits and writes its profile (a killed one would not).
  for (const each of [worker, shedWorker]) {
    if (!each) continue;
    each.disconnect();
    await once(each, 'exit');
  }
}

await runCluster(() => runBench('refusal-cost', primary), serve);
