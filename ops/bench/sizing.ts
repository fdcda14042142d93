/**
 * What one request costs the shared stores, for sizing Redis and PostgreSQL for many hosts (docs/scaling.md
 * "Sizing" says which counters it reads and how):
 *
 *   npm run bench:sizing -- [requests per phase = 2000]
 *
 * Starts its own throwaway PostgreSQL and redis-server and the real entry point (2 web workers, no job worker:
 * BullMQ and the read-model follower have their own, load-independent traffic), runs each phase alone and reads
 * what it cost from the stores' own counters before and after. Phases: anonymous page-1 reads by many clients
 * (X-Forwarded-For from a trusted proxy), reads by one authenticated user, creates one at a time, creates 32 at
 * once, and one anonymous client far over its limit. Prints a Markdown table.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { sql, type Kysely } from 'kysely';
import { connectDatabase } from '../../db/connect.js';
import type { Database } from '../../db/database.js';
import { burst, type BurstRequest } from '../../test/helpers/burst.js';
import type { RunningCluster } from '../../test/helpers/cluster.js';
import { keysMatching } from '../../test/helpers/redis-keys.js';
import { markdownTable } from './harness/report.js';
import { runBench, secondsSince } from './harness/run.js';
import { createBenchUsers } from './harness/seed.js';
import { startService, startStores } from './harness/service.js';
import { readArgs } from './harness/settings.js';

const [REQUESTS] = readArgs([2_000]) as [number];
const PREFIX = 'sizing:';
const ANON_LIMIT = 100;

interface Phase {
  name: string;
  requests: number;
  concurrency: number;
  /** The n-th request: method, path, headers, body. */
  make(n: number): BurstRequest;
  expect: number[];
}

type Snapshot = Awaited<ReturnType<typeof snapshot>>;

async function redisSnapshot(admin: Redis) {
  const text = (await admin.call('INFO', 'stats', 'commandstats', 'memory')) as string;
  const field = (name: string) => Number(new RegExp(`^${name}:(\\d+)`, 'm').exec(text)?.[1] ?? NaN);
  let [commands, scriptCalls] = [0, 0];
  const byCommand: Record<string, number> = {};
  for (const [, name, calls] of text.matchAll(/^cmdstat_([\w|]+):calls=(\d+)/gm)) {
    if (name === 'info' || name === undefined) continue;
    commands += Number(calls);
    byCommand[name] = Number(calls);
    if (name === 'evalsha' || name === 'eval') scriptCalls += Number(calls);
  }
  return {
    commands,
    byCommand,
    scriptCalls,
    netIn: field('total_net_input_bytes'),
    netOut: field('total_net_output_bytes'),
    usedMemory: field('used_memory'),
    /** The length of this INFO reply (it counts in the next delta's output). */
    replyBytes: Buffer.byteLength(text) + String(Buffer.byteLength(text)).length + 5,
  };
}

/** The service database's committed and rolled-back transactions, once the counters stop moving. */
async function transactions(monitor: Kysely<Database>, database: string): Promise<number> {
  const read = async () => {
    await sql`select pg_stat_clear_snapshot()`.execute(monitor);
    const { rows } = await sql<{
      n: string;
    }>`select xact_commit + xact_rollback as n from pg_stat_database where datname = ${database}`.execute(monitor);
    return Number(rows[0]!.n);
  };
  // Backends flush their counters when idle, at the latest 10 s after their last transaction.
  let last = await read();
  for (let stable = 0, waited = 0; stable < 2 && waited < 30_000; waited += 1_500) {
    await sleep(1_500);
    const now = await read();
    stable = now === last ? stable + 1 : 0;
    last = now;
  }
  await sleep(10_500);
  return read();
}

