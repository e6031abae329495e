import type { Context } from 'koa';
import { z } from 'zod';
import type { AppDeps } from '../../app.ts';
import { defineRoute, type RouteSpec } from '../../http/route.ts';
import { assetFiles, servedFile, vendorFiles, type ServedFile } from './files.ts';
import { CONSOLE_PATH, consolePolicy, renderConsolePage } from './page.ts';

const TAG = 'Console';

/** Modules the page preloads so the first screen needs one round trip for all of them (the map and charts load on demand). */
const PRELOADED = [
  'vendor/lit-html.js',
  ...Object.keys(assetFiles)
    .filter((name) => name.endsWith('.js'))
    .map((name) => `assets/${name}`),
];

/** Sends a file gzipped when the client takes it; 304 when its ETag is still current. */
function sendFile(ctx: Context, file: ServedFile): void {
  ctx.set('Cache-Control', 'no-cache');
  ctx.vary('Accept-Encoding');
  ctx.type = file.type;
  ctx.etag = file.etag;
  if (ctx.fresh) {
    ctx.status = 304;
    return;
  }
  if (ctx.acceptsEncodings('gzip', 'identity') === 'gzip') {
    ctx.set('Content-Encoding', 'gzip');
    ctx.body = file.gzip;
  } else {
    ctx.body = file.raw;
  }
}

function fileParam(names: string[]) {
  return z.object({
    file: z.enum(names as [string, ...string[]], `must be one of ${names.join(', ')}`),
  });
}

const fileResponses = {
  200: { description: 'The file', contentType: 'application/octet-stream' },
  304: { description: 'Not modified since the ETag given' },
};

/**
 * The operations console: one HTML page and its static files, all served by the API
 * process. The page calls only the public external API with the key the user types, so
 * it shows exactly what that key may see.
 */
export function consoleRoutes(deps: AppDeps): RouteSpec[] {
  const settings = { tileUrl: deps.config.console.tileUrl, tileAttribution: deps.config.console.tileAttribution };
  const page = renderConsolePage(settings, PRELOADED);
  const policy = consolePolicy(settings);
  const common = { method: 'get', base: 'root', auth: 'public', hidden: true } as const;
  const tags = [TAG];
  return [
    defineRoute({
      ...common,
      tags,
      path: CONSOLE_PATH,
      operationId: 'getConsole',
      summary: 'The operations console (HTML)',
      responses: { 200: { description: 'The console page', contentType: 'text/html' } },
      handler: async (ctx) => {
        ctx.set('Content-Security-Policy', policy);
        ctx.set('Cache-Control', 'no-cache');
        ctx.type = 'text/html; charset=utf-8';
        ctx.body = page;
      },
    }),
    defineRoute({
      ...common,
      tags,
      path: `${CONSOLE_PATH}/assets/:file`,
      operationId: 'getConsoleAsset',
      summary: 'The console’s own scripts and styles',
      request: { params: fileParam(Object.keys(assetFiles)) },
      responses: fileResponses,
      handler: async (ctx, { params }) => {
        sendFile(ctx, servedFile(assetFiles[(params as { file: string }).file]!));
      },
    }),
    defineRoute({
      ...common,
      tags,
      path: `${CONSOLE_PATH}/vendor/:file`,
      operationId: 'getConsoleVendorFile',
      summary: 'Libraries of the console, served from the installed packages',
      request: { params: fileParam(Object.keys(vendorFiles)) },
      responses: fileResponses,
      handler: async (ctx, { params }) => {
        sendFile(ctx, servedFile(vendorFiles[(params as { file: string }).file]!));
      },
    }),
  ];
}
