/** More than a request head may hold: hand it over as it is (the worker answers 431). */
const HEAD_LIMIT = 64 * 1024;

/**
 * A connection's first request as it arrives, read once, each byte scanned once however it is cut into chunks:
 * `head` (not all of its head yet), `body` (its head, not all the body its Content-Length or chunked encoding
 * promises), or `whole` — also past what a request may hold (a head over 64 KB, a body over BODY_LIMIT_BYTES, by
 * its Content-Length or as it arrives: the worker answers 431 or 413 and closes), and with `Expect: 100-continue`
 * at its head (its worker tells it to go on). Chunked trailers are not read:
 * such a request waits for its timeout.
 */
export class FirstRequest {
  state: 'head' | 'body' | 'whole' = 'head';
  /** It waits to be told to go on before it sends its body: handed over with its head, for its worker to say so. */
  expectsContinue = false;
  readonly #chunks: Buffer[] = [];
  #length = 0;
  /** Where the body starts, once the head is whole. */
  #bodyAt = -1;
  #contentLength = 0;
  #chunked = false;
  /** The last bytes already scanned, for a marker cut between two chunks. */
  #tail: Buffer = Buffer.alloc(0);

  constructor(private readonly bodyLimit: number) {}

  add(chunk: Buffer): 'head' | 'body' | 'whole' {
    this.#chunks.push(chunk);
    const scannedBefore = this.#length;
    this.#length += chunk.length;
    if (this.state === 'head') {
      const scanned = Buffer.concat([this.#tail, chunk]);
      const at = scanned.indexOf('\r\n\r\n');
      const from = scannedBefore - this.#tail.length; // where `scanned` starts in the request
      this.#tail = scanned.subarray(-3);
      if (at === -1) return (this.state = this.#length > HEAD_LIMIT ? 'whole' : 'head');
      this.#bodyAt = from + at + 4;
      this.#readHead();
      this.#tail = Buffer.alloc(0);
      return (this.state = this.#bodyArrived(this.bytes().subarray(this.#bodyAt)));
    }
    return (this.state = this.#bodyArrived(chunk));
  }

  /** Everything read, as one buffer. */
  bytes(): Buffer {
    const all = this.#chunks.length === 1 ? this.#chunks[0]! : Buffer.concat(this.#chunks);
    this.#chunks.splice(0, this.#chunks.length, all);
    return all;
  }

  #readHead(): void {
    const head = this.bytes().subarray(0, this.#bodyAt).toString('latin1').toLowerCase();
    this.#chunked = /\r\ntransfer-encoding:[^\r]*chunked/.test(head);
    this.#contentLength = Number(/\r\ncontent-length:\s*(\d+)/.exec(head)?.[1] ?? 0);
    this.expectsContinue = /\r\nexpect:\s*100-continue/.test(head);
  }

  /** Whether the body has arrived, given the bytes of it just read (the first ones after the head, or a chunk). */
  #bodyArrived(fresh: Buffer): 'body' | 'whole' {
    const body = this.#length - this.#bodyAt;
    // A client that waits for `100 Continue` sends nothing more until it gets it: its worker answers it.
    if (body > this.bodyLimit || this.#contentLength > this.bodyLimit || this.expectsContinue) return 'whole';
    if (!this.#chunked) return body >= this.#contentLength ? 'whole' : 'body';
    const scanned = Buffer.concat([this.#tail, fresh]);
    this.#tail = scanned.subarray(-6);
    const ended =
      scanned.includes('\r\n0\r\n\r\n') || (body === fresh.length && fresh.subarray(0, 5).toString() === '0\r\n\r\n');
    return ended ? 'whole' : 'body';
  }
}
