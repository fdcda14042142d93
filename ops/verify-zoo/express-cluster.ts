/**
 * `node --import tsx ops/verify-zoo/express-cluster.ts <port>`: express-rate-limit with its default memory
 * store, 10 requests per 5 s per address, behind `node:cluster` with two workers, as its README's quick start
 * runs it on a machine with two cores. Prints `listening <port>` when both workers listen.
 */
import cluster from 'node:cluster';
import express from 'express';
import { rateLimit } from 'express-rate-limit';

const port = Number(process.argv[2] ?? 0);
const WORKERS = 2;

if (cluster.isPrimary) {
  for (let i = 0; i < WORKERS; i++) cluster.fork();
  let ready = 0;
  cluster.on('listening', () => ++ready === WORKERS && console.log(`listening ${port}`));
} else {
  const app = express();
  // draft-8 headers: RateLimit-Policy states the limit and window, so verify needs no --limit.
  app.use(rateLimit({ windowMs: 5_000, limit: 10, standardHeaders: 'draft-8', legacyHeaders: false }));
  app.get('/api/tasks/', (_request, response) => {
    response.json({ results: [] });
  });
  app.listen(port, '127.0.0.1');
}
