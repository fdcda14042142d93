import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import pg from 'pg';
import { Redis } from 'ioredis';

const check = suite('runner sample');
check('reaches the throwaway PostgreSQL and Redis', async () => {
  const client = new pg.Client({ connectionString: process.env.TEST_DATABASE_URL });
  await client.connect();
  const { rows } = await client.query('SELECT current_database() AS db');
  await client.end();
  assert.is(rows[0].db, 'postgres');
  const redis = new Redis(process.env.TEST_REDIS_URL!);
  assert.is(await redis.ping(), 'PONG');
  redis.disconnect();
  assert.is(process.env.NODE_ENV, 'test');
});
check.run();
