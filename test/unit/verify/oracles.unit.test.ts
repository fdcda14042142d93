import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { parseArgs, parseLimit } from '../../../clients/verify/args.js';
import { analyseWalk, breaksGuarantee, type Element } from '../../../clients/verify/checks/cursor-analysis.js';
import {
  analyseLimits,
  dishonestRetryAfter,
  readPolicy,
  trailingCounts,
  windowFromRetryAfter,
} from '../../../clients/verify/checks/limits-analysis.js';

const S = 1e9;
/** A request decided in a 10 ms round trip starting at `t` seconds. */
const at = (op: number, t: number) => ({ op, invoke: t * S, complete: t * S + 0.01 * S });

const limits = suite('verify: the limits oracle');

limits('a sliding log that admits the limit per window holds, and its refusals are justified', () => {
  const admitted = [...Array(5)]
    .map((_, i) => at(i, i * 0.1))
    .concat([...Array(5)].map((_, i) => at(10 + i, 10 + i * 0.1)));
  const refused = [at(20, 2), at(21, 5), at(22, 11)];
  const findings = analyseLimits({ admitted, refused, unknown: [], limit: 5, windowNs: 10 * S, start: 0 });
  assert.is(findings.maxInWindow, 5);
  assert.is(findings.overLimit, null);
  assert.equal(findings.unjustified, []);
  assert.is(findings.judged, 1, 'only the refusal whose whole window lies inside the run is judged');
});

