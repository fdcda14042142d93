/**
 * The value types of the settings in config.ts: each parses its text, or says in one line what
 * it expected.
 */
import { z } from 'zod';
import { parseClusterNodes } from './redis-cluster-nodes.js';
import { parseProxyList } from './proxy-list.js';
import { parseRate } from '../throttle/rate.js';
import { OWN_RATE_SETTINGS } from '../throttle/scopes.js';

/** A whole number between min and max, from its decimal text. */
export const integer = (min: number, max = Number.MAX_SAFE_INTEGER) =>
  z
    .string()
    .trim()
    .regex(/^\d+$/, 'expected a whole number')
    .transform(Number)
    .pipe(z.number().int().min(min).max(max));

/** A fraction between 0 and 1, from its decimal text (`0.2`). */
export const ratio = z
  .string()
  .trim()
  .regex(/^(0(\.\d+)?|1(\.0+)?)$/, 'expected a number from 0 to 1, such as 0.2')
  .transform(Number);

/** A rate such as `20/min` or `10/15min` (docs/architecture.md "Throttling"). */
export const rate = z
  .string()
  .trim()
  .superRefine((text, ctx) => {
    try {
      parseRate(text);
    } catch (error) {
      ctx.addIssue({ code: 'custom', message: (error as Error).message });
    }
  });

/** A duration such as `30s` or `24h`, in milliseconds. */
export const duration = z
  .string()
  .trim()
  .regex(/^\d+(ms|s|m|h|d)$/, 'expected a duration such as 30s, 15m, 24h or 7d')
  .transform(parseDuration);

/** Reads `scope=rate,scope=rate` (THROTTLE_RATES) into a map of scope to rate text. */
function parseScopeRates(text: string): Record<string, string> {
  const pairs = text
    .split(',')
    .map((pair) => pair.trim())
    .filter(Boolean);
  return Object.fromEntries(pairs.map((pair) => pair.split('=').map((part) => part.trim()) as [string, string]));
}

function checkScopeRates(text: string, ctx: z.RefinementCtx): void {
  for (const pair of text
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)) {
    const [scope, rateText, extra] = pair.split('=');
    if (!scope?.trim() || rateText === undefined || extra !== undefined) {
      ctx.addIssue({ code: 'custom', message: `expected scope=rate pairs separated by commas, got "${pair}"` });
      return;
    }
    const name = scope.trim();
    if (Object.hasOwn(OWN_RATE_SETTINGS, name)) {
      ctx.addIssue({ code: 'custom', message: `the ${name} scope has its own setting, ${OWN_RATE_SETTINGS[name]}` });
      return;
    }
    try {
      parseRate(rateText);
    } catch (error) {
      ctx.addIssue({ code: 'custom', message: (error as Error).message });
    }
  }
}

const SCOPE_NAME = /^[a-z0-9][a-z0-9._-]*$/;

// Any scope may carry a shadow rate, its own-setting ones included.
function checkShadowRates(text: string, ctx: z.RefinementCtx): void {
  for (const pair of parseList(text)) {
    const [scope, rateText, extra] = pair.split('=').map((part) => part.trim());
    if (!scope || !SCOPE_NAME.test(scope) || rateText === undefined || extra !== undefined) {
      ctx.addIssue({ code: 'custom', message: `expected scope=rate pairs separated by commas, got "${pair}"` });
      return;
    }
    try {
      parseRate(rateText);
    } catch (error) {
      ctx.addIssue({ code: 'custom', message: (error as Error).message });
    }
  }
}

/** Most requests in progress a concurrency limit may allow one client in a scope (THROTTLE_CONCURRENCY). */
export const MAX_CONCURRENCY = 10_000;

/** Reads `scope=N,scope=N` (THROTTLE_CONCURRENCY) into a map of scope to its limit of requests in progress. */
function parseScopeLimits(text: string): Record<string, number> {
  return Object.fromEntries(Object.entries(parseScopeRates(text)).map(([scope, limit]) => [scope, Number(limit)]));
}

// Any scope the throttle middleware counts; not `login`, which the login route counts by username.
function checkScopeLimits(text: string, ctx: z.RefinementCtx): void {
  for (const pair of parseList(text)) {
    const [scope, limit, extra] = pair.split('=').map((part) => part.trim());
    if (!scope || !SCOPE_NAME.test(scope) || limit === undefined || extra !== undefined) {
      ctx.addIssue({ code: 'custom', message: `expected scope=N pairs separated by commas, got "${pair}"` });
      return;
    }
    if (scope === 'login') {
      ctx.addIssue({ code: 'custom', message: 'the login scope counts usernames; limit its route by token-obtain' });
      return;
    }
    if (!/^\d+$/.test(limit) || Number(limit) < 1 || Number(limit) > MAX_CONCURRENCY) {
      ctx.addIssue({ code: 'custom', message: `expected a whole number from 1 to ${MAX_CONCURRENCY}, got "${pair}"` });
      return;
    }
  }
}

function checkScopeNames(text: string, ctx: z.RefinementCtx): void {
  const bad = parseList(text).find((scope) => !SCOPE_NAME.test(scope));
  if (bad !== undefined)
    ctx.addIssue({ code: 'custom', message: `expected scope names separated by commas, got "${bad}"` });
}

/** Reads `a,b,c` into its non-empty entries, trimmed. */
function parseList(text: string): string[] {
  return text
    .split(',')
    .map((entry) => entry.trim())
    .filter(Boolean);
}

/** Reads `postgres://…,postgres://…` (DATABASE_REPLICA_URLS) into its URLs. */
const parseUrlList = parseList;

