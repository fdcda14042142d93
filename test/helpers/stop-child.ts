import type { ChildProcess } from 'node:child_process';

/**
 * Stops a child this test started: SIGTERM, SIGKILL if it is still there after 10 s, and resolves
 * once `exited` (its `once(child, 'exit')`) has. Safe to call twice or after it exited by itself.
 */
export async function stopChild(child: ChildProcess, exited: Promise<unknown>): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  process.kill(child.pid!, 'SIGTERM');
  const timer = setTimeout(() => process.kill(child.pid!, 'SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}
