/**
 * `node --import tsx ops/verify-zoo/fastify-redis.ts <port> <redis URL>`: @fastify/rate-limit with its Redis
 * store, 10 requests per 5 s per address, one process. Prints `listening <port>` when ready.
 */
import rateLimit from '@fastify/rate-limit';
import Fastify from 'fastify';
import { Redis } from 'ioredis';

const [portText = '0', redisUrl] = process.argv.slice(2);
if (redisUrl === undefined) throw new Error('usage: fastify-redis.ts <port> <redis URL>');
const app = Fastify();
await app.register(rateLimit, { max: 10, timeWindow: 5_000, redis: new Redis(redisUrl) });
app.get('/api/tasks/', async () => ({ results: [] }));
await app.listen({ port: Number(portText), host: '127.0.0.1' });
console.log(`listening ${portText}`);
