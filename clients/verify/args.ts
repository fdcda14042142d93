/** The checks `verify` knows, in the order it reports them. */
export const CHECKS = ['limits', 'cursor', 'ryw', 'idempotency', 'feed'] as const;
export type CheckName = (typeof CHECKS)[number];

export interface Credentials {
  username: string;
  password: string;
}

export interface Options {
  base: URL;
  users: Credentials[];
  checks: CheckName[];
  reportDir?: string;
  historyFile?: string;
  /** Leave the tasks the run created in place (default: delete them). */
  keep: boolean;
  /** `N/W` for the limits check when the service sends no `RateLimit-Policy`. */
  limit?: { limit: number; windowMs: number };
  /** Local addresses the limits check sends from (loopback or test hosts). */
  sources: string[];
  /** Requests per second the limits check sends at most, across its connections. */
  rate: number;
  connections: number;
  /** How long the cursor check's writers and walkers run. */
  walkSeconds: number;
  /** The limits check judges source addresses, never a user, and logs no one in for it. */
  anonymous: boolean;
  /** What the limits check requests (a path with its query, relative to the base URL). */
  path: string;
  /** A path whose requests cost more units, requested in turn with `path` by the limits check. */
  weightedPath?: string;
  /** The list whose `next` and `previous` links the cursor walks follow. */
  cursorPath: string;
  /** The word before the token in `Authorization` (`Bearer`; DRF's TokenAuthentication wants `Token`). */
  authScheme: string;
  /** A GET answered only to a signed-in user: the one proof of identity asked for, when given. */
  identityPath?: string;
  /** `--help`: print the usage and run nothing. */
  help: boolean;
}

export const USAGE = `usage: npm run verify -- <base URL> --user NAME:PASSWORD [--user NAME:PASSWORD] | --anonymous
  [--checks ${CHECKS.join(',')}] [--report DIR] [--history FILE] [--keep]
  [--limit N/60s] [--source ADDRESS ...] [--rate N] [--connections N] [--walk-seconds N]
  [--path PATH] [--weighted-path PATH] [--cursor-path PATH] [--auth-scheme NAME] [--identity-path PATH]`;

/** `--help`: the usage and what each option does in a line (docs/verify.md "Running it" says more). */
export const HELP = `${USAGE}

  --user NAME:PASSWORD   a test user of its own; the last of two or more is pushed past its limit
  --anonymous            judge each source address's limit; no user is needed for the limits check
  --checks LIST          the checks to run (default: all)
  --report DIR           write DIR/report.json and DIR/report.html
  --history FILE         keep every request and answer as JSON lines
  --keep                 leave the tasks the run made in place
  --limit N/Ws           the limit to judge, for a service that states none (default: RateLimit-Policy,
                         else measured for a user)
  --source ADDRESS       a local address to send from (repeatable)
  --rate N               requests a second the limits check sends at most (default 60)
  --connections N        keep-alive connections the limits check spreads them over (default 8)
  --walk-seconds N       how long the cursor check writes and walks (default 15)
  --path PATH            what the limits check requests (default /api/tasks/)
  --weighted-path PATH   a path that costs more units, requested in turn with --path by the limits check
                         (e.g. /api/tasks/?page_size=300 where MAX_PAGE_SIZE allows it)
  --cursor-path PATH     the list the cursor walks follow (default /api/tasks/?cursor=)
  --auth-scheme NAME     the word before the token in Authorization (default Bearer; Token for DRF)
  --identity-path PATH   a GET answered only to a signed-in user, 2xx with the token and 401 or 403 without:
                         the one proof that the service takes a token as its user (default: the limits
                         path's answers, the event feed, then this address's anonymous budget)

Exit status: 0 holds, 1 violated, 3 skipped, 2 stopped before any check, 4 verify failed.
Docs: docs/verify.md`;

