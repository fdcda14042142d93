import { maxHeaderSize, STATUS_CODES, type Server } from 'node:http';
import type { Duplex } from 'node:stream';

/**
 * Requests Node's HTTP parser refuses before Koa sees them (an unknown method, bytes that are not
 * HTTP, a request line or headers over the size limit, headers or a request past their timeout) still
 * get a JSON error, as every other error does, and their connection is closed once it is written. A
 * request without the Host header HTTP/1.1 requires is let through for the app to refuse.
 */
export function answerClientErrors(server: Server): void {
  // Node answers an HTTP/1.1 request without Host with a bare 400; the app answers it in JSON.
  (server as Server & { requireHostHeader: boolean }).requireHostHeader = false;
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Duplex) => {
    if (error.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    const status = statusOf(error as ParserError);
    const body = JSON.stringify({ detail: DETAILS[status] });
    // Destroyed once the answer is out, not just ended: the server's sockets stay open for reading
    // after end(), and Node reports a timed-out connection only once, so a client that ignored the
    // answer and kept sending would hold it for good (docs/security.md "Slow clients").
    socket.end(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json\r\nContent-Length: ` +
        `${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
      () => socket.destroy(),
    );
  });
}

const DETAILS: Record<number, string> = {
  400: 'Bad request.',
  408: 'Request timeout.',
  414: 'The request URI is too long.',
  431: 'Request header fields too large.',
};

type ParserError = NodeJS.ErrnoException & { rawPacket?: Buffer };

function statusOf(error: ParserError): number {
  if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT') return 408;
  if (error.code !== 'HPE_HEADER_OVERFLOW') return 400;
  return requestLineOverflowed(error) ? 414 : 431;
}

/**
 * Whether the head overflowed `maxHeaderSize` within its request line (a URI too long, 414) rather
 * than in its header fields (431). Node hands over the bytes it was parsing; when they are not the
 * start of the request the answer stays 431.
 */
function requestLineOverflowed(error: ParserError): boolean {
  const packet = error.rawPacket;
  if (!packet || !/^[A-Z]+ /.test(packet.subarray(0, 16).toString('latin1'))) return false;
  const lineEnd = packet.indexOf(10);
  return lineEnd === -1 || lineEnd > maxHeaderSize;
}
