import type { Worker } from 'node:cluster';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { Socket } from 'node:net';
import { DESCRIPTOR, DESCRIPTORS_WANTED } from '../server/acceptors.js';

/**
 * The primary's side of a web worker's extra descriptors (src/server/acceptors.ts; docs/throttling.md "Past
 * capacity: newcomers take turns"). node:cluster creates PORT's listening socket in the primary and never polls it
 * there; each worker's listen gets one descriptor of it. When a worker asks for more, the primary wraps its own
 * descriptor in a socket that never reads (so the primary still accepts nothing) and sends it as many times as
 * asked, each arriving in the worker as a descriptor of its own, kept open here. One socket, one queue: a worker
 * that exits takes none of the connections waiting in it with it.
 */
export function lendListenDescriptors(worker: Worker, port: number): void {
  worker.on('message', (message: { type?: string; count?: number }) => {
    if (message?.type !== DESCRIPTORS_WANTED) return;
    const fd = listeningDescriptor(port);
    if (fd === undefined) return; // the worker accepts on its one descriptor
    // Never closed nor collected: closing it would close the descriptor node:cluster holds.
    const wrapper = new Socket({ fd, readable: false, writable: false });
    lent.push(wrapper);
    const count = Math.max(0, Math.min(64, Number(message.count) || 0));
    for (let i = 0; i < count && worker.isConnected(); i += 1)
      worker.send({ type: DESCRIPTOR }, wrapper, { keepOpen: true }, () => {});
  });
}

const lent: Socket[] = [];

/**
 * This process's descriptor of a TCP socket listening on `port`, from /proc (Linux): the inode of the listening
 * socket in /proc/net/tcp{,6}, then the descriptor in /proc/self/fd that links to it. Undefined when there is none
 * or /proc cannot be read.
 */
function listeningDescriptor(port: number): number | undefined {
  const inodes = new Set<string>();
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text = '';
    try {
      text = readFileSync(table, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      // local_address is ADDRESS:PORT in hex; st 0A is LISTEN; the inode is the tenth field.
      if (fields[3] === '0A' && parseInt(fields[1]?.split(':')[1] ?? '', 16) === port) inodes.add(fields[9]!);
    }
  }
  if (inodes.size === 0) return undefined;
  try {
    for (const entry of readdirSync('/proc/self/fd')) {
      let link = '';
      try {
        link = readlinkSync(`/proc/self/fd/${entry}`);
      } catch {
        continue;
      }
      const inode = /^socket:\[(\d+)\]$/.exec(link)?.[1];
      if (inode !== undefined && inodes.has(inode)) return Number(entry);
    }
  } catch {
    return undefined;
  }
  return undefined;
}
