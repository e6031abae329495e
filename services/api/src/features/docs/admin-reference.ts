import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { z } from 'zod';
import { basePaths, defineRoute, type RouteSpec } from '../../http/route.ts';
import { ASSET_PATH, escapeHtml, pagePolicies } from './pages.ts';

// The HTML reference of the admin API, rendered like the external one (swagger-ui from
// the API's own dependencies, the same stylesheet). The page is public: it holds nothing
// but the loader; the OpenAPI document it shows and every call made from it take the
// admin token, which the page asks for.

const swaggerUiDir = path.dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
const swaggerUiVersion = (
  JSON.parse(readFileSync(path.join(swaggerUiDir, 'package.json'), 'utf8')) as { version: string }
).version;

const ADMIN_ASSET_PATH = `${basePaths.admin}/docs/assets`;
const loaderSource = readFileSync(new URL('./assets/admin-reference.js', import.meta.url));

export function renderAdminReference(): string {
  const v = encodeURIComponent(swaggerUiVersion);
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml('Gantry admin API — reference')}</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="${ASSET_PATH}/swagger-ui.css?v=${v}">
<link rel="stylesheet" href="${ASSET_PATH}/reference.css">
</head>
<body>
<header class="gantry-bar">Gantry admin API (back office: tenants, keys, assets, devices, unknown devices…) · <a href="${basePaths.external}/docs">External API reference</a></header>
<form id="token-form" class="gantry-bar">
<label for="admin-token">Admin token</label>
<input id="admin-token" type="password" autocomplete="off" size="40" placeholder="the deployment's GANTRY_ADMIN_TOKEN">
<button type="submit">Show the reference</button>
<span id="token-status" role="status">The reference and its calls take the admin token (<code>pnpm start</code> prints it; it is also in <code>.gantry/admin-token</code>).</span>
</form>
<div id="reference" data-spec-url="${basePaths.admin}/openapi.json"></div>
<noscript>The reference needs JavaScript; the same content is the admin API's OpenAPI document, <code>GET ${basePaths.admin}/openapi.json</code> with <code>Authorization: Bearer &lt;admin token&gt;</code>.</noscript>
<script src="${ASSET_PATH}/swagger-ui-bundle.js?v=${v}"></script>
<script src="${ADMIN_ASSET_PATH}/admin-reference.js"></script>
</body>
</html>
`;
}

export function adminReferenceRoutes(): RouteSpec[] {
  const page = renderAdminReference();
  return [
    defineRoute({
      method: 'get',
      base: 'admin',
      path: '/docs',
      operationId: 'adminGetReference',
      summary: 'HTML reference of the admin API (public page; the document and calls take the admin token)',
      tags: ['Admin'],
      auth: 'public',
      hidden: true,
      responses: { 200: { description: 'The HTML reference page', contentType: 'text/html' } },
      handler: async (ctx) => {
        ctx.set('Content-Security-Policy', pagePolicies.reference);
        ctx.set('Cache-Control', 'no-cache');
        ctx.type = 'text/html; charset=utf-8';
        ctx.body = page;
      },
    }),
    defineRoute({
      method: 'get',
      base: 'admin',
      path: '/docs/assets/:file',
      operationId: 'adminGetDocsAsset',
      summary: 'The loader script of the admin reference page',
      tags: ['Admin'],
      auth: 'public',
      hidden: true,
      request: { params: z.object({ file: z.enum(['admin-reference.js'], 'must be admin-reference.js') }) },
      responses: { 200: { description: 'The file', contentType: 'text/javascript' } },
      handler: async (ctx) => {
        ctx.set('Cache-Control', 'public, max-age=3600');
        ctx.type = 'text/javascript; charset=utf-8';
        ctx.body = loaderSource;
      },
    }),
  ];
}
