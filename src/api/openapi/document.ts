import { z } from 'zod';
import { documentPath, type Operation, type ResponseSpec } from './operation.js';
import { requests, responses } from './schemas.js';
// Registers the problem details bodies in `responses`, beside the others.
import './problem-schemas.js';
import { PROBLEM_JSON } from '../../server/problem-details.js';
import { commonComponents, REF } from './components.js';

type Json = Record<string, unknown>;

const OPTIONS = { target: 'draft-2020-12', uri: (id: string) => `#/components/schemas/${id}` } as const;

/**
 * The OpenAPI 3.1 document of `operations` (docs/architecture.md "API document"): built from the
 * operations the routes declare, in the order declared, and the schemas the server validates and
 * renders with, never kept by hand. `origin` (the client's scheme and host) becomes the one `servers` entry.
 */
export function buildDocument(operations: readonly Operation[], origin?: string): Json {
  const schemas = {
    ...bare(z.toJSONSchema(responses, OPTIONS)),
    ...bare(z.toJSONSchema(requests, { ...OPTIONS, io: 'input' })),
  };
  const paths: Record<string, Json> = {};
  for (const operation of operations) {
    const item = (paths[documentPath(operation.path)] ??= {});
    item[operation.method] = describe(operation);
  }
  for (const [path, item] of Object.entries(paths)) {
    const onPath = operations.filter((op) => documentPath(op.path) === path);
    const guarded = onPath.some((op) => op.access !== 'public');
    item.options = {
      operationId: `options${onPath[0]!.operationId.replace(/^[a-z]/, (c) => c.toUpperCase())}`,
      summary: 'The methods of this path',
      tags: [onPath[0]!.tag],
      security: guarded ? [{}, { bearerAuth: [] }, { tokenAuth: [] }] : [],
      responses: {
        204: { description: 'No body; `Allow` lists the methods.', headers: { Allow: { $ref: REF.header('Allow') } } },
        ...(guarded ? guardResponses() : {}),
      },
    };
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Paceline API',
      version: '1',
      description:
        'Tasks with three pagination styles, exact rate limits and an event feed. ' +
        "Errors are JSON with DRF's texts, or RFC 9457 problem details (`application/problem+json`) for a " +
        'client whose Accept asks for them; see the README.',
    },
    ...(origin ? { servers: [{ url: origin }] } : {}),
    tags: [...new Set(operations.map((op) => op.tag))].map((name) => ({ name })),
    paths,
    components: { schemas, ...commonComponents() },
  };
}

function describe(op: Operation): Json {
  const parameters = [
    ...Object.entries(op.params ?? {}).map(([name, schema]) => ({
      name,
      in: 'path',
      required: true,
      schema: inline(schema),
    })),
    ...Object.entries(op.query ?? {}).map(([name, schema]) => ({
      name,
      in: 'query',
      required: false,
      schema: inline(schema),
    })),
    ...(op.list
      ? [
          ...['page', 'page_size', 'limit', 'offset', 'cursor'].map((name) => ({ $ref: REF.parameter(name) })),
          ordering(op.list.ordering),
        ]
      : []),
    ...(op.headers ?? []).map((name) => ({ $ref: REF.parameter(name) })),
  ];
  const answers: Record<string, Json> = {};
  for (const [status, spec] of Object.entries(op.responses))
    answers[status] = response(spec, op.access !== 'public', Number(status));
  if (op.list) {
    answers[200] = response(
      {
        description: 'A page, in the style the query asks for.',
        body: op.list.envelopes,
        headers: op.list.cached ? ['ETag', 'Cache-Control'] : [],
      },
      true,
    );
    answers[400] ??= { $ref: REF.response('BadRequest') };
    answers[404] ??= { $ref: REF.response('NotFound') };
  }
  if (op.body) {
    answers[400] ??= { $ref: REF.response('BadRequest') };
    answers[413] = { $ref: REF.response('PayloadTooLarge') };
    answers[415] = { $ref: REF.response('UnsupportedMediaType') };
  }
  if (op.params) answers[404] ??= { $ref: REF.response('NotFound') };
  return {
    operationId: op.operationId,
    summary: op.summary,
    ...(op.description ? { description: op.description } : {}),
    tags: [op.tag],
    security:
      op.access === 'public'
        ? []
        : op.access === 'required'
          ? [{ bearerAuth: [] }, { tokenAuth: [] }]
          : [{}, { bearerAuth: [] }, { tokenAuth: [] }],
    // What a request costs in its throttle scope's units (docs/throttling.md "Cost: requests that weigh more").
    ...(op.access === 'public' ? {} : { 'x-rate-limit-cost': op.cost ?? 1 }),
    ...(parameters.length > 0 ? { parameters } : {}),
    ...(op.body ? { requestBody: { required: true, content: { 'application/json': { schema: ref(op.body) } } } } : {}),
    responses: { ...answers, ...(op.access === 'public' ? {} : guardResponses(op.access === 'required')) },
  };
}

