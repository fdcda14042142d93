import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

/**
 * The backlog of the socket listening on `port`, as the kernel applies it (ss's Send-Q for a listening socket:
 * what listen() asked, up to net.core.somaxconn), and the backlog the service asks for, under that cap.
 */
export function listenBacklog(port: number): { backlog: number; expected: number; listing: string } {
  const cap = Number(readFileSync('/proc/sys/net/core/somaxconn', 'utf8'));
  const listing = execFileSync('ss', ['-Hltn', `sport = :${port}`], { encoding: 'utf8' });
  return { backlog: Number(listing.trim().split(/\s+/)[2]), expected: Math.min(4_096, cap), listing };
}
