/** A one-line progress bar on a terminal's stderr (nothing when stderr is not a terminal). */
export class Progress {
  private readonly timer: NodeJS.Timeout | undefined;
  private done = 0;
  private readonly began = Date.now();

  constructor(
    private readonly total: number,
    private readonly requests: () => number,
  ) {
    if (process.stderr.isTTY) this.timer = setInterval(() => this.draw(), 250);
  }

  /** One check finished. */
  step(): void {
    this.done++;
  }

  private draw(): void {
    const width = 30;
    const filled = Math.round((this.done / this.total) * width);
    const seconds = ((Date.now() - this.began) / 1000).toFixed(0);
    const bar = `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}]`;
    process.stderr.write(`\r${bar} ${this.done}/${this.total} checks, ${this.requests()} requests, ${seconds} s `);
  }

  stop(): void {
    if (this.timer === undefined) return;
    clearInterval(this.timer);
    process.stderr.write('\r\x1b[K');
  }
}
