/** What became of a request for a hashing slot: the work's value, or a refusal after the longest wait. */
export type HashTurn<T> = { ok: true; value: T } | { ok: false; retryAfterS: number };

/** What the budget reports as it goes (the login metrics). */
export interface HashBudgetObserver {
  changed(inFlight: number, waiting: number): void;
  finished(seconds: number): void;
  refused(): void;
}

export interface HashBudgetOptions {
  /** Hashes run at once in this process (LOGIN_HASH_CONCURRENCY). */
  concurrency: number;
  /** The longest an attempt waits for a slot before it is refused (LOGIN_HASH_WAIT_MS). */
  waitMs: number;
  observer?: HashBudgetObserver;
  /** Milliseconds, monotonic; tests may pass their own. */
  now?: () => number;
}

export interface HashBudget {
  /** Runs `work` (one password hash) once a slot is free; `client` is the queue it waits in. */
  run<T>(client: string, work: () => Promise<T>): Promise<HashTurn<T>>;
  /** Records how an attempt of `client` ended: failures push its later attempts back. */
  settle(client: string, succeeded: boolean): void;
}

interface Waiter {
  client: string;
  start(): void;
  timer: NodeJS.Timeout;
}

/** Past this many waiting attempts a process refuses at once: memory stays bounded under any flood. */
const MAX_WAITING = 1024;
/** Failed attempts (and a success) count half as much after this long. */
const FAILURE_HALF_LIFE_MS = 60_000;
/** Clients whose failures are remembered; the memory is emptied when full. */
const MAX_CLIENTS = 4096;

/**
 * The CPU budget of password hashing in one process (docs/security.md "Login CPU budget"): at
 * most `concurrency` hashes at once; others wait up to `waitMs`, then are refused. A free slot
 * goes to the waiting client (an address prefix) with the fewest recent failed attempts plus
 * attempts under way, oldest first among equals; a client whose last attempt succeeded goes first.
 * With two slots or more, the last is kept for such clients. So a client that logs in successfully
 * is not stuck behind a flood of made-up names from other addresses. Whether a name exists plays
 * no part: a wrong password and an unknown name both fail.
 */
export function createHashBudget({
  concurrency,
  waitMs,
  observer,
  now = performance.now.bind(performance),
}: HashBudgetOptions): HashBudget {
  const waiting: Waiter[] = [];
  const pending = new Map<string, number>();
  const failures = new Map<string, { score: number; at: number }>();
  const retryAfterS = Math.max(1, Math.ceil(waitMs / 1000));
  const open = concurrency > 1 ? concurrency - 1 : concurrency;
  let inFlight = 0;

  const failureScore = (client: string, at: number): number => {
    const entry = failures.get(client);
    return entry ? entry.score * 0.5 ** ((at - entry.at) / FAILURE_HALF_LIFE_MS) : 0;
  };
  const priority = (waiter: Waiter, at: number) => failureScore(waiter.client, at) + (pending.get(waiter.client) ?? 0);
  const report = () => observer?.changed(inFlight, waiting.length);
  const track = (client: string, delta: number) => {
    const count = (pending.get(client) ?? 0) + delta;
    if (count > 0) pending.set(client, count);
    else pending.delete(client);
  };

  const trusted = (client: string) => (failures.get(client)?.score ?? 0) < 0;
  const dispatch = () => {
    while (inFlight < concurrency && waiting.length > 0) {
      const at = now();
      let best = 0;
      for (let i = 1; i < waiting.length; i++) if (priority(waiting[i]!, at) < priority(waiting[best]!, at)) best = i;
      // The last slot is kept for clients whose last attempt succeeded: a flood never waits them out.
      if (inFlight >= open && !trusted(waiting[best]!.client)) break;
      const [next] = waiting.splice(best, 1);
      clearTimeout(next!.timer);
      next!.start();
    }
    report();
  };

  return {
    run<T>(client: string, work: () => Promise<T>): Promise<HashTurn<T>> {
      return new Promise<HashTurn<T>>((resolve, reject) => {
        const start = () => {
          inFlight += 1;
          const started = now();
          work()
            .then((value) => resolve({ ok: true, value }), reject)
            .finally(() => {
              inFlight -= 1;
              track(client, -1);
              observer?.finished((now() - started) / 1000);
              dispatch();
            });
        };
        if (waiting.length >= MAX_WAITING) return refuse();
        track(client, 1);
        const waiter: Waiter = { client, start, timer: setTimeout(() => giveUp(waiter), waitMs) };
        waiting.push(waiter);
        dispatch();

        function refuse() {
          observer?.refused();
          resolve({ ok: false, retryAfterS });
        }
        function giveUp(w: Waiter) {
          const index = waiting.indexOf(w);
          if (index < 0) return;
          waiting.splice(index, 1);
          track(client, -1);
          report();
          refuse();
        }
      });
    },
    settle(client, succeeded) {
      const at = now();
      if (failures.size >= MAX_CLIENTS && !failures.has(client)) failures.clear();
      // A success (the right password, which no flood of guesses has) puts the client ahead of any
      // client that has only failed; failures push it back, each fading with FAILURE_HALF_LIFE_MS.
      failures.set(client, { score: succeeded ? -1 : Math.max(0, failureScore(client, at)) + 1, at });
    },
  };
}
