/**
 * Summarises `.cpuprofile` files (node --cpu-prof): the share of busy CPU time by owner (Paceline, Koa, the router,
 * pino, node's internals, other packages, GC) and the top functions by self time.
 *
 *   node --import tsx ops/bench/read-path/profile-summary.ts <file.cpuprofile>... [--top 15]
 */
import { readFileSync } from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const IDLE = new Set(['(idle)', '(program)', '(root)']);

function ownerOf({ functionName, url }: ProfileNode['callFrame']): string {
  if (functionName === '(garbage collector)') return 'gc';
  if (url.includes('/node_modules/@koa/router/')) return 'router';
  if (/\/node_modules\/(koa|koa-compose)\//.test(url)) return 'koa';
  if (/\/node_modules\/(pino|sonic-boom|thread-stream|fast-redact|quick-format-unescaped)\//.test(url)) return 'pino';
  if (url.includes('/node_modules/')) return url.replace(/.*\/node_modules\/((@[^/]+\/)?[^/]+).*/, '$1');
  if (/\/(src|db)\//.test(url)) return 'paceline';
  return 'node';
}

const args = process.argv.slice(2);
const topAt = args.indexOf('--top');
const top = topAt >= 0 ? Number(args[topAt + 1]) : 15;
const files = args.filter((arg, index) => !arg.startsWith('--') && index !== topAt + 1);
const selfUs = new Map<string, { us: number; owner: string }>();
const byOwner = new Map<string, number>();
let busy = 0;
for (const file of files) {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
  profile.samples.forEach((id, index) => {
    const frame = nodes.get(id)!.callFrame;
    if (IDLE.has(frame.functionName)) return;
    const us = profile.timeDeltas[index + 1] ?? 0;
    const owner = ownerOf(frame);
    const name = `${frame.functionName || '(anonymous)'} ${frame.url.replace(/.*\/(node_modules|src)\//, '$1/')}:${frame.lineNumber + 1}`;
    const entry = selfUs.get(name) ?? { us: 0, owner };
    entry.us += us;
    selfUs.set(name, entry);
    byOwner.set(owner, (byOwner.get(owner) ?? 0) + us);
    busy += us;
  });
}
const pct = (us: number) => `${((100 * us) / busy).toFixed(1)} %`;
console.log(`busy ${(busy / 1e6).toFixed(2)} s (idle and (program) left out)\n\n| owner | self time |\n|---|---:|`);
for (const [owner, us] of [...byOwner].sort((a, b) => b[1] - a[1]).slice(0, 10))
  console.log(`| ${owner} | ${pct(us)} |`);
console.log(`\n| function | owner | self time |\n|---|---|---:|`);
for (const [name, { us, owner }] of [...selfUs].sort((a, b) => b[1].us - a[1].us).slice(0, top))
  console.log(`| \`${name}\` | ${owner} | ${pct(us)} |`);
