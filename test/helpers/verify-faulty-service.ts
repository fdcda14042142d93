/**
 * `node --import tsx test/helpers/verify-faulty-service.ts <fault> <port>`: the model service with one seeded fault
 * (or none: `honest`), on 127.0.0.1:<port>, until killed. Prints `listening <port>` when ready.
 *   fixed-window     a fixed window on the clock (10 per 2 s): twice the limit across a window edge
 *   first-hit-window a fixed window opened by each identity's first hit (10 per 2 s), as many stores keep it
 *   read-then-write  DRF's cache throttle over a cache one round trip away (10 per 2 s): it reads the
 *                    history, checks it and writes it back, so concurrent requests each see a free slot
 *   per-process      a sliding log per process behind 2 cluster workers: the limit times the workers
 *   offset-cursor    a "cursor" that is an OFFSET: skips and repeats under concurrent writes
 *   ttl-cache        two hosts behind a round-robin balancer, each with a 5 s read cache: stale reads
 *   token-scheme     no fault, but it takes only `Authorization: Token …`, as DRF's TokenAuthentication does
 *   drf              not this model but a service shaped like DRF (drf-service.ts): no /api/events/, no
 *                    RateLimit-Policy, anon 5 and user 10 per 2 s, each an exact sliding log
 *   drf-race         the same with DRF's cache throttle one round trip away: concurrent requests each read a
 *                    free slot, and all but one of their writes is lost
 */
import cluster from 'node:cluster';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { serveDrf } from './verify-drf-service.js';
import { Model, serve, slidingLog, type Limiter, type Parts } from './verify-model-service.js';

const [fault = 'honest', portText = '0'] = process.argv.slice(2);
const port = Number(portText);

function fixedWindow(limit: number, windowS: number): Limiter {
  const counts = new Map<string, number>();
  return {
    policy: { limit, windowS },
    check(identity) {
      const now = Date.now();
      const index = Math.floor(now / (windowS * 1000));
      const key = `${identity}:${index}`;
      const used = counts.get(key) ?? 0;
      if (used >= limit)
        return { allowed: false, retryAfterS: Math.max(1, Math.ceil(((index + 1) * windowS * 1000 - now) / 1000)) };
      counts.set(key, used + 1);
      return { allowed: true, retryAfterS: 0 };
    },
  };
}

function firstHitWindow(limit: number, windowS: number): Limiter {
  const windows = new Map<string, { start: number; used: number }>();
  return {
    policy: { limit, windowS },
    check(identity) {
      const now = Date.now();
      let window = windows.get(identity);
      if (window === undefined || now >= window.start + windowS * 1000)
        windows.set(identity, (window = { start: now, used: 0 }));
      if (window.used >= limit)
        return { allowed: false, retryAfterS: Math.max(1, Math.ceil((window.start + windowS * 1000 - now) / 1000)) };
      window.used++;
      return { allowed: true, retryAfterS: 0 };
    },
  };
}

/**
 * DRF's `SimpleRateThrottle.allow_request` over a shared cache: get the history, drop what left the window,
 * refuse when full, else prepend now and set it back. Each cache call is a round trip (1 ms here), and
 * nothing holds the key between the get and the set: the race DRF's documentation warns of.
 */
function readThenWrite(limit: number, windowS: number): Limiter {
  const cache = new Map<string, number[]>();
  return {
    policy: { limit, windowS },
    async check(identity) {
      await sleep(1);
      const history = [...(cache.get(identity) ?? [])];
      const now = Date.now();
      while (history.length > 0 && history.at(-1)! <= now - windowS * 1000) history.pop();
      if (history.length >= limit)
        return { allowed: false, retryAfterS: Math.max(1, Math.ceil((history.at(-1)! + windowS * 1000 - now) / 1000)) };
      history.unshift(now);
      await sleep(1);
      cache.set(identity, history);
      return { allowed: true, retryAfterS: 0 };
    },
  };
}

const offsetCursor: Parts['cursorPage'] = (tasks, cursor, size, descending) => {
  const offset = cursor === '' ? 0 : Number(Buffer.from(cursor, 'base64url').toString());
  const ordered = descending ? [...tasks].reverse() : tasks;
  const results = ordered.slice(offset, offset + size);
  const more = offset + size < ordered.length;
  const token = (at: number) => Buffer.from(String(at)).toString('base64url');
  return {
    results,
    next: more ? token(offset + size) : null,
    previous: offset > 0 ? token(Math.max(0, offset - size)) : null,
  };
};

/** Two servers over one model, and a balancer that sends each new connection to the next one. */
async function twoHostsBehindBalancer(model: Model): Promise<void> {
  const hosts = await Promise.all([serve(model, 0, 5_000), serve(model, 0, 5_000)]);
  const ports = hosts.map((h) => (h.address() as net.AddressInfo).port);
  let turn = 0;
  const balancer = net.createServer((client) => {
    const upstream = net.connect(ports[turn++ % ports.length]!, '127.0.0.1');
    client.pipe(upstream).pipe(client);
    const close = () => (client.destroy(), upstream.destroy());
    client.on('error', close);
    upstream.on('error', close);
  });
  await new Promise<void>((resolve) => balancer.listen(port, '127.0.0.1', resolve));
}

const DRF_RATES = { anon: { limit: 5, windowS: 2 }, user: { limit: 10, windowS: 2 } };

async function main(): Promise<void> {
  const generous = slidingLog(40, 2);
  if (fault === 'per-process' && cluster.isPrimary) {
    for (let i = 0; i < 2; i++) cluster.fork();
    let ready = 0;
    cluster.on('listening', () => ++ready === 2 && console.log(`listening ${port}`));
    return;
  }
  if (fault === 'ttl-cache') await twoHostsBehindBalancer(new Model({ limiter: generous }));
  else if (fault === 'fixed-window') await serve(new Model({ limiter: fixedWindow(10, 2) }), port);
  else if (fault === 'first-hit-window') await serve(new Model({ limiter: firstHitWindow(10, 2) }), port);
  else if (fault === 'read-then-write') await serve(new Model({ limiter: readThenWrite(10, 2) }), port);
  else if (fault === 'token-scheme') await serve(new Model({ limiter: generous, scheme: 'Token' }), port);
  else if (fault === 'per-process') await serve(new Model({ limiter: slidingLog(10, 2) }), port);
  else if (fault === 'offset-cursor') await serve(new Model({ limiter: generous, cursorPage: offsetCursor }), port);
  else if (fault === 'honest') await serve(new Model({ limiter: generous }), port);
  else if (fault === 'drf' || fault === 'drf-race') await serveDrf({ ...DRF_RATES, racy: fault === 'drf-race' }, port);
  else throw new Error(`unknown fault "${fault}"`);
  if (!cluster.isWorker) console.log(`listening ${port}`);
}

await main();
