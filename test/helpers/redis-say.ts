import { connect } from 'node:net';

/**
 * Sends raw protocol lines (inline commands) to Redis on 127.0.0.1:`port`, bypassing any client
 * library, and resolves with the first `replies` reply lines. Rejects if no answer comes in 10 s.
 */
export function redisSay(port: number, text: string, replies: number): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port }, () => socket.write(text));
    let received = '';
    socket.setTimeout(10_000, () => reject(new Error('Redis did not answer')));
    socket.on('error', reject);
    socket.on('data', (data) => {
      received += data.toString('utf8');
      const lines = received.split('\r\n');
      if (lines.length > replies) {
        socket.destroy();
        resolve(lines.slice(0, replies));
      }
    });
  });
}
