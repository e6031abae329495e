import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import type { Context } from 'koa';
import { z } from 'zod';
import type { AppDeps } from '../../app.ts';
import { ratePolicies } from '../../http/rate-limit.ts';
import { basePaths, defineRoute, type RouteRegistry, type RouteSpec } from '../../http/route.ts';
import { generateOpenApiDocument, type DocumentOptions, type GeneratedDocument } from './openapi.ts';
import { pagePolicies, renderGuide, renderReference, type GuideValues } from './pages.ts';

const TAG = 'Self-description';

const swaggerUiDir = path.dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
const swaggerUiVersion = (
  JSON.parse(readFileSync(path.join(swaggerUiDir, 'package.json'), 'utf8')) as { version: string }
).version;

/** The files the pages load; anything else under /docs/assets is a 400 naming the file. */
const assetFiles = {
  'swagger-ui.css': { file: path.join(swaggerUiDir, 'swagger-ui.css'), type: 'text/css; charset=utf-8' },
  'swagger-ui-bundle.js': {
    file: path.join(swaggerUiDir, 'swagger-ui-bundle.js'),
    type: 'text/javascript; charset=utf-8',
  },
  'reference.js': { file: new URL('./assets/reference.js', import.meta.url), type: 'text/javascript; charset=utf-8' },
  'reference.css': { file: new URL('./assets/reference.css', import.meta.url), type: 'text/css; charset=utf-8' },
  'guide.css': { file: new URL('./assets/guide.css', import.meta.url), type: 'text/css; charset=utf-8' },
} as const;
type AssetName = keyof typeof assetFiles;

const loadedAssets = new Map<AssetName, { raw: Buffer; gzip: Buffer }>();
function asset(name: AssetName): { raw: Buffer; gzip: Buffer } {
  let loaded = loadedAssets.get(name);
  if (!loaded) {
    const raw = readFileSync(assetFiles[name].file);
    loaded = { raw, gzip: gzipSync(raw) };
    loadedAssets.set(name, loaded);
  }
  return loaded;
}

const html = (description: string) => ({ description, contentType: 'text/html' });

