// The read-path benchmark's baseline: a bare node:http cluster of `workers` processes answering
// every request with the same bytes from memory (the service's page 1, handed over as a file).
//   node ops/bench/read-path/bare-server.mjs <port> <workers> <body file> <content type>
import cluster from 'node:cluster';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';

const [port, workers, bodyFile, contentType] = process.argv.slice(2);

if (cluster.isPrimary) {
  let listening = 0;
  for (let i = 0; i < Number(workers); i += 1) {
    cluster.fork().on('listening', () => {
      if ((listening += 1) === Number(workers)) process.stdout.write('listening\n');
    });
  }
  process.on('SIGTERM', () => {
    for (const worker of Object.values(cluster.workers ?? {})) worker?.kill('SIGTERM');
    process.exit(0);
  });
} else {
  const body = readFileSync(bodyFile);
  const headers = { 'Content-Type': contentType, 'Content-Length': String(body.length) };
  createServer((request, response) => {
    response.writeHead(200, headers);
    response.end(body);
  }).listen(Number(port), '127.0.0.1');
}
