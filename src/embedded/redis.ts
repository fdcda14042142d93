import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmod, mkdir } from 'node:fs/promises';
import { connect } from 'node:net';
import { resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { embeddedRedisUrl, SERVICE_USER } from '../stores/redis-service-user.js';
import { findServerAccount, giveTree, prepareParents, REDIS_ACCOUNT } from './server-account.js';
import { graceBefore, type RunningService } from './service.js';

interface RedisServerOptions {
  /** Working directory for the append-only file; created when missing. */
  dataDir: string;
  /** TCP port on 127.0.0.1. */
  port: number;
  /** true: append-only file plus snapshots; false: nothing is written to disk. */
  persistent: boolean;
  /** Receives the server's log lines and a line if it dies unexpectedly. */
  log?: (line: string) => void;
  /** More `redis-server` options, e.g. `['--cluster-enabled', 'yes']`. */
  extraArgs?: string[];
  /** Called, instead of logging a line, when the server exits without `stop()` (killed, crashed). */
  onUnexpectedExit?: (how: string) => void;
  /**
   * With a password: also an operator's user, {@link OPERATOR_USER}, with every command, for a test
   * or a benchmark that plays the operator (SAVE, CLIENT PAUSE, KEYS, creating a Redis Cluster), and
   * as which a replica follows its master; never given to the service.
   */
  operatorPassword?: string;
}

/**
 * A server as `npm start` runs it: clients must AUTH as {@link SERVICE_USER} with `password`
 * (handed over on stdin, so `ps` never shows it), the `default` user is off. A server without
 * a password and ACL exists only for a test about their absence, and must say why in
 * `withoutPassword`: the type checker refuses a server that has neither.
 */
export type RedisOptions = RedisServerOptions &
  ({ password: string; withoutPassword?: never } | { withoutPassword: string; password?: never });

/** A fresh password for a throwaway server (a test's, a benchmark's): 24 random characters. */
export function newRedisPassword(): string {
  return randomBytes(18).toString('base64url');
}

/** The operator's user of a throwaway server started with `operatorPassword`. */
export const OPERATOR_USER = 'operator';

/**
 * What {@link SERVICE_USER} may run (docs/security.md "Least privilege"): every data, scripting and pub/sub
 * command the throttle script, the read cache and BullMQ use, plus INFO (ioredis' ready check and
 * BullMQ's version check read it), and nothing of `@dangerous`: no CONFIG, FLUSHALL, FLUSHDB,
 * KEYS, DEBUG, SHUTDOWN, MONITOR, ACL, MODULE, CLIENT KILL/LIST, replication or persistence
 * commands; no SCRIPT FLUSH/KILL and no FUNCTION either. The `default` user is switched off.
 */
const SERVICE_ACL = '~* &* +@all -@dangerous +info -script|flush -script|kill -function';

const READY_TIMEOUT_MS = 30_000;
const STOP_GRACE_MS = 3_000;

/**
 * Starts `redis-server` as a child process on 127.0.0.1:`port` and resolves once it answers
 * PING, with `redis://127.0.0.1:<port>` (`redis://paceline:<password>@…` with a password, as the
 * one user {@link SERVICE_ACL} allows). Run as root, the server runs as its own `paceline-redis`
 * account, which then owns `dataDir`. `stop()` is idempotent: SIGTERM, then SIGKILL after a few
 * seconds. Once stopped or killed (a test may kill `pid` itself), calling this again with
 * the same port and data directory brings it back; a persistent one keeps its data.
 * Throws one line saying how to get Redis when `redis-server` is not installed.
 */
export async function startRedis(
  opts: RedisOptions,
): Promise<RunningService & { pid: number; /** With `operatorPassword`: the operator's URL. */ operatorUrl?: string }> {
  const dataDir = resolve(opts.dataDir);
  const log = opts.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const serverLog = opts.log ?? (() => {});
  const account = findServerAccount(REDIS_ACCOUNT);
  await prepareParents(dataDir, account, 'Redis');
  // Its data is the server account's alone, as PostgreSQL's is.
  await mkdir(dataDir, { recursive: true });
  await chmod(dataDir, 0o700);
  if (account !== undefined) await giveTree(dataDir, account);
  // A server left by a killed run would answer our PING while the new one fails to bind.
  if ((await ping(opts.port, undefined)) !== undefined) {
    throw new Error(`port ${opts.port} is already served by another process (a Redis left by an earlier run?)`);
  }

  // Its own process group: Ctrl-C in a terminal reaches our processes, and the owner stops Redis
  // after its clients have drained, rather than Redis going first.
  // The password goes in a config read from stdin ('-'), never in the arguments `ps` shows.
  const config =
    opts.password === undefined
      ? undefined
      : `user default off\nuser ${SERVICE_USER} on ${quoted(`>${opts.password}`)} ${SERVICE_ACL}\n` +
        (opts.operatorPassword === undefined
          ? ''
          : // A replica (a Redis Cluster's) follows its master as the operator: the service may not replicate.
            `user ${OPERATOR_USER} on ${quoted(`>${opts.operatorPassword}`)} ~* &* +@all\n` +
            `masteruser ${OPERATOR_USER}\nmasterauth ${quoted(opts.operatorPassword)}\n`);
  const child = spawn(
    'redis-server',
    [...(config ? ['-'] : []), ...serverArgs(opts.port, dataDir, opts.persistent), ...(opts.extraArgs ?? [])],
    {
      stdio: [config ? 'pipe' : 'ignore', 'pipe', 'pipe'],
      detached: true,
      ...(account ? { uid: account.uid, gid: account.gid } : {}),
    },
  );
  child.stdin?.on('error', () => {}); // a server that failed to start closed it; its exit says why
  if (config) child.stdin!.end(config);
  const recent: string[] = [];
  for (const stream of [child.stdout!, child.stderr!]) {
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => {
      for (const line of chunk.split('\n').filter((text) => text.trim() !== '')) {
        recent.push(line);
        if (recent.length > 20) recent.shift();
        serverLog(line);
      }
    });
  }
  const exited = exitOf(child);
  // A synchronous last resort when the caller exits without stop() (or the start fails below).
  const onExit = () => child.kill('SIGTERM');
  process.on('exit', onExit);
  void exited.then(() => process.removeListener('exit', onExit));
  try {
    await waitUntilReady(opts.port, opts.password, exited, recent);
  } catch (error) {
    child.kill('SIGKILL');
    throw error;
  }

  let stopping = false;
  void exited.then(({ code, signal }) => {
    if (stopping) return;
    if (opts.onUnexpectedExit) opts.onUnexpectedExit(signal ?? `code ${code}`);
    else log(`redis-server on port ${opts.port} exited unexpectedly (${signal ?? `code ${code}`})`);
  });
  let stopped: Promise<void> | undefined;
  const stop = (deadline?: number) =>
    (stopped ??= (async () => {
      stopping = true;
      await terminate(child, exited, deadline);
    })());
  const operatorUrl =
    opts.operatorPassword === undefined
      ? undefined
      : `redis://${OPERATOR_USER}:${encodeURIComponent(opts.operatorPassword)}@127.0.0.1:${opts.port}`;
  return {
    url: embeddedRedisUrl(opts.port, opts.password),
    pid: child.pid ?? 0,
    stop,
    ...(operatorUrl ? { operatorUrl } : {}),
  };
}

