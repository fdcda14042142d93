import { setTimeout as sleep } from 'node:timers/promises';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from '../../helpers/app.js';
import { request } from '../../helpers/http.js';
import { startTcpRelay, type TcpRelay } from '../../helpers/tcp-relay.js';

// docs/pagination.md "Read cache": a cached read asks Redis once — the throttle's script call and the read
// of the published head leave together, before either is answered. Redis's replies are held in a relay while a cached
// page 1 is asked for: both commands must reach the relay while no reply has come back. A read that waited for the
// throttle's answer before asking for the head would send the head's MGET only after the replies are let go.

/** The names of the commands in a chunk of RESP a client sent (each command an array whose first bulk is its name). */
function commandNames(chunk: Buffer): string[] {
  return [...chunk.toString('latin1').matchAll(/\*\d+\r\n\$\d+\r\n([A-Za-z]+)\r\n/g)].map((match) =>
    match[1]!.toUpperCase(),
  );
}

const test = suite('one Redis round trip per cached read');
let relay: TcpRelay;
let app: TestApp;
const sent: string[] = [];

test.before(async () => {
  relay = await startTcpRelay(process.env.TEST_REDIS_URL!, {
    onClientChunk: (chunk) => sent.push(...commandNames(chunk)),
  });
  // Held replies must not count as a slow Redis: the throttle and the head read wait up to THROTTLE_TIMEOUT_MS.
  app = await startTestApp(
    { REDIS_URL: relay.through(process.env.TEST_REDIS_URL!), THROTTLE_TIMEOUT_MS: '30000' },
    'round-trip',
  );
});

test.after(async () => {
  await app?.close();
  await relay?.close();
});

test('a cached page 1: the throttle call and the head read are both sent before any reply', async () => {
  // Until the process has put the head back after connecting (a database read, then an EVAL), it reads no head:
  // fill the cache until a read has asked for the head, so the held replies cannot hold that EVAL instead.
  for (let i = 0; i < 2 || (i < 200 && !sent.includes('MGET')); i++) {
    assert.is((await request(app.base, 'GET', '/api/tasks/')).status, 200, 'filling the cache');
    if (!sent.includes('MGET')) await sleep(25);
  }
  assert.ok(sent.includes('MGET'), `the head is read once the process trusts it, sent: ${sent.join(' ')}`);
  relay.holdReplies();
  sent.length = 0;
  const answer = request(app.base, 'GET', '/api/tasks/');
  const both = () => sent.some((name) => name.startsWith('EVAL')) && sent.includes('MGET');
  for (let i = 0; i < 100 && !both(); i++) await sleep(50);
  const beforeAnyReply = [...sent];
  relay.releaseReplies();
  const response = await answer;
  assert.is(response.status, 200);
  assert.ok(
    beforeAnyReply.some((name) => name.startsWith('EVAL')),
    `the throttle's script call, sent: ${beforeAnyReply.join(' ')}`,
  );
  assert.ok(beforeAnyReply.includes('MGET'), `the head read, sent before any reply: ${beforeAnyReply.join(' ')}`);
});

test.run();
