import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

/**
 * The backlog of each socket listening on `port` (one per web worker with SO_REUSEPORT), as the kernel applies
 * it (ss's Send-Q for a listening socket: what listen() asked, up to net.core.somaxconn), the backlog the service
 * asks for, under that cap, and ss's lines with the owning processes.
 */
export function listenBacklog(port: number): { backlogs: number[]; expected: number; listing: string } {
  const cap = Number(readFileSync('/proc/sys/net/core/somaxconn', 'utf8'));
  const listing = execFileSync('ss', ['-Hltnp', `sport = :${port}`], { encoding: 'utf8' });
  const backlogs = listing
    .trim()
    .split('\n')
    .map((line) => Number(line.trim().split(/\s+/)[2]));
  return { backlogs, expected: Math.min(4_096, cap), listing };
}