/** A value in redis.conf's double quotes (its escapes are C's). */
function quoted(value: string): string {
  if (/[\x00-\x1f]/.test(value)) throw new Error('a Redis password must not contain control characters');
  return `"${value.replace(/[\\"]/g, (char) => `\\${char}`)}"`;
}

function serverArgs(port: number, dataDir: string, persistent: boolean): string[] {
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--dir', dataDir, '--daemonize', 'no'];
  args.push('--logfile', '', '--loglevel', 'notice');
  if (persistent) args.push('--appendonly', 'yes');
  else args.push('--appendonly', 'no', '--save', '');
  return args;
}

interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  error?: NodeJS.ErrnoException;
}

function exitOf(child: ChildProcess): Promise<Exit> {
  return new Promise((resolveExit) => {
    child.once('error', (error: NodeJS.ErrnoException) => resolveExit({ code: null, signal: null, error }));
    child.once('exit', (code, signal) => resolveExit({ code, signal }));
  });
}

async function waitUntilReady(
  port: number,
  password: string | undefined,
  exited: Promise<Exit>,
  recent: string[],
): Promise<void> {
  let exit: Exit | undefined;
  void exited.then((value) => (exit = value));
  const deadline = Date.now() + READY_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if ((await ping(port, password)) === '+PONG') return;
    await sleep(50);
    if (exit !== undefined) throw startFailure(port, exit, recent);
  }
  throw new Error(`redis-server on port ${port} did not answer PING within ${READY_TIMEOUT_MS} ms`);
}

function startFailure(port: number, exit: Exit, recent: string[]): Error {
  if (exit.error?.code === 'ENOENT') {
    return new Error('redis-server not found: install it (sudo apt-get install redis-server) or set REDIS_URL');
  }
  const reason = exit.error?.message ?? recent.findLast((line) => line.includes('#')) ?? recent.at(-1);
  return new Error(`redis-server did not start on 127.0.0.1:${port}: ${reason ?? `exit code ${exit.code}`}`);
}

/**
 * One PING over a raw socket (after an AUTH with `password`): PING's reply line, or undefined when nothing answered.
 */
function ping(port: number, password: string | undefined): Promise<string | undefined> {
  const replies = password === undefined ? 1 : 2;
  return new Promise((resolvePing) => {
    const socket = connect({ host: '127.0.0.1', port });
    const finish = (reply: string | undefined) => {
      socket.destroy();
      resolvePing(reply);
    };
    let received = '';
    socket.setTimeout(1_000, () => finish(undefined));
    socket.once('error', () => finish(undefined));
    const auth = password === undefined ? '' : command('AUTH', SERVICE_USER, password);
    socket.once('connect', () => socket.write(`${auth}PING\r\n`));
    socket.on('data', (data) => {
      received += data.toString('utf8');
      const lines = received.split('\r\n');
      if (lines.length > replies) finish(lines[replies - 1]);
    });
  });
}

/** SIGTERM, then SIGKILL past the grace or the stop's deadline (losing at most the last second of unsynced writes). */
async function terminate(child: ChildProcess, exited: Promise<Exit>, deadline?: number): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  const grace = graceBefore(deadline, STOP_GRACE_MS);
  const done = await Promise.race([exited.then(() => true), sleep(grace).then(() => false)]);
  if (!done) {
    child.kill('SIGKILL');
    await exited;
  }
}

/** A command in the protocol's array form, so any byte of an argument is sent as it is. */
function command(...args: string[]): string {
  return `*${args.length}\r\n${args.map((arg) => `$${Buffer.byteLength(arg)}\r\n${arg}\r\n`).join('')}`;
}
