import { STATUS_CODES, type Server } from 'node:http';
import type { Duplex } from 'node:stream';

/**
 * Requests Node's HTTP parser refuses before Koa sees them (an unknown method, bytes that are not
 * HTTP, headers over the size limit) still get a JSON error, as every other error does. A
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
    const status = error.code === 'HPE_HEADER_OVERFLOW' ? 431 : error.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400;
    const body = JSON.stringify({ detail: status === 431 ? 'Request header fields too large.' : status === 408 ? 'Request timeout.' : 'Bad request.' });
    socket.end(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  });
}
