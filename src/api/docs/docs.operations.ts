import { z } from 'zod';
import { defineOperation } from '../openapi/operation.js';

/** The media types the document is served as: JSON, and OpenAPI's registered one (as DRF's schema view). */
export const SCHEMA_MEDIA_TYPES = ['application/json', 'application/vnd.oai.openapi+json'] as const;

/** The document and its viewer (`docs.routes.ts`), documented like every route. */
export const docsOperations = {
  schema: defineOperation({
    method: 'get',
    path: '/api/schema/',
    operationId: 'apiSchema',
    summary: 'This OpenAPI 3.1 document',
    tag: 'meta',
    priority: 'docs',
    access: 'optional',
    responses: {
      200: {
        description: 'The document; `servers` names the origin the request came to.',
        body: z.looseObject({ openapi: z.string() }),
        jsonMedia: SCHEMA_MEDIA_TYPES,
        headers: ['ETag', 'Cache-Control'],
      },
      304: { description: 'The `If-None-Match` tag is current.', headers: ['ETag'] },
    },
  }),
  page: defineOperation({
    method: 'get',
    path: '/api/docs/',
    operationId: 'apiDocs',
    summary: 'The document, rendered (Swagger UI)',
    tag: 'meta',
    priority: 'docs',
    access: 'optional',
    responses: {
      200: { description: 'An HTML page; its scripts and styles are served below `/api/docs/`.', media: 'text/html' },
      304: { description: 'The `If-None-Match` tag is current.', headers: ['ETag'] },
    },
  }),
  asset: defineOperation({
    method: 'get',
    path: '/api/docs/:file',
    operationId: 'apiDocsAsset',
    summary: 'A script, style sheet or icon of the docs page; under `?v=<its tag>` it is cached for a year',
    tag: 'meta',
    priority: 'docs',
    access: 'optional',
    params: { file: z.string() },
    responses: {
      200: { description: 'The file.', media: '*/*' },
      304: { description: 'The `If-None-Match` tag is current.', headers: ['ETag'] },
    },
  }),
};
