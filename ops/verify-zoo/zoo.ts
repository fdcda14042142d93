/**
 * `npm run verify:zoo`: verify's default command against real third-party limiters (docs/verify.md "The zoo"):
 * nginx limit_req, HAProxy stick-table rate limiting, express-rate-limit's memory store behind node:cluster,
 * @fastify/rate-limit with Redis, and Paceline. Each runs on loopback with a limit of 10 per 5 s (Paceline:
 * 60 per 3 s); verify's answer for each is one row of the table printed and written to
 * ops/verify-zoo/results.md, which docs/verify.md reproduces.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { findFreePort } from '../../src/embedded/ports.js';
import { startRedis, newRedisPassword } from '../../src/embedded/redis.js';
import { startVerifyHost } from '../../test/helpers/verify-host.js';
import { runVerify, type VerifyRun } from '../../test/helpers/verify.js';

interface Member {
  service: string;
  algorithm: string;
  /** Starts the member; its base URL, verify's arguments beyond the defaults, and how to stop it. */
  start(scratch: string): Promise<{ base: string; args: string[]; stop: () => Promise<void> }>;
}

/** A limiter that states no RateLimit-Policy is judged at the limit it was configured with. */
const ANONYMOUS = ['--anonymous', '--limit', '10/5s'];

export const MEMBERS: Member[] = [
  {
    service: 'nginx `limit_req` (Debian nginx-light)',
    algorithm: 'leaky bucket, 2 r/s, burst 9 nodelay',
    async start(scratch) {
      const port = await findFreePort();
      const conf = join(scratch, 'nginx.conf');
      const text = await readFile('ops/verify-zoo/nginx.conf', 'utf8');
      await writeFile(conf, text.replaceAll('PREFIX', scratch).replaceAll('PORT', String(port)));
      await mkdir(join(scratch, 'www', 'api', 'tasks'), { recursive: true });
      await writeFile(join(scratch, 'www', 'api', 'tasks', 'index.json'), '{"results":[]}');
      const child = spawn('nginx', ['-c', conf, '-p', scratch], { stdio: 'inherit' });
      return { base: await listening(child, port), args: ANONYMOUS, stop: () => stop(child) };
    },
  },
  {
    service: 'HAProxy stick table (Debian haproxy)',
    algorithm: '`http_req_rate(5s)` above 10 → 429',
    async start(scratch) {
      const port = await findFreePort();
      const cfg = join(scratch, 'haproxy.cfg');
      await writeFile(cfg, (await readFile('ops/verify-zoo/haproxy.cfg', 'utf8')).replaceAll('PORT', String(port)));
      const child = spawn('haproxy', ['-db', '-f', cfg], { stdio: 'inherit' });
      return { base: await listening(child, port), args: ANONYMOUS, stop: () => stop(child) };
    },
  },
  {
    service: 'express-rate-limit, memory store, `node:cluster` × 2',
    algorithm: 'fixed window per process, 10 per 5 s',
    async start() {
      const port = await findFreePort();
      const child = node(['ops/verify-zoo/express-cluster.ts', String(port)]);
      return { base: await listening(child, port), args: ['--anonymous'], stop: () => stop(child) };
    },
  },
  {
    service: '@fastify/rate-limit, Redis store',
    algorithm: 'fixed window in Redis, 10 per 5 s',
    async start(scratch) {
      await chmod(scratch, 0o755);
      const redis = await startRedis({
        dataDir: join(scratch, 'redis'),
        port: await findFreePort(),
        persistent: false,
        password: newRedisPassword(),
        log: () => {},
      });
      const port = await findFreePort();
      const child = node(['ops/verify-zoo/fastify-redis.ts', String(port), redis.url]);
      const base = await listening(child, port);
      return {
        base,
        args: ANONYMOUS,
        stop: async () => {
          await stop(child);
          await redis.stop();
        },
      };
    },
  },
  {
    service: 'Paceline (2 workers, embedded PostgreSQL and Redis)',
    algorithm: 'sliding log in Redis (Lua), 60 per 3 s',
    async start(scratch) {
      const { host, args } = await startVerifyHost(scratch);
      return {
        base: host.base,
        args,
        stop: async () => {
          await host.stop();
        },
      };
    },
  },
];

function node(args: string[]): ChildProcess {
  return spawn(process.execPath, ['--import', 'tsx', ...args], { stdio: ['ignore', 'ignore', 'inherit'] });
}

/** Resolves with the base URL once something accepts connections on `port` (at most 30 s). */
async function listening(child: ChildProcess, port: number): Promise<string> {
  for (let tries = 0; tries < 300; tries++) {
    if (child.exitCode !== null) throw new Error(`${child.spawnfile} exited with ${child.exitCode}`);
    const open = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, '127.0.0.1', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (open) return `http://127.0.0.1:${port}`;
    await sleep(100);
  }
  throw new Error(`nothing listened on ${port} within 30 s`);
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  await once(child, 'exit');
}

/** The schedules and findings of the limits check, as a table cell. */
export function describe(run: VerifyRun): { verdict: string; finding: string } {
  const limits = run.report.checks.find((c) => c.name === 'limits');
  if (limits === undefined) return { verdict: `exit ${run.code}`, finding: run.output.trim().split('\n').at(-1) ?? '' };
  const others = run.report.checks.filter((c) => c.name !== 'limits' && c.verdict !== 'holds');
  const rest = others.map((c) => `; ${c.name} ${c.verdict}: ${c.summary}`).join('');
  return { verdict: limits.verdict, finding: limits.summary.replace(/^[^:]*: /, '') + rest };
}

async function main(): Promise<void> {
  const only = process.argv.slice(2);
  const rows: string[] = [];
  for (const member of MEMBERS.filter((m) => only.length === 0 || only.some((o) => m.service.includes(o)))) {
    const scratch = await mkdtemp(join(tmpdir(), 'paceline-verify-zoo-'));
    const running = await member.start(scratch);
    try {
      const began = Date.now();
      const run = await runVerify(running.base, running.args, join(scratch, 'report'));
      const { verdict, finding } = describe(run);
      const seconds = ((Date.now() - began) / 1000).toFixed(0);
      console.log(`${member.service}: ${verdict} (${seconds} s)\n  ${finding}`);
      rows.push(`| ${member.service} | ${member.algorithm} | ${finding} | **${verdict}** |`);
    } finally {
      await running.stop();
      await rm(scratch, { recursive: true, force: true });
    }
  }
  const table = `| service | algorithm | what verify's default command found, and the schedule that exposed it | verdict |
|---|---|---|---|
${rows.join('\n')}
`;
  await writeFile('ops/verify-zoo/results.md', `# verify:zoo, ${new Date().toISOString().slice(0, 10)}\n\n${table}`);
  console.log(`\n${table}`);
}

if (process.argv[1]?.endsWith('zoo.ts')) await main();
