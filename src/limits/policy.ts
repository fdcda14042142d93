import { BlockList, isIP } from 'node:net';
import { parseRate, type Rate } from '../throttle/rate.js';
import type { ScopeRule } from '../throttle/scopes.js';
import { DEFAULT_PLAN, type PlanTable } from '../throttle/plans.js';

/**
 * Which limits one client has (docs/throttling.md "Plans and overrides"): an override while it lasts, else its
 * plan's, else the settings'. What a request needs is held in memory, so the hot path asks nothing of
 * PostgreSQL or Redis: the users given a plan and the overrides in force, replaced whenever they change.
 */

/** An override as stored: for one user or one address or prefix, rates by scope, until a time. */
export interface OverrideRecord {
  id: number;
  targetKind: 'user' | 'address';
  userId: number | null;
  address: string | null;
  rates: Readonly<Record<string, string>>;
  until: Date;
  reason: string;
  createdBy: string;
  createdAt: Date;
}

/** An override as a worker applies it: its record, its rates read, and the rules made of them. */
interface Live {
  record: OverrideRecord;
  untilMs: number;
  rates: ReadonlyMap<string, Rate>;
  rules: WeakMap<ScopeRule, ScopeRule>;
  /** The addresses it covers, for an address or prefix. */
  addresses?: BlockList;
}

/** The plans declared in the settings: rates and requests in progress by scope. */
export interface Plans {
  rates: PlanTable<string>;
  concurrency: PlanTable<number>;
}

/** How many clients' address overrides are remembered between replacements (bounded: emptied when full). */
const ADDRESS_MEMORY = 10_000;

export class LimitPolicy {
  readonly #plans: Plans;
  readonly #planRates = new Map<string, ReadonlyMap<string, Rate>>();
  /** Rules a plan made of a settings' rule, by plan. */
  readonly #planRules = new WeakMap<ScopeRule, Map<string, ScopeRule>>();
  #userPlans: ReadonlyMap<number, string> = new Map();
  #byUser: ReadonlyMap<number, Live> = new Map();
  #byAddress: readonly Live[] = [];
  #addressMemory = new Map<string, Live | null>();
  /** Nothing to apply: no plan given to anyone, no override. The hot path's first and usually only check. */
  #empty = true;
  /** Stops whatever keeps this policy current (policy-source.ts). */
  #stop: () => void = () => {};

  constructor(plans: Plans) {
    this.#plans = plans;
    for (const [name, rates] of Object.entries(plans.rates))
      this.#planRates.set(name, new Map(Object.entries(rates).map(([scope, text]) => [scope, parseRate(text)])));
  }

  /** Replaces what this worker knows: the users given a plan other than `default`, and the overrides in force. */
  replace(userPlans: Iterable<readonly [number, string]>, overrides: readonly OverrideRecord[]): void {
    const plans = new Map<number, string>();
    for (const [id, plan] of userPlans) if (plan !== DEFAULT_PLAN) plans.set(id, plan);
    const byUser = new Map<number, Live>();
    const byAddress: Live[] = [];
    // Newest first: where two cover one client, the newer wins.
    for (const record of [...overrides].sort((a, b) => b.id - a.id)) {
      const live = liveOverride(record);
      if (!live) continue;
      if (record.targetKind === 'user' && record.userId !== null) {
        if (!byUser.has(record.userId)) byUser.set(record.userId, live);
      } else if (live.addresses) byAddress.push(live);
    }
    this.#userPlans = plans;
    this.#byUser = byUser;
    this.#byAddress = byAddress;
    this.#addressMemory = new Map();
    this.#empty = plans.size === 0 && byUser.size === 0 && byAddress.length === 0;
  }

  /** `stop` ends whatever keeps this policy current; `close` calls it. */
  keptBy(stop: () => void): void {
    this.#stop = stop;
  }

  /** Stops reading changes: the policy keeps what it last read. */
  close(): void {
    this.#stop();
  }

  /** The name of `userId`'s plan (`default` for a user given none, or whose plan the settings no longer declare). */
  planOf(userId: number | undefined): string {
    const plan = userId === undefined ? undefined : this.#userPlans.get(userId);
    return plan !== undefined && this.#planRates.has(plan) ? plan : DEFAULT_PLAN;
  }

