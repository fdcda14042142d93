import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { Context } from 'koa';
import { Errors } from '../../base/errors.js';
import { buildDocument } from '../openapi/document.js';
import { route } from '../openapi/operation.js';
import { docsOperations, SCHEMA_MEDIA_TYPES } from './docs.operations.js';
import { requestOrigin } from '../../server/request-url.js';
import type { ResourceRouter, RouteParts } from '../router.js';

/** Only this origin: no inline script or style, no other host (Swagger UI's icons are data: images). */
const CSP =
  "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; " +
  "frame-ancestors 'none'";

/** Swagger UI's files, from the installed package (found from src/ and from dist/ alike). */
const SWAGGER_UI = dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
const ASSETS: Record<string, string> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'favicon-32x32.png': 'image/png',
  'favicon-16x16.png': 'image/png',
};

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Paceline API</title>
<link rel="stylesheet" href="swagger-ui.css?v={swagger-ui.css}">
<link rel="icon" type="image/png" href="favicon-32x32.png?v={favicon-32x32.png}">
</head>
<body>
<div id="swagger-ui"></div>
<script src="swagger-ui-bundle.js?v={swagger-ui-bundle.js}"></script>
<script src="init.js?v={init.js}"></script>
</body>
</html>
`;

/**
 * The page's script. The document is read from this server; no online validator badge (it would
 * call another host). Three plugins make the page read as the API is used (docs/api.md "For
 * integrators"): no OPTIONS rows (every path answers OPTIONS, and the document keeps saying so);
 * a lock only where credentials are required: an operation anonymous clients may call lists
 * the empty requirement `{}` among its own, and keeps it, so "Try it out" still sends a token;
 * and a list's first cursor page one "Execute" away: an empty `cursor` asks for it (the document
 * says `allowEmptyValue`), but Swagger UI sends an empty field only with its "Send empty value"
 * box ticked, unticked by default. Here that box starts ticked while `page`, `limit` and `offset`
 * (which `cursor` refuses to mix with) are empty; a reader's own tick or untick stands.
 */
const INIT = `const hideOptions = () => ({
  statePlugins: { spec: { wrapSelectors: { taggedOperations: (original) => (...args) =>
    original(...args).map((tag) =>
      tag.update('operations', (operations) => operations.filter((op) => op.get('method') !== 'options'))) } } },
});
const lockOnlyWhereRequired = (system) => ({
  wrapComponents: { OperationSummary: (Original) => (props) => {
    const security = props.operationProps.get('security');
    const optional = security && security.some((requirement) => requirement.isEmpty());
    const shown = optional ? { ...props, operationProps: props.operationProps.set('security', security.clear()) } : props;
    return system.React.createElement(Original, shown);
  } },
});
const firstCursorPage = (system) => ({
  statePlugins: { spec: { wrapSelectors: { parameterInclusionSettingFor: (original) => (state, op, name, at) => {
    const chosen = state.getIn(['meta', 'paths', ...op, 'parameter_inclusions', at + '.' + name]);
    if (name !== 'cursor' || at !== 'query' || chosen !== undefined) return original(state, op, name, at);
    const values = system.specSelectors.parameterValues(op);
    return ['page', 'limit', 'offset'].every((other) => !values.get('query.' + other));
  } } } },
});
window.ui = SwaggerUIBundle({ url: '../schema/', dom_id: '#swagger-ui', deepLinking: true, validatorUrl: null,
  displayRequestDuration: true, plugins: [hideOptions, lockOnlyWhereRequired, firstCursorPage] });
