import { addressList } from '../limits/policy.js';
import type { Target } from '../limits/overrides.repository.js';
import { isValidUsername } from '../auth/users.repository.js';
import { PLANLESS_SCOPES } from '../throttle/plans.js';
import { parseRate } from '../throttle/rate.js';
import { DEFAULT_KEYED_BY } from '../throttle/scopes.js';

// What the commands on plans and overrides read of their arguments (limits.commands.ts): each reader returns the
// value, or the one line that says what is wrong.

/** `user NAME` or an address or prefix, or what is wrong with it. */
export function readTarget(positional: readonly string[]): Target | string {
  const [first = '', second = ''] = positional;
  if (first === 'user') {
    if (!isValidUsername(second)) return 'limit:override user needs a NAME of 1-150 letters, digits or @.+-_';
    return { kind: 'user', name: second };
  }
  if (!addressList(first)) return `"${first}" is neither "user NAME" nor an address or prefix (203.0.113.0/24)`;
  return { kind: 'address', address: first };
}

/** `scope=rate,scope=rate` for `target`, or what is wrong with it. */
export function readRates(text: string, target: Target): Record<string, string> | string {
  const rates: Record<string, string> = {};
  for (const pair of text.split(',').map((p) => p.trim())) {
    const [scope = '', rate, extra] = pair.split('=').map((p) => p.trim());
    if (!/^[a-z0-9][a-z0-9._-]*$/.test(scope) || rate === undefined || extra !== undefined)
      return `expected SCOPE=RATE pairs separated by commas, got "${pair}"`;
    if (scope === 'login') return `login ${PLANLESS_SCOPES.login}; it has no override`;
    const keyedBy = DEFAULT_KEYED_BY[scope];
    if (target.kind === 'user' && (keyedBy === 'ip' || keyedBy === 'username'))
      return `${scope} counts addresses, not users: give the override to the client's address`;
    if (target.kind === 'address' && keyedBy === 'user')
      return `${scope} counts users, not addresses: give the override to "user NAME"`;
    try {
      parseRate(rate);
    } catch (error) {
      return `${scope}: ${(error as Error).message}`;
    }
    rates[scope] = rate;
  }
  return rates;
}

/** `--until` as an ISO 8601 time with its zone or a duration from `now`, in the future; or what is wrong. */
export function readUntil(text: string | undefined, now: Date): Date | string {
  if (text === undefined) return 'limit:override needs --until TIME: an override always ends';
  const duration = /^(\d+)(s|m|h|d|w)$/.exec(text);
  if (duration) {
    const unit = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 }[duration[2] as 'm'];
    const until = new Date(now.getTime() + Number(duration[1]) * unit);
    return Number(duration[1]) > 0 && Number.isFinite(until.getTime()) ? until : `--until ${text} is not a duration`;
  }
  if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/.test(text))
    return `--until takes an ISO 8601 time with its zone (2026-12-08T00:00:00Z) or a duration (7d, 12h, 30m), got "${text}"`;
  const until = new Date(text);
  if (Number.isNaN(until.getTime())) return `--until ${text} is no such time`;
  if (until.getTime() <= now.getTime()) return `--until ${text} has passed`;
  return until;
}

/** Positional arguments and `--name VALUE` options among `known`, or the first thing wrong. */
export function readArgs(
  args: readonly string[],
  known: readonly string[],
): { positional: string[]; options: Record<string, string | undefined>; error?: string } {
  const positional: string[] = [];
  const options: Record<string, string | undefined> = {};
  for (let i = 0; i < args.length; i += 1) {
    const arg = args[i]!;
    if (!arg.startsWith('--')) {
      positional.push(arg);
      continue;
    }
    const [name = '', inline] = arg.slice(2).split(/=(.*)/s, 2);
    if (!known.includes(name))
      return { positional, options, error: `unknown option ${arg} (takes ${known.map((k) => `--${k}`).join(', ')})` };
    const value = inline ?? args[(i += 1)];
    if (value === undefined) return { positional, options, error: `--${name} needs a value` };
    options[name] = value;
  }
  return { positional, options };
}
