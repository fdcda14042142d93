import { Worker } from 'node:worker_threads';

/**
 * `size` kept connections, each asking page 1 (cached: answered within the turn that reads it) again as soon as it
 * has its answer, from a thread of their own (so that reading the crowd's answers never delays the test's own);
 * `answers()` counts every answer so far.
 */
export function keptCrowd(port: number, size: number): { answers(): number; stop(): Promise<number> } {
  const counter = new Int32Array(new SharedArrayBuffer(4));
  const thread = new Worker(CROWD, { eval: true, workerData: { port, size, counter } });
  return {
    answers: () => Atomics.load(counter, 0),
    stop: () => thread.terminate(),
  };
}

const CROWD = `
const { connect } = require('node:net');
const { workerData } = require('node:worker_threads');
const { port, size, counter } = workerData;
for (let i = 0; i < size; i += 1) {
  const socket = connect({ port, host: '127.0.0.1' });
  let buffered = '';
  const ask = () => socket.write('GET /api/tasks/ HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\n\\r\\n');
  socket.setEncoding('latin1');
  socket.on('connect', ask);
  socket.on('error', () => {});
  socket.on('data', (chunk) => {
    buffered += chunk;
    for (;;) {
      const head = buffered.indexOf('\\r\\n\\r\\n');
      const length = head === -1 ? null : /\\r\\ncontent-length: (\\d+)/i.exec(buffered.slice(0, head));
      if (head === -1 || length === null || buffered.length < head + 4 + Number(length[1])) return;
      buffered = buffered.slice(head + 4 + Number(length[1]));
      Atomics.add(counter, 0, 1);
      ask();
    }
  });
}
`;