limits('a fixed window that admits a burst at each edge is over the limit', () => {
  // Window edges at 0 and 10 s; the run begins at 8 s: 5 admitted at 8 s, 5 more at 10 s.
  const admitted = [...Array(5)]
    .map((_, i) => at(i, 8 + i * 0.05))
    .concat([...Array(5)].map((_, i) => at(5 + i, 10 + i * 0.05)));
  const findings = analyseLimits({ admitted, refused: [], unknown: [], limit: 5, windowNs: 10 * S, start: 8 * S });
  assert.is(findings.maxInWindow, 10);
  assert.equal(findings.overLimit, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
});

limits('admissions whose round trips straddle the window are not counted as certainly inside it', () => {
  const wide = (op: number, from: number, to: number) => ({ op, invoke: from * S, complete: to * S });
  const findings = analyseLimits({
    admitted: [wide(0, 0, 1), wide(1, 0.5, 10.5)],
    refused: [],
    unknown: [],
    limit: 1,
    windowNs: 10 * S,
    start: 0,
  });
  assert.is(findings.maxInWindow, 1);
});

limits(
  'a refusal while the window held fewer than the limit is under-admission; an unanswered request may have been admitted',
  () => {
    const admitted = [at(0, 0), at(1, 0.1)];
    const refused = [at(9, 12)];
    const under = analyseLimits({ admitted: [at(2, 11)], refused, unknown: [], limit: 2, windowNs: 10 * S, start: 0 });
    assert.equal(under.unjustified, [{ op: 9, possible: 1 }]);
    const maybe = analyseLimits({
      admitted: [at(2, 11)],
      refused,
      unknown: [at(3, 11.5)],
      limit: 2,
      windowNs: 10 * S,
      start: 0,
    });
    assert.equal(maybe.unjustified, []);
    assert.ok(admitted.length === 2);
  },
);

limits('Retry-After is honest when demand at the stated second was admitted', () => {
  const refused = [{ ...at(5, 1), retryAfterS: 9 }];
  const honest = dishonestRetryAfter(refused, [at(1, 0), at(6, 10.02)], 0.3 * S, 20 * S);
  assert.equal(honest, []);
  const late = dishonestRetryAfter(refused, [at(1, 0), at(6, 14)], 0.3 * S, 20 * S);
  assert.is(late.length, 1);
  assert.is(late[0]!.statedS, 9);
  const unjudged = dishonestRetryAfter(refused, [at(1, 0)], 0.3 * S, 5 * S);
  assert.equal(unjudged, [], 'no request was sent at the stated second');
});

limits('the trailing-window line and the policy header', () => {
  assert.equal(
    trailingCounts([at(0, 0), at(1, 1), at(2, 5), at(3, 10.5)], 10 * S).map(([, n]) => n),
    [1, 2, 3, 3],
  );
  assert.equal(readPolicy('"user";q=100;w=60'), { limit: 100, windowMs: 60_000 });
  assert.is(readPolicy(undefined), undefined);
  assert.is(readPolicy('garbage'), undefined);
});

/** A refusal sent at `t` s and answered 10 ms later, stating DRF's ceil(window − (decided − first)) seconds. */
const refusal = (op: number, t: number, windowS: number, firstS = 0.005) => ({
  ...at(op, t),
  retryAfterS: Math.ceil(windowS - (t + 0.005 - firstS)),
});

limits('the window of a sliding log that states none: Retry-After read for a second ticks once, to the second', () => {
  const first = at(0, 0);
  const tenths = Array.from({ length: 12 }, (_, i) => refusal(i + 1, 1.04 + i * 0.1, 60));
  assert.is(windowFromRetryAfter(first, tenths, undefined), 60_000);
  assert.is(
    windowFromRetryAfter(
      first,
      tenths.map((r) => ({ ...r, retryAfterS: r.retryAfterS + 1 })),
    ),
    61_000,
  );
  const oneSecond = [refusal(1, 0.3, 1), refusal(2, 0.6, 1)];
  assert.is(windowFromRetryAfter(first, oneSecond, at(3, 1)), 1_000, 'an admission once the slot freed bounds it');
});

limits('a window Retry-After does not tell to the second, or that it does not count down to, is not guessed', () => {
  const first = at(0, 0);
  // Decided at 0.99 s: 60 − 0.985 rounds up to 60, so the first admission leaves in (59.98, 61.03] s.
  assert.is(windowFromRetryAfter(first, [{ ...at(1, 0.98), complete: 1.03 * S, retryAfterS: 60 }]), undefined);
  const fixed = Array.from({ length: 12 }, (_, i) => ({ ...at(i + 1, 1 + i * 0.1), retryAfterS: 60 }));
  assert.is(windowFromRetryAfter(first, fixed), undefined, 'a Retry-After that stays at 60 for a second');
});

limits.run();

const walks = suite('verify: the walk oracle');

const element = (id: number, ackS: number, deleteS?: number): Element => ({
  id,
  createInvoke: ackS * S - 1,
  createAck: ackS * S,
  ...(deleteS === undefined ? {} : { deleteInvoke: deleteS * S, deleteAck: deleteS * S + 1 }),
});
const elements = new Map([1, 2, 3, 4].map((id) => [id, element(id, id)]));
const page = (t: number, ids: number[]) => ({ invoke: t * S, complete: t * S + 1, ids });

walks('a cursor walk that lists each existing task once, in order, holds; other clients’ tasks are ignored', () => {
  const findings = analyseWalk('cursor ascending', [page(5, [1, 2, 99]), page(6, [3, 4])], elements);
  assert.is(findings.expected, 4);
  assert.is(breaksGuarantee(findings), false);
});

walks('a skipped, repeated or disordered task breaks a cursor walk', () => {
  assert.equal(analyseWalk('cursor ascending', [page(5, [1, 2]), page(6, [4])], elements).missing, [3]);
  assert.equal(analyseWalk('cursor ascending', [page(5, [1, 2]), page(6, [2, 3, 4])], elements).duplicates, [2]);
  assert.equal(analyseWalk('cursor descending', [page(5, [4, 3]), page(6, [1, 2])], elements).outOfOrder, [2]);
});

walks('ascending walks must list tasks acknowledged before their last page; deleted tasks need not be listed', () => {
  const live = new Map(elements);
  live.set(5, element(5, 5.5));
  live.set(6, element(6, 0.5, 5.2));
  const findings = analyseWalk('cursor ascending', [page(5, [1, 2]), page(6, [3, 4])], live);
  assert.equal(findings.lateMissed, [5]);
  assert.equal(findings.missing, [], 'task 6 was deleted during the walk');
  assert.equal(analyseWalk('cursor ascending', [page(5.1, [1, 2]), page(6, [3, 4, 6])], live).resurrected, []);
});

walks('page-number walks report skips without breaking the guarantee', () => {
  const findings = analyseWalk('page number', [page(5, [1, 2]), page(6, [4])], elements);
  assert.equal(findings.missing, [3]);
  assert.is(breaksGuarantee(findings), false);
});

walks.run();

const args = suite('verify: the command line');

args('the documented interface parses; mistakes are one line', () => {
  const options = parseArgs([
    'http://h:1',
    '--user',
    'a:b:c',
    '--user',
    'd:e',
    '--checks',
    'feed,limits',
    '--report',
    'r',
  ]);
  assert.is(options.base.href, 'http://h:1/');
  assert.equal(options.users, [
    { username: 'a', password: 'b:c' },
    { username: 'd', password: 'e' },
  ]);
  assert.equal(options.checks, ['limits', 'feed']);
  assert.equal(parseLimit('10/2s'), { limit: 10, windowMs: 2000 });
  assert.equal(parseLimit('20/min'), { limit: 20, windowMs: 60_000 });
  assert.throws(() => parseArgs(['http://h:1']), /--user/);
  assert.throws(() => parseArgs(['ftp://h', '--user', 'a:b']), /http/);
  assert.throws(() => parseArgs(['http://h', '--user', 'a:b', '--checks', 'speed']), /unknown check "speed"/);
});

args.run();