`;

interface Asset {
  body: Buffer;
  type: string;
  etag: string;
}

/**
 * The docs page and its files have their own throttle scope, generous and keyed by address, so a
 * client that spent its anonymous budget still sees the page and the document it loads
 * (docs/throttling.md "Scopes"); THROTTLE_RATES=docs=… sets another rate.
 */
const DOCS_SCOPE = { scope: 'docs', rate: '600/min', keyedBy: 'ip' } as const;
/** A file asked for under its current version (`?v=<tag>`) never changes: browsers keep it for a year. */
const IMMUTABLE = 'public, max-age=31536000, immutable';

/**
 * `GET /api/schema/`: the API document (docs/architecture.md "API document"), with the request's
 * origin as its server. `GET /api/docs/`: Swagger UI rendering it, every file served from here.
 * `operations`: every operation the routes declared (src/api/router.ts `ApiRoutes`).
 */
export function docsRoutes(router: ResourceRouter, { deps, guard, operations }: RouteParts): void {
  // Built once, on first use (every route is declared by then): the document depends on the code alone;
  // the origin is put in per request.
  let document: ReturnType<typeof buildDocument> | undefined;
  const assets = new Map<string, Asset>();
  const asset = (name: string): Asset | undefined => {
    if (!assets.has(name)) {
      const body =
        name === 'index.html'
          ? versionedPage((file) => asset(file)!.etag.slice(1, -1))
          : name === 'init.js'
            ? Buffer.from(INIT)
            : Object.hasOwn(ASSETS, name)
              ? readFileSync(join(SWAGGER_UI, name))
              : undefined;
      if (!body) return undefined;
      const type =
        name === 'index.html'
          ? 'text/html; charset=utf-8'
          : name === 'init.js'
            ? 'text/javascript; charset=utf-8'
            : ASSETS[name]!;
      assets.set(name, { body, type, etag: tagOf(body) });
    }
    return assets.get(name);
  };

  const schemaGuard = guard({ ...DOCS_SCOPE, representations: SCHEMA_MEDIA_TYPES });
  const pageGuard = guard({ ...DOCS_SCOPE, representations: ['text/html'] });
  const assetGuard = guard({ ...DOCS_SCOPE, representations: [...new Set(Object.values(ASSETS))] });
  route(router, docsOperations.schema, schemaGuard, (ctx) => {
    document ??= buildDocument(operations());
    const body = Buffer.from(JSON.stringify({ ...document, servers: [{ url: requestOrigin(ctx, deps.config) }] }));
    // The same bytes under OpenAPI's own media type when the client prefers it; each its own tag.
    const type = (ctx.accepts(...SCHEMA_MEDIA_TYPES) || SCHEMA_MEDIA_TYPES[0]) as string;
    send(ctx, { body, type: `${type}; charset=utf-8`, etag: tagOf(body, type) }, 'public, max-age=60');
  });
  route(router, docsOperations.page, pageGuard, (ctx) => send(ctx, asset('index.html')!, 'no-cache'));
  route(router, docsOperations.asset, assetGuard, (ctx) => {
    const found = asset(ctx.params.file ?? '');
    if (!found || ctx.params.file === 'index.html') throw Errors.notFound();
    const current = ctx.query.v === found.etag.slice(1, -1);
    send(ctx, found, current ? IMMUTABLE : 'public, max-age=3600');
  });
  // Other methods are refused, counted under the docs scope as the route's own requests are.
  router.refuseOtherMethods((path) =>
    path === docsOperations.schema.path ? schemaGuard : path === docsOperations.page.path ? pageGuard : assetGuard,
  );
}

/** The page, each file it loads named with its current tag, so a new release's files are new URLs. */
function versionedPage(tagOfFile: (name: string) => string): Buffer {
  return Buffer.from(PAGE.replace(/\{([\w.-]+)\}/g, (_, name: string) => tagOfFile(name)));
}

function send(ctx: Context, asset: Asset, cacheControl: string): void {
  ctx.set('Cache-Control', cacheControl);
  ctx.set('ETag', asset.etag);
  ctx.set('Content-Security-Policy', CSP);
  const asked = ctx.get('If-None-Match');
  if (asked && asked.split(',').some((tag) => tag.trim().replace(/^W\//, '') === asset.etag)) {
    ctx.status = 304;
    return;
  }
  ctx.status = 200;
  ctx.type = asset.type;
  ctx.body = asset.body;
}

function tagOf(body: Buffer, type = ''): string {
  return `"${createHash('sha1').update(type).update(body).digest('base64url').slice(0, 22)}"`;
}