/** The stores' counters and the hosts' group-commit batches (paceline_append_batch_size's _count and _sum). */
async function snapshot(admin: Redis, monitor: Kysely<Database>, database: string, host: RunningCluster) {
  const xacts = await transactions(monitor, database);
  const text = await (await fetch(`${host.metricsBase}/metrics`)).text();
  const value = (name: string) => Number(new RegExp(`^${name} (\\S+)`, 'm').exec(text)?.[1] ?? 0);
  return {
    batches: value('paceline_append_batch_size_count'),
    batchedCommands: value('paceline_append_batch_size_sum'),
    transactions: xacts,
    ...(await redisSnapshot(admin)),
  };
}

/** Sends the phase's requests; fails on a status it does not expect (0: no answer). */
async function run(base: string, phase: Phase): Promise<Map<number, number>> {
  const { statuses } = await burst(base, phase.requests, phase.concurrency, phase.make);
  if (Object.keys(statuses).some((status) => !phase.expect.includes(Number(status))))
    throw new Error(`${phase.name}: unexpected statuses ${JSON.stringify(statuses)}`);
  return new Map(Object.entries(statuses).map(([status, n]) => [Number(status), n]));
}

async function main(): Promise<void> {
  const database = 'sizing';
  const stores = await startStores({ persistent: false, database });
  const monitor = connectDatabase(stores.adminUrl, 1);
  // Autovacuum's transactions count in pg_stat_database too; they are not the service's.
  await sql`alter system set autovacuum = off`.execute(monitor);
  await sql`select pg_reload_conf()`.execute(monitor);
  const [{ token }] = await createBenchUsers(stores.databaseUrl, 'sizer');
  const host = await startService(
    {
      DATABASE_URL: stores.databaseUrl,
      REDIS_URL: stores.redisUrl,
      REDIS_PREFIX: PREFIX,
      CURSOR_SECRET: 'sizing-bench-secret-0123456789',
      WEB_CONCURRENCY: '2',
      JOB_CONCURRENCY: '0',
      TRUST_PROXY_HOPS: '1',
      TRUSTED_PROXIES: '127.0.0.1',
      THROTTLE_ANON: `${ANON_LIMIT}/min`,
      THROTTLE_USER: '100000/min',
      ACCESS_LOG: 'off',
    },
    'tsx',
  );
  const auth = { Authorization: `Bearer ${token}` };
  const clients = Math.max(1, Math.floor(REQUESTS / 2));
  const clientIp = (n: number) => `10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`;
  const read =
    (headers: (n: number) => Record<string, string>) =>
    (n: number): BurstRequest => ({ method: 'GET', path: '/api/tasks/', headers: headers(n) });
  const json = { ...auth, 'Content-Type': 'application/json' };
  const create =
    (title: string) =>
    (n: number): BurstRequest => ({
      method: 'POST',
      path: '/api/tasks/',
      headers: json,
      body: JSON.stringify({ title: `${title} ${n}` }),
    });
  const phases: Phase[] = [
    {
      name: `page 1, anonymous, ${clients} clients × 2`,
      requests: clients * 2,
      concurrency: 16,
      make: read((n) => ({ 'X-Forwarded-For': clientIp(n % clients) })),
      expect: [200],
    },
    { name: 'page 1, one user', requests: REQUESTS, concurrency: 16, make: read(() => auth), expect: [200] },
    {
      name: 'create, one at a time',
      requests: Math.ceil(REQUESTS / 4),
      concurrency: 1,
      make: create('sizing'),
      expect: [201],
    },
    { name: 'create, 32 at once', requests: REQUESTS, concurrency: 32, make: create('sizing many'), expect: [201] },
    {
      name: `one anonymous client over its ${ANON_LIMIT}/min`,
      requests: REQUESTS,
      concurrency: 16,
      make: read(() => ({ 'X-Forwarded-For': '192.0.2.1' })),
      expect: [200, 429],
    },
  ];
  const rows: string[][] = [];
  const memory: string[] = [];
  const commandMix: string[] = [];
  const measure = () => snapshot(stores.admin, monitor, database, host);
  // A first round trip of each kind warms caches (token, read cache, script load) and is left out.
  await run(host.base, { ...phases[1]!, requests: 4 });
  await run(host.base, { ...phases[2]!, requests: 2 });
  let before: Snapshot = await measure();
  {
    const idle = await measure();
    const [commands, transactions] = [idle.commands - before.commands, idle.transactions - before.transactions];
    rows.push(['idle (one measuring window)', `${commands} in all`, '—', '—', `${transactions} in all`, '—']);
    before = idle;
  }
  for (const phase of phases) {
    const began = Date.now();
    const statuses = await run(host.base, phase);
    const seconds = secondsSince(began);
    const after = await measure();
    const per = (value: number) => (value / phase.requests).toFixed(2);
    const netOut = after.netOut - before.netOut - before.replyBytes;
    const batches = after.batches - before.batches;
    const commands = after.batchedCommands - before.batchedCommands;
    const xacts = after.transactions - before.transactions;
    const batching =
      batches > 0
        ? `${batches} batches, ${(commands / batches).toFixed(1)} commands and ${(xacts / batches).toFixed(2)} transactions each`
        : '—';
    const answers = [...statuses].map(([s, n]) => `${n}× ${s}`).join(', ');
    rows.push([
      `${phase.name} (${phase.requests}: ${answers}; ${(phase.requests / seconds).toFixed(0)} req/s)`,
      per(after.commands - before.commands),
      per(after.scriptCalls - before.scriptCalls),
      `${per(after.netIn - before.netIn)} / ${per(netOut)}`,
      per(xacts),
      batching,
    ]);
    const mix = Object.entries(after.byCommand)
      .map(([name, calls]) => [name, (calls - (before.byCommand[name] ?? 0)) / phase.requests] as const)
      .filter(([, per]) => per >= 0.01)
      .sort((a, b) => b[1] - a[1]);
    commandMix.push(`${phase.name}: ${mix.map(([name, per]) => `${name} ${per.toFixed(2)}`).join(', ')}`);
    if (phase === phases[0]) {
      const keys = await keysMatching(stores.admin, `${PREFIX}throttle:*`);
      const sizes = await Promise.all(keys.map((key) => stores.admin.memory('USAGE', key)));
      const mean = sizes.reduce((sum: number, size) => sum + Number(size ?? 0), 0) / sizes.length;
      memory.push(
        `${keys.length} client keys of 2 admissions each: MEMORY USAGE ${mean.toFixed(0)} B on average; ` +
          `used_memory grew ${((after.usedMemory - before.usedMemory) / keys.length).toFixed(0)} B per client key`,
      );
    }
    if (phase === phases.at(-1)) {
      // The service's Redis account may not run KEYS (docs/testing.md "Stores as shipped"): SCAN it is.
      const [key] = await keysMatching(stores.admin, `${PREFIX}throttle:*192.0.2.1*`);
      if (key)
        memory.push(
          `a key full at ${ANON_LIMIT}/min (${key.slice(PREFIX.length)}): MEMORY USAGE ${await stores.admin.memory('USAGE', key)} B`,
        );
    }
    // The measuring above sent Redis commands of its own: start the next phase after them.
    before = { ...after, ...(await redisSnapshot(stores.admin)) };
  }
  console.log(`\nOne host, 2 web workers, ${REQUESTS} requests per phase (${new Date().toISOString()}):\n`);
  const columns = ['phase', 'Redis commands / request>', 'script calls / request>'];
  columns.push('Redis bytes in / out per request>', 'PostgreSQL transactions / request>', 'group commit');
  console.log(`${markdownTable(columns, rows)}\n`);
  for (const line of memory) console.log(`- ${line}`);
  console.log('\nRedis commands per request, by command (those inside scripts included):\n');
  for (const line of commandMix) console.log(`- ${line}`);
  await monitor.destroy();
}

await runBench('sizing', main);