/** What the guard answers on every guarded route; 401 for a missing token only where one is required. */
function guardResponses(tokenRequired = false): Record<string, Json> {
  return {
    401: { $ref: REF.response(tokenRequired ? 'NotAuthenticated' : 'InvalidToken') },
    406: { $ref: REF.response('NotAcceptable') },
    429: { $ref: REF.response('Throttled') },
    503: { $ref: REF.response('Unavailable') },
  };
}

/** An answer as documented; an error's JSON body is also offered as problem details (docs/api.md "Problem details"). */
function response(spec: ResponseSpec, throttled: boolean, status = 200): Json {
  const headers: Record<string, Json> = {};
  for (const name of spec.headers ?? []) headers[name] = { $ref: REF.header(name) };
  if (throttled) for (const name of ['RateLimit-Policy', 'RateLimit']) headers[name] = { $ref: REF.header(name) };
  const bodies = spec.body === undefined ? [] : Array.isArray(spec.body) ? spec.body : [spec.body as z.ZodType];
  const schema = bodies.length === 1 ? ref(bodies[0]!) : { anyOf: bodies.map(ref) };
  return {
    description: spec.description,
    ...(Object.keys(headers).length > 0 ? { headers } : {}),
    ...(bodies.length > 0
      ? {
          content: {
            ...Object.fromEntries((spec.jsonMedia ?? ['application/json']).map((type) => [type, { schema }])),
            ...(status >= 400 ? { [PROBLEM_JSON]: { schema: { $ref: REF.schema('Problem') } } } : {}),
          },
        }
      : {}),
    ...(spec.media ? { content: { [spec.media]: { schema: { type: 'string' } } } } : {}),
  };
}

/** `?ordering=`: the list's key ascending or descending. */
function ordering(key: string): Json {
  return {
    name: 'ordering',
    in: 'query',
    required: false,
    description: `\`${key}\` (default) or \`-${key}\`.`,
    schema: { type: 'string', enum: [key, `-${key}`] },
  };
}

/** A named schema as a `$ref`, anything else inline. */
function ref(schema: z.ZodType): Json {
  const id = responses.get(schema)?.id ?? requests.get(schema)?.id;
  return id ? { $ref: REF.schema(id) } : inline(schema);
}

function inline(schema: z.ZodType): Json {
  const { $schema: _, ...rest } = z.toJSONSchema(schema, { target: 'draft-2020-12', io: 'input' }) as Json;
  return rest;
}

/** The registry's schemas without their `$schema`/`$id` (the document's dialect and position say them). */
function bare(converted: { schemas: Record<string, Json> }): Record<string, Json> {
  return Object.fromEntries(
    Object.entries(converted.schemas).map(([id, { $schema: _s, $id: _i, ...rest }]) => [id, rest]),
  );
}
