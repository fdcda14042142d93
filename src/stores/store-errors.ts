import { SERVICE_USER } from './redis-service-user.js';

/** The setting that points at a store: what a line about its failure names. */
export type StoreSetting = 'DATABASE_URL' | 'REDIS_URL' | 'REDIS_CLUSTER_NODES';

/** Why a store cannot be used, for a person: what happened, and what to do about it. */
export interface StoreFailure {
  cause: string;
  advice: string;
}

interface ErrorFacts {
  code: string;
  message: string;
  /** The system call a Node system error failed in (`connect`); empty for any other error. */
  syscall: string;
}

/**
 * What went wrong with a store, in words an operator can act on (docs/operations.md "When a store
 * is down"): a refused connection, a refused password, a TLS mismatch, a missing database, a
 * timeout. Never a stack; the error's own text only where nothing better is known.
 */
export function describeStoreError(error: unknown, setting: StoreSetting): StoreFailure {
  const { code, message } = factsOf(error);
  const redis = setting !== 'DATABASE_URL';
  const name = redis ? 'Redis' : 'PostgreSQL';
  const fix = `correct ${setting}`;
  if (code === 'ECONNREFUSED')
    return { cause: `connection refused (${addressIn(message)})`, advice: `start ${name} there or ${fix}` };
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN')
    return { cause: `the host name does not resolve (${addressIn(message)})`, advice: fix };
  // A Unix socket (unix:///PATH): `connect ENOENT /run/redis.sock`.
  if (code === 'ENOENT') return { cause: `no socket at ${pathIn(message)}`, advice: `start ${name} there or ${fix}` };
  if (code === 'EACCES')
    return {
      cause: `no permission to use the socket ${pathIn(message)}`,
      advice: `grant this account access or ${fix}`,
    };
  if (code === 'ETIMEDOUT' || /timed? ?out/i.test(message))
    return { cause: 'no answer in time', advice: `check that ${name} runs and a firewall lets this host reach it` };
  if (/^(NOAUTH|WRONGPASS)|password authentication failed|^28P01$|^28000$/.test(redis ? message : `${code}`))
    return { cause: `the password was refused (${firstWords(message)})`, advice: CREDENTIALS_IN[setting] };
  if (redis && /AUTH.*without any password configured/.test(message))
    return { cause: 'a password was sent but the server has none', advice: `remove the password from ${setting}` };
  if (code === '3D000')
    return {
      cause: firstWords(message),
      advice: `create that database (createdb NAME) or correct the database name in ${setting}`,
    };
  if (/SSL|TLS|certificate|ERR_SSL|wrong version number/i.test(`${code} ${message}`) || code === 'ECONNRESET')
    return {
      cause: `the connection was closed during its start, a TLS mismatch? (${firstWords(message)})`,
      advice: redis
        ? `use rediss:// for a server that speaks TLS and redis:// for one that does not, in ${setting}`
        : `set sslmode in ${setting} to what the server offers (sslmode=disable for a server without TLS)`,
    };
  return { cause: firstWords(message) || 'unknown error', advice: `check that ${name} runs and ${setting} is right` };
}

/**
 * Where a refused password goes. Without a user, Redis checks the password of its `default` user,
 * which the embedded Redis has switched off: its one user is {@link SERVICE_USER}
 * (docs/security.md "Least privilege").
 */
const CREDENTIALS_IN: Readonly<Record<StoreSetting, string>> = {
  DATABASE_URL: 'put the right user and password in DATABASE_URL',
  REDIS_URL:
    'put the right user and password in REDIS_URL (redis://USER:PASSWORD@host:port; for the embedded Redis, ' +
    `redis://${SERVICE_USER}:PASSWORD@host:port) or the password in REDIS_PASSWORD`,
  REDIS_CLUSTER_NODES:
    'put the right user and password in REDIS_CLUSTER_NODES (redis-cluster://USER:PASSWORD@host:port,...) ' +
    'or the password in REDIS_PASSWORD',
};

/** One line: the setting (its address, password hidden), the cause and what to do. */
export function storeFailureLine(setting: StoreSetting, address: string | undefined, failure: StoreFailure): string {
  const where = address ? ` ${redactAddress(address)}` : '';
  return `${setting}${where}: ${failure.cause}: ${failure.advice}`;
}

