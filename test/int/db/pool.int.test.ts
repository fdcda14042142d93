import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { connectDatabase } from '../../../db/connect.js';

// docs/scaling.md "Sizing": a pool keeps its connections through a quiet spell longer than pg's default of 10 s,
// so the next burst does not open them all again (each with its SCRAM exchange) and stall.

const test = suite('the pool keeps its connections through a quiet spell');

test('connections a burst opened are still open after 11 s without a query', async () => {
  const name = `pool-idle-${process.pid}`;
  const db = connectDatabase(process.env.TEST_DATABASE_URL!, 3, name);
  const open = async () => {
    const { rows } = await sql<{ n: string }>`
      select count(*) as n from pg_stat_activity where application_name = ${name}`.execute(db);
    return Number(rows[0]!.n);
  };
  try {
    await Promise.all([1, 2, 3].map(() => sql`select pg_sleep(0.1)`.execute(db)));
    assert.is(await open(), 3);
    await sleep(11_000);
    assert.is(await open(), 3, 'the quiet spell closed connections the next burst would have to open again');
  } finally {
    await db.destroy();
  }
});

test.run();
