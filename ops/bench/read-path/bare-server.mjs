// The read-path benchmark's baselines: a bare node:http cluster of `workers` processes answering
// every request with the same bytes from memory (the service's page 1, handed over as a file), or
// (`koa`) a bare Koa app of one middleware answering the same bytes on the same cluster.
//   node ops/bench/read-path/bare-server.mjs <port> <workers> <body file> <content type> [node|koa]
import cluster from 'node:cluster';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import Koa from 'koa';

const [port, workers, bodyFile, contentType, framework = 'node'] = process.argv.slice(2);

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
} else if (framework === 'koa') {
  const body = readFileSync(bodyFile);
  const app = new Koa();
  app.use((ctx) => {
    ctx.type = contentType;
    ctx.body = body;
  });
  app.listen(Number(port), '127.0.0.1');
} else {
  const body = readFileSync(bodyFile);
  const headers = { 'Content-Type': contentType, 'Content-Length': String(body.length) };
  createServer((request, response) => {
    response.writeHead(200, headers);
    response.end(body);
  }).listen(Number(port), '127.0.0.1');
}