// Names an entry by its place only: the URLs carry passwords.
function checkUrlList(text: string, ctx: z.RefinementCtx): void {
  parseUrlList(text).forEach((url, index) => {
    if (!URL.canParse(url) || !['postgres:', 'postgresql:'].includes(new URL(url).protocol)) {
      ctx.addIssue({
        code: 'custom',
        message: `entry ${index + 1} is not a postgres:// URL (expected URLs separated by commas)`,
      });
    }
  });
}

/** How REDIS_URL may reach Redis: TCP, TLS, or a Unix socket, as ioredis reads each (docs/configuration.md). */
const REDIS_SCHEMES = /^(redis|rediss|unix):\/\//;

// Names neither the value nor its scheme: the URL may carry a password.
function checkRedisUrl(text: string, ctx: z.RefinementCtx): void {
  if (REDIS_SCHEMES.test(text) && URL.canParse(text)) return;
  ctx.addIssue({
    code: 'custom',
    message:
      'expected redis://[USER:PASSWORD@]HOST:PORT[/DB], rediss://… (TLS) or unix:///PATH/TO/SOCKET (its password ' +
      'in REDIS_PASSWORD)',
  });
}

function checkClusterNodes(text: string, ctx: z.RefinementCtx): void {
  try {
    parseClusterNodes(text);
  } catch (error) {
    ctx.addIssue({ code: 'custom', message: (error as Error).message });
  }
}

function checkProxyList(text: string, ctx: z.RefinementCtx): void {
  try {
    if (parseProxyList(text).length === 0)
      ctx.addIssue({ code: 'custom', message: 'expected addresses or CIDRs separated by commas' });
  } catch (error) {
    ctx.addIssue({ code: 'custom', message: (error as Error).message });
  }
}

/** Parses `30s`, `15m`, `24h`, `7d`, `500ms` to milliseconds. */
function parseDuration(text: string): number {
  const match = /^(\d+)(ms|s|m|h|d)$/.exec(text.trim());
  if (!match) throw new Error(`invalid duration "${text}"`);
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[match[2] as 'ms'];
  return Number(match[1]) * unit;
}

/** `scope=rate,scope=rate` (THROTTLE_RATES): a map of scope to rate text. */
export const scopeRates = z.string().trim().superRefine(checkScopeRates).transform(parseScopeRates);

/** `scope=rate,scope=rate` (THROTTLE_SHADOW_RATES), any scope: a map of scope to shadow rate text. */
export const shadowRates = z.string().trim().superRefine(checkShadowRates).transform(parseScopeRates);

/** `scope=N,scope=N` (THROTTLE_CONCURRENCY): a map of scope to the requests one client may have in progress in it. */
export const scopeLimits = z.string().trim().superRefine(checkScopeLimits).transform(parseScopeLimits);

/** `scope,scope` (THROTTLE_SHADOW_SCOPES): the names of the scopes that run wholly in shadow. */
export const scopeNames = z.string().trim().superRefine(checkScopeNames).transform(parseList);

/** `postgres://…,postgres://…` (DATABASE_REPLICA_URLS): the URLs in order. */
export const urlList = z.string().trim().superRefine(checkUrlList).transform(parseUrlList);

/** `redis://…`, `rediss://…` or `unix:///…` (REDIS_URL), as written. */
export const redisUrl = z.string().trim().superRefine(checkRedisUrl);

/** `host:port,host:port` or `redis-cluster://…` (REDIS_CLUSTER_NODES). */
export const clusterNodes = z.string().trim().superRefine(checkClusterNodes).transform(parseClusterNodes);

/** Addresses and CIDRs separated by commas (TRUSTED_PROXIES). */
export const proxyList = z.string().trim().superRefine(checkProxyList).transform(parseProxyList);

/** Credentials /metrics requires (METRICS_AUTH): a bearer token, or a basic-auth user and password. */
export type MetricsAuth = { scheme: 'bearer'; token: string } | { scheme: 'basic'; user: string; password: string };

/** Reads `bearer:<token>` or `basic:<user>:<password>` (the password may contain colons). */
function parseMetricsAuth(text: string): MetricsAuth {
  const [scheme, ...rest] = text.split(':');
  if (scheme === 'bearer' && rest.join(':').length >= 16) return { scheme, token: rest.join(':') };
  if (scheme === 'basic' && rest.length >= 2 && rest[0] && rest.slice(1).join(':')) {
    return { scheme, user: rest[0], password: rest.slice(1).join(':') };
  }
  throw new Error('expected bearer:<token of 16 or more characters> or basic:<user>:<password>');
}

function checkMetricsAuth(text: string, ctx: z.RefinementCtx): void {
  try {
    parseMetricsAuth(text);
  } catch (error) {
    ctx.addIssue({ code: 'custom', message: (error as Error).message });
  }
}

/** `bearer:<token>` or `basic:<user>:<password>` (METRICS_AUTH). */
export const metricsAuth = z.string().trim().superRefine(checkMetricsAuth).transform(parseMetricsAuth);

// Words that template files put where a secret belongs ("replace-me", "change-me", "your secret here").
const PLACEHOLDER = /replace[-_ ]?me|change[-_ ]?me|placeholder|your[-_ ]?(own[-_ ]?)?secret|secret[-_ ]?here|^x+$/i;

/**
 * A secret of at least 16 characters that is not a template's placeholder: a deployment copied
 * without setting it stops at start instead of signing with a value anyone can read
 * (docs/security.md "Least privilege").
 */
export const secret = z
  .string()
  .min(16, 'must be at least 16 characters')
  .refine((text) => !PLACEHOLDER.test(text), 'is a placeholder: set a random value, e.g. openssl rand -base64 32');