/**
 * Whether `error` says that a store cannot be reached or used at all, rather than that one command
 * failed: connection refused or reset, no such socket, authentication, TLS, a closed or unwritable
 * connection.
 */
export function isStoreUnavailable(error: unknown): boolean {
  const { code, message, syscall } = factsOf(error);
  return (
    /^(ECONNREFUSED|ECONNRESET|ENOTFOUND|EAI_AGAIN|ETIMEDOUT|EPIPE|3D000|28P01|28000|57P01|57P03)$/.test(code) ||
    // Whatever else the socket met on its way (no such socket, no route, …), and a refused TLS handshake.
    /^(connect|getaddrinfo|read|write)$/.test(syscall) ||
    /CERT|SSL|TLS|SIGNATURE/.test(code) ||
    UNAVAILABLE_MESSAGES.some((pattern) => pattern.test(message))
  );
}

/**
 * What ioredis and pg say of a connection that is down or refused, of a server that does not speak
 * the protocol, and of a cluster none of whose nodes answers.
 */
const UNAVAILABLE_MESSAGES: readonly RegExp[] = [
  /^(NOAUTH|WRONGPASS)/,
  /^Protocol error/,
  /Stream isn't writeable|Connection is closed|max retries per request|Connection terminated|did not answer within/i,
  /Failed to refresh slots cache|None of startup nodes is available|Cluster isn't ready/,
];

/** `url` without its password (a Redis Cluster's node list is shown as given). */
export function redactAddress(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return url;
  }
}

/** The first line of an error's message: what a log line shows of it instead of a stack. */
export function firstLineOf(error: unknown): string {
  return factsOf(error).message.split('\n')[0]!;
}

function factsOf(error: unknown): ErrorFacts {
  type Found =
    { code?: unknown; message?: unknown; syscall?: unknown; errors?: unknown[]; lastNodeError?: unknown } | undefined;
  const found = error as Found;
  // ioredis reports a cluster none of whose nodes gave its slots with the last node's error (NOAUTH, say).
  if (found?.lastNodeError) return factsOf(found.lastNodeError);
  // Node reports a refused connection to every address of a name as an AggregateError.
  const inner = Array.isArray(found?.errors) && found.errors.length > 0 ? factsOf(found.errors[0]) : undefined;
  const code = typeof found?.code === 'string' ? found.code : (inner?.code ?? '');
  const message = typeof found?.message === 'string' && found.message !== '' ? found.message : (inner?.message ?? '');
  const syscall = typeof found?.syscall === 'string' ? found.syscall : (inner?.syscall ?? '');
  return { code, message: message || String(error), syscall };
}

function addressIn(message: string): string {
  return (
    /\d{1,3}(\.\d{1,3}){3}:\d+|\[[\da-f:]+\]:\d+|[\w.-]+:\d+/i.exec(message)?.[0] ??
    // A name that does not resolve: `getaddrinfo ENOTFOUND cache-1`.
    /(?:ENOTFOUND|EAI_AGAIN) ([\w.-]+)/.exec(message)?.[1] ??
    'no address given'
  );
}

/** The path a failed socket `connect` names: `connect ENOENT /run/redis.sock`. */
function pathIn(message: string): string {
  return /E[A-Z]+ (\/\S*)/.exec(message)?.[1] ?? 'the given path';
}

function firstWords(message: string): string {
  const line = message.split('\n')[0]!.trim();
  return line.length > 120 ? `${line.slice(0, 117)}...` : line;
}

interface LineLogger {
  debug(fields: object, message: string): void;
  warn(fields: object, message: string): void;
}

/**
 * Logs a failure of work that uses a store. A store that cannot be used at all is the primary's to
 * report, once per host as one line (docs/operations.md "When a store is down"): here it is one
 * debug line without a stack. Anything else is logged as a warning with its stack, as before.
 */
export function logStoreFailure(logger: LineLogger, error: unknown, message: string, fields: object = {}): void {
  if (isStoreUnavailable(error)) logger.debug({ ...fields, cause: firstLineOf(error) }, message);
  else logger.warn({ ...fields, err: error }, message);
}
