/** Whether a process (or, with a negative number, a process group) exists: signal 0 probes it. */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
