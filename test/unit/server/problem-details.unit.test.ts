import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { prefersProblem, problemOf } from '../../../src/server/problem-details.js';

// docs/api.md "Problem details": which Accept asks for problem details, and how a DRF body reads as one.

const Accept = suite('an Accept asks for problem details when it names them at least as high as JSON');

Accept('named, alone or beside JSON at the same weight or above: problem details', () => {
  for (const accept of [
    'application/problem+json',
    'application/json, application/problem+json',
    'application/problem+json, application/json',
    'Application/Problem+JSON',
    'application/problem+json;q=0.9, */*;q=0.1',
    'application/json;q=0.5, application/problem+json;q=0.5',
    'text/html, application/problem+json',
    'application/json;q=0, application/problem+json;q=0.1',
  ])
    assert.ok(prefersProblem(accept), accept);
});

Accept('absent, not named, weighted 0 or below JSON: DRF’s bodies', () => {
  for (const accept of [
    undefined,
    '',
    '*/*',
    'application/json',
    'application/*',
    'application/json, application/problem+json;q=0.5',
    'application/*;q=0.9, application/problem+json;q=0.8',
    'application/problem+json;q=0',
    'application/problem+json;q=abc',
    'application/problem+xml',
  ])
    assert.not.ok(prefersProblem(accept), String(accept));
});

const Body = suite('a DRF error body as problem details of type about:blank');

Body('`detail` kept as DRF wrote it, the status phrase as title', () => {
  assert.equal(problemOf(404, { detail: 'Not found.' }), {
    type: 'about:blank',
    title: 'Not Found',
    status: 404,
    detail: 'Not found.',
  });
});

Body('field errors kept whole as `errors`, with DRF’s `Invalid input.`', () => {
  const errors = { non_field_errors: ['Unable to log in with provided credentials.'] };
  assert.equal(problemOf(400, errors), {
    type: 'about:blank',
    title: 'Bad Request',
    status: 400,
    detail: 'Invalid input.',
    errors,
  });
});

Accept.run();
Body.run();