/** The origin links in the guide point at: GANTRY_PUBLIC_URL, else the request's own (if sane). */
function publicOrigin(ctx: Context, publicUrl: string | undefined): string {
  if (publicUrl) return publicUrl.replace(/\/+$/, '');
  const origin = `${ctx.protocol}://${ctx.host}`;
  return /^https?:\/\/([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(:\d{1,5})?$/.test(origin) ? origin : 'http://localhost:8080';
}

/** A body kept in memory both plain and gzipped; gzip when the client takes it. */
function sendCompressible(ctx: Context, body: { raw: Buffer; gzip: Buffer }, type: string): void {
  ctx.type = type;
  ctx.vary('Accept-Encoding');
  if (ctx.acceptsEncodings('gzip', 'identity') === 'gzip') {
    ctx.set('Content-Encoding', 'gzip');
    ctx.body = body.gzip;
  } else {
    ctx.body = body.raw;
  }
}

function sendPage(ctx: Context, body: string, policy: string): void {
  ctx.set('Content-Security-Policy', policy);
  ctx.set('Cache-Control', 'no-cache');
  ctx.type = 'text/html; charset=utf-8';
  ctx.body = body;
}

/**
 * Self-description of the external API (spec: Self-description): the OpenAPI document,
 * the HTML guide and reference, and the deprecated aliases of the guide. Everything is
 * generated from the route registry, so endpoints added by any feature appear here.
 */
export function docsRoutes(deps: AppDeps, registry: () => RouteRegistry): RouteSpec[] {
  const { config } = deps;
  const policies = ratePolicies(config.rateLimit);
  const documentOptions = (base: DocumentOptions['base']): DocumentOptions => ({
    base,
    publicUrl: config.http.publicUrl,
    policies,
    limits: { maxJsonBytes: config.http.maxJsonBytes, maxUploadBytes: config.http.maxUploadBytes },
  });
  // The registry is complete once the app is built; the documents are made on first use.
  const documents = new Map<DocumentOptions['base'], GeneratedDocument>();
  const documentFor = (base: DocumentOptions['base']): GeneratedDocument => {
    let generated = documents.get(base);
    if (!generated) {
      generated = generateOpenApiDocument(registry().routes, documentOptions(base));
      for (const problem of generated.problems) {
        deps.logger.error(
          { operationId: problem.operationId, error: problem.error },
          'route left out of the OpenAPI schemas',
        );
      }
      documents.set(base, generated);
    }
    return generated;
  };

  const serialized = new Map<DocumentOptions['base'], { raw: Buffer; gzip: Buffer }>();
  const serializedFor = (base: DocumentOptions['base']) => {
    let body = serialized.get(base);
    if (!body) {
      const raw = Buffer.from(JSON.stringify(documentFor(base).document));
      body = { raw, gzip: gzipSync(raw) };
      serialized.set(base, body);
    }
    return body;
  };

  const guideValues = (ctx: Context): GuideValues => ({
    baseUrl: `${publicOrigin(ctx, config.http.publicUrl)}${basePaths.external}`,
    ratePoints: policies.default.points,
    rateWindowSeconds: policies.default.windowSeconds,
    ratePerSecond: config.rateLimit.perSecond,
    rateBurst: config.rateLimit.burst,
    exportPoints: policies.export.points,
    exportWindowSeconds: policies.export.windowSeconds,
    maxJsonBytes: config.http.maxJsonBytes,
    maxUploadBytes: config.http.maxUploadBytes,
    requestTimeoutSeconds: Math.round(config.http.requestTimeoutMs / 1000),
    webhookMaxAttempts: config.webhooks.maxAttempts,
    webhookBackoff: config.webhooks.backoffSeconds.join(', '),
    webhookTimeoutSeconds: config.webhooks.timeoutSeconds,
  });
  // Rendering markdown costs milliseconds; the page only varies with the origin it names.
  const renderedGuides = new Map<string, string>();
  const guide = async (ctx: Context) => {
    const values = guideValues(ctx);
    let page = renderedGuides.get(values.baseUrl);
    if (page === undefined) {
      page = renderGuide(registry().routes, values);
      if (renderedGuides.size >= 32) renderedGuides.clear();
      renderedGuides.set(values.baseUrl, page);
    }
    sendPage(ctx, page, pagePolicies.guide);
  };

  const guideRoute = (path: string, operationId: string, summary: string, deprecated: boolean) =>
    defineRoute({
      method: 'get',
      base: 'external',
      path,
      operationId,
      summary,
      description: deprecated
        ? 'Deprecated: use `GET /guide`. Answers the guide with a `Deprecation` header and a `Link` to its successor.'
        : undefined,
      tags: [TAG],
      auth: 'public',
      ...(deprecated ? { deprecated: true, successor: '/guide' } : {}),
      responses: { 200: html('The HTML guide') },
      handler: guide,
    });

  return [
    defineRoute({
      method: 'get',
      base: 'external',
      path: '/openapi.json',
      operationId: 'getOpenApiDocument',
      summary: 'The OpenAPI 3.0.3 document of this API',
      tags: [TAG],
      auth: 'public',
      // Sent as serialized once (a large document); declared as a free-form JSON object.
      responses: {
        200: { description: 'OpenAPI 3.0.3 document (free-form JSON object)', contentType: 'application/json' },
      },
      handler: async (ctx) => {
        ctx.set('Cache-Control', 'no-cache');
        sendCompressible(ctx, serializedFor('external'), 'application/json; charset=utf-8');
      },
    }),
    guideRoute(
      '/guide',
      'getGuide',
      'HTML guide: first call, keys and scope, ranges, paging, exports, webhooks, errors, limits',
      false,
    ),
    defineRoute({
      method: 'get',
      base: 'external',
      path: '/docs',
      operationId: 'getReference',
      summary: 'HTML API reference, rendered from /openapi.json',
      tags: [TAG],
      auth: 'public',
      responses: { 200: html('The HTML reference page') },
      handler: async (ctx) => sendPage(ctx, renderReference(swaggerUiVersion), pagePolicies.reference),
    }),
    guideRoute('', 'getRootGuide', 'HTML guide (deprecated: use /guide)', true),
    guideRoute('/public-docs', 'getPublicDocs', 'HTML guide (deprecated alias of /guide)', true),
    defineRoute({
      method: 'get',
      base: 'external',
      path: '/docs/assets/:file',
      operationId: 'getDocsAsset',
      summary: 'Static files of the guide and reference pages',
      tags: [TAG],
      auth: 'public',
      hidden: true,
      request: {
        params: z.object({
          file: z.enum(
            Object.keys(assetFiles) as [AssetName, ...AssetName[]],
            `must be one of ${Object.keys(assetFiles).join(', ')}`,
          ),
        }),
      },
      responses: { 200: { description: 'The file', contentType: 'application/octet-stream' } },
      handler: async (ctx, { params }) => {
        const { file } = params as { file: AssetName };
        ctx.set('Cache-Control', 'public, max-age=3600');
        sendCompressible(ctx, asset(file), assetFiles[file].type);
      },
    }),
    defineRoute({
      method: 'get',
      base: 'admin',
      path: '/openapi.json',
      operationId: 'adminGetOpenApiDocument',
      summary: 'The OpenAPI 3.0.3 document of the admin API',
      tags: ['Admin'],
      auth: 'admin',
      responses: {
        200: { description: 'OpenAPI 3.0.3 document (free-form JSON object)', contentType: 'application/json' },
      },
      handler: async (ctx) => {
        sendCompressible(ctx, serializedFor('admin'), 'application/json; charset=utf-8');
      },
    }),
  ];
}