/** Parses the command line; a bad one throws an Error whose message is one line for the user. */
export function parseArgs(argv: readonly string[]): Options {
  const options: Options = {
    base: new URL('http://x'),
    users: [],
    checks: [...CHECKS],
    keep: false,
    sources: [],
    rate: 60,
    connections: 8,
    walkSeconds: 15,
    anonymous: false,
    path: 'api/tasks/',
    cursorPath: 'api/tasks/?cursor=',
    authScheme: 'Bearer',
    help: false,
  };
  let base: string | undefined;
  let checksGiven = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const value = () => {
      const next = argv[++i];
      if (next === undefined) throw new Error(`${arg} needs a value`);
      return next;
    };
    if (arg === '--user') options.users.push(parseUser(value()));
    else if (arg === '--checks') {
      options.checks = parseChecks(value());
      checksGiven = true;
    } else if (arg === '--report') options.reportDir = value();
    else if (arg === '--history') options.historyFile = value();
    else if (arg === '--keep') options.keep = true;
    else if (arg === '--limit') options.limit = parseLimit(value());
    else if (arg === '--source') options.sources.push(value());
    else if (arg === '--rate') options.rate = parsePositive(arg, value(), 1000);
    else if (arg === '--connections') options.connections = parsePositive(arg, value(), 64);
    else if (arg === '--walk-seconds') options.walkSeconds = parsePositive(arg, value(), 600);
    else if (arg === '--anonymous') options.anonymous = true;
    else if (arg === '--path') options.path = parsePath(arg, value());
    else if (arg === '--weighted-path') options.weightedPath = parsePath(arg, value());
    else if (arg === '--cursor-path') options.cursorPath = parsePath(arg, value());
    else if (arg === '--auth-scheme') options.authScheme = parseScheme(value());
    else if (arg === '--identity-path') options.identityPath = parsePath(arg, value());
    else if (arg === '--help' || arg === '-h') return { ...options, help: true };
    else if (arg.startsWith('--')) throw new Error(`unknown option ${arg}`);
    else if (base === undefined) base = arg;
    else throw new Error(`one base URL only (got "${base}" and "${arg}")`);
  }
  if (base === undefined) throw new Error('the base URL of the service is required');
  options.base = parseBase(base);
  // With --anonymous and no user, the limits check is the only one that can run.
  if (options.anonymous && options.users.length === 0 && !checksGiven) options.checks = ['limits'];
  const needUser = options.checks.filter((name) => name !== 'limits' || !options.anonymous);
  if (options.users.length === 0 && needUser.length > 0) {
    const why = options.anonymous ? ` for ${needUser.join(', ')}` : ' (or --anonymous for the limits check alone)';
    throw new Error(`at least one --user NAME:PASSWORD is required${why}`);
  }
  return options;
}

/** A path on the service, taken relative to the base URL (so that a base with a path prefix keeps it). */
function parsePath(name: string, text: string): string {
  const path = text.replace(/^\/+/, '');
  if (/^[a-z]+:/i.test(path) || /\s/.test(path))
    throw new Error(`${name} takes a path such as /api/tasks/, got "${text}"`);
  return path;
}

function parseScheme(text: string): string {
  if (!/^[A-Za-z][A-Za-z0-9!#$%&'*+.^_`|~-]*$/.test(text))
    throw new Error(`--auth-scheme takes one word such as Bearer or Token, got "${text}"`);
  return text;
}

function parseBase(text: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new Error(`"${text}" is not a URL (e.g. http://127.0.0.1:8000)`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error(`"${text}" is not an http(s) URL`);
  return new URL(url.origin + url.pathname.replace(/\/?$/, '/'));
}

function parseUser(text: string): Credentials {
  const colon = text.indexOf(':');
  if (colon <= 0 || colon === text.length - 1) throw new Error(`--user takes NAME:PASSWORD, got "${text}"`);
  return { username: text.slice(0, colon), password: text.slice(colon + 1) };
}

function parseChecks(text: string): CheckName[] {
  const names = text
    .split(',')
    .map((name) => name.trim())
    .filter((name) => name !== '');
  for (const name of names) {
    if (!(CHECKS as readonly string[]).includes(name))
      throw new Error(`unknown check "${name}" (known: ${CHECKS.join(', ')})`);
  }
  if (names.length === 0) throw new Error('--checks names no check');
  return CHECKS.filter((name) => names.includes(name));
}

const UNITS: Record<string, number> = { s: 1_000, m: 60_000, min: 60_000, h: 3_600_000 };

/** `100/60s`, `20/min`, `10/2s`: a limit and its window. */
export function parseLimit(text: string): { limit: number; windowMs: number } {
  const match = /^(\d+)\/(\d*)(s|m|min|h)$/.exec(text.trim());
  if (!match) throw new Error(`--limit takes N/<seconds>s (e.g. 100/60s or 20/min), got "${text}"`);
  const limit = Number(match[1]);
  const windowMs = Number(match[2] === '' ? 1 : match[2]) * UNITS[match[3]!]!;
  if (limit < 1 || windowMs < 1) throw new Error(`--limit must be positive, got "${text}"`);
  return { limit, windowMs };
}

function parsePositive(name: string, text: string, max: number): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1 || n > max)
    throw new Error(`${name} takes a whole number from 1 to ${max}, got "${text}"`);
  return n;
}
