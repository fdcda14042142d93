/**
 * A progress bar on stderr for one phase of the seeding: redrawn in place at most every 100 ms
 * on a terminal; elsewhere (a log, a pipe) one line per tenth done. Returns the phase's seconds.
 */
export function progressBar(label: string): { update(done: number, total: number): void; finish(): number } {
  const began = Date.now();
  const stream = process.stderr;
  let drawnAt = 0;
  let tenth = -1;
  const line = (done: number, total: number) => {
    const share = total === 0 ? 1 : done / total;
    const bar = '#'.repeat(Math.round(share * 30)).padEnd(30, '.');
    const seconds = (Date.now() - began) / 1000;
    return `${label.padEnd(8)} [${bar}] ${String(Math.floor(share * 100)).padStart(3)}% ${done}/${total} in ${seconds.toFixed(1)} s`;
  };
  let last = { done: 0, total: 0 };
  return {
    update(done, total) {
      last = { done, total };
      const now = Date.now();
      if (stream.isTTY) {
        if (now - drawnAt < 100 && done < total) return;
        drawnAt = now;
        stream.write(`\r${line(done, total)}`);
        return;
      }
      const reached = total === 0 ? 10 : Math.floor((done / total) * 10);
      if (reached === tenth) return;
      tenth = reached;
      stream.write(`${line(done, total)}\n`);
    },
    finish() {
      if (stream.isTTY) stream.write(`\r${line(last.total, last.total)}\n`);
      return (Date.now() - began) / 1000;
    },
  };
}