  /**
   * The rule that counts a client in `base`'s scope: its override's rate while one for that scope is in force,
   * else its plan's, else `base` itself. `ident` is how the scope counts the client (`ip:…` for an address
   * override), `userId` its user, if any.
   */
  ruleFor(base: ScopeRule, ident: string, userId: number | undefined, nowMs: number): ScopeRule {
    if (this.#empty) return base;
    const planned = this.#planned(base, userId);
    const live = this.#live(ident, base.keyedBy === 'user' ? userId : undefined, nowMs);
    const rate = live?.rates.get(base.scope);
    if (!live || rate === undefined) return planned;
    let rule = live.rules.get(planned);
    if (!rule) live.rules.set(planned, (rule = { ...planned, rate, override: live.record.id }));
    return rule;
  }

  /** When override `id` ends, if this worker applies it. */
  overrideEnd(id: number): Date | undefined {
    for (const live of [...this.#byUser.values(), ...this.#byAddress])
      if (live.record.id === id) return live.record.until;
    return undefined;
  }

  /**
   * The override in force at `nowMs` for one client, whichever scopes it sets, matched as `ruleFor` matches it:
   * user `userId`'s own when given, else the newest for the address or a prefix holding `ident` (`ip:…`).
   * `cli throttled` names it beside the client.
   */
  overrideFor(ident: string, userId: number | undefined, nowMs: number): OverrideRecord | undefined {
    return this.#live(ident, userId, nowMs)?.record;
  }

  /** The override in force at `nowMs`: user `userId`'s own when given, else the one for the address `ident` names. */
  #live(ident: string, userId: number | undefined, nowMs: number): Live | undefined {
    const live = userId !== undefined ? this.#byUser.get(userId) : this.#forAddress(ident);
    return live && live.untilMs > nowMs ? live : undefined;
  }

  /** The overrides this worker applies at `nowMs`, for the gauge of those in force. */
  inForce(nowMs: number): OverrideRecord[] {
    return [...this.#byUser.values(), ...this.#byAddress].filter((l) => l.untilMs > nowMs).map((l) => l.record);
  }

  #planned(base: ScopeRule, userId: number | undefined): ScopeRule {
    const plan = this.planOf(userId);
    if (plan === DEFAULT_PLAN) return base;
    let rules = this.#planRules.get(base);
    if (!rules) this.#planRules.set(base, (rules = new Map()));
    let rule = rules.get(plan);
    if (!rule) {
      const rate = this.#planRates.get(plan)?.get(base.scope);
      const inProgress = this.#plans.concurrency[plan]?.[base.scope];
      rule = { ...base, plan, ...(rate && { rate }), ...(inProgress !== undefined && { inProgress }) };
      rules.set(plan, rule);
    }
    return rule;
  }

  #forAddress(ident: string): Live | undefined {
    if (this.#byAddress.length === 0 || !ident.startsWith('ip:')) return undefined;
    const known = this.#addressMemory.get(ident);
    if (known !== undefined) return known ?? undefined;
    // `ip:203.0.113.7` or `ip:2001:db8::/64` (an IPv6 client is counted by its prefix: its first address).
    const slash = ident.indexOf('/');
    const address = ident.slice(3, slash === -1 ? undefined : slash);
    const family = isIP(address) === 6 ? 'ipv6' : 'ipv4';
    const live = this.#byAddress.find((l) => l.addresses!.check(address, family));
    if (this.#addressMemory.size >= ADDRESS_MEMORY) this.#addressMemory.clear();
    this.#addressMemory.set(ident, live ?? null);
    return live;
  }
}

/** An override ready to apply, or undefined for one whose rates or address cannot be read (never stored so). */
function liveOverride(record: OverrideRecord): Live | undefined {
  try {
    const rates = new Map(Object.entries(record.rates).map(([scope, text]) => [scope, parseRate(text)]));
    const live: Live = { record, untilMs: record.until.getTime(), rates, rules: new WeakMap() };
    if (record.targetKind === 'address') {
      const addresses = addressList(record.address ?? '');
      if (!addresses) return undefined;
      live.addresses = addresses;
    }
    return live;
  } catch {
    return undefined;
  }
}

/** A BlockList of one address or CIDR prefix (`203.0.113.7`, `203.0.113.0/24`, `2001:db8::/48`), else undefined. */
export function addressList(text: string): BlockList | undefined {
  const [address = '', bits, extra] = text.split('/');
  const family = isIP(address);
  if (family === 0 || extra !== undefined) return undefined;
  const max = family === 4 ? 32 : 128;
  const list = new BlockList();
  const type = family === 4 ? 'ipv4' : 'ipv6';
  if (bits === undefined) list.addAddress(address, type);
  else if (/^\d+$/.test(bits) && Number(bits) <= max) list.addSubnet(address, Number(bits), type);
  else return undefined;
  return list;
}
