import {
  OpenApiGeneratorV3,
  OpenAPIRegistry,
  type ResponseConfig,
  type RouteConfig,
} from '@asteasolutions/zod-to-openapi';
import { z } from 'zod';
import { ErrorResponse } from '../../http/common-schemas.ts';
import type { RatePolicy } from '../../http/rate-limit.ts';
import { basePaths, type ResponseSpec, type RouteBase, type RouteSpec } from '../../http/route.ts';

export const OPENAPI_VERSION = '3.0.3';
export const API_VERSION = '1.0.0';

export const API_KEY_SCHEME = 'ApiKeyAuth';
export const ADMIN_SCHEME = 'AdminToken';

export interface DocumentOptions {
  base: Exclude<RouteBase, 'root'>;
  /** Absolute public URL of the deployment (GANTRY_PUBLIC_URL); relative server URL otherwise. */
  publicUrl?: string | undefined;
  policies: Record<RatePolicy['name'], RatePolicy>;
  limits: { maxJsonBytes: number; maxUploadBytes: number };
}

export type OpenAPIObject = ReturnType<OpenApiGeneratorV3['generateDocument']>;

export interface GeneratedDocument {
  document: OpenAPIObject;
  /** Routes whose schemas could not be converted; they appear without schemas. */
  problems: { operationId: string; error: string }[];
}

const BINARY_TYPES = /^(application\/(?!json)|image\/|video\/|audio\/)/;

type HeaderSpec = NonNullable<ResponseSpec['headers']>;

const rateLimitHeaders: HeaderSpec = {
  'RateLimit-Limit': { description: 'Requests allowed in the current window', schema: { type: 'integer' } },
  'RateLimit-Remaining': { description: 'Requests left in the current window', schema: { type: 'integer' } },
  'RateLimit-Reset': { description: 'Seconds until the window resets', schema: { type: 'integer' } },
  'RateLimit-Policy': { description: 'The budget: `<requests>;w=<window seconds>`', schema: { type: 'string' } },
};

const requestIdHeader: HeaderSpec = {
  'X-Request-Id': {
    description: 'Identifies this request in the server logs; quote it when reporting a problem',
    schema: { type: 'string' },
  },
};

function deprecationHeaders(route: RouteSpec): HeaderSpec {
  return {
    Deprecation: {
      description: 'RFC 9745: the operation is deprecated (since the date given as @epoch-seconds)',
      schema: { type: 'string' },
    },
    ...(route.successor
      ? {
          Link: {
            description: `\`<${basePaths[route.base]}${route.successor}>; rel="successor-version"\`: the operation to use instead`,
            schema: { type: 'string' as const },
          },
        }
      : {}),
  };
}

/** `/telemetry/assets/:assetId/state` → `/telemetry/assets/{assetId}/state`. */
export function openApiPath(route: RouteSpec): string {
  const path = route.path.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
  return path === '' ? '/' : path;
}

function pathParameterNames(route: RouteSpec): string[] {
  return [...route.path.matchAll(/:([A-Za-z0-9_]+)/g)].map((match) => match[1]!);
}

/**
 * The errors every route of its kind can answer, whether or not the feature declared
 * them: they come from the shared machinery (authentication, validation, body parser,
 * rate limiter, error middleware), so the document states them once for all.
 */
function impliedResponses(route: RouteSpec, options: DocumentOptions): Record<number, ResponseSpec> {
  const implied: Record<number, ResponseSpec> = {};
  const error = (description: string, headers?: HeaderSpec): ResponseSpec => ({
    description,
    schema: ErrorResponse,
    ...(headers ? { headers } : {}),
  });
  const request = route.request ?? {};
  if (request.query || request.params || request.body || request.multipart || request.headers) {
    implied[400] = error('Invalid parameter or body; the message names the parameter at fault');
  }
  if (route.auth === 'apiKey') {
    implied[401] = error('Missing, disabled or invalid X-API-Key');
    const policy = options.policies[route.rateLimit === 'export' ? 'export' : 'default'];
    implied[429] = error(
      `Rate limit exceeded (${policy.points} requests per ${policy.windowSeconds} s per key); retry after Retry-After seconds`,
      {
        'Retry-After': { description: 'Seconds to wait before retrying', schema: { type: 'integer' } },
        ...rateLimitHeaders,
      },
    );
    implied[500] = error('Server-side error (the body says nothing of internals; quote X-Request-Id)');
  }
  if (route.auth === 'admin') implied[401] = error('Missing or invalid admin token');
  if (route.tenantKeyOnly) implied[403] = error('The operation needs a tenant-wide key');
  if (request.body) implied[413] = error(`JSON body over ${options.limits.maxJsonBytes} bytes`);
  if (request.multipart) implied[413] = error(`Upload over ${options.limits.maxUploadBytes} bytes`);
  return implied;
}

function responseConfig(route: RouteSpec, status: number, spec: ResponseSpec): ResponseConfig {
  const headers: HeaderSpec = {
    ...requestIdHeader,
    ...(route.auth === 'apiKey' && status !== 401 ? rateLimitHeaders : {}),
    ...(route.deprecated ? deprecationHeaders(route) : {}),
    ...spec.headers,
  };
  const config: ResponseConfig = { description: spec.description, headers };
  if (spec.schema) {
    config.content = { [spec.contentType ?? 'application/json']: { schema: spec.schema } };
  } else if (spec.contentType) {
    const binary = BINARY_TYPES.test(spec.contentType);
    const schema = /json/.test(spec.contentType)
      ? { type: 'object' as const }
      : binary
        ? { type: 'string' as const, format: 'binary' }
        : { type: 'string' as const };
    config.content = { [spec.contentType]: { schema } };
  }
  return config;
}

function routeConfig(route: RouteSpec, options: DocumentOptions, withSchemas: boolean): RouteConfig {
  const request = route.request ?? {};
  const declaredParams = request.params instanceof z.ZodObject ? Object.keys(request.params.shape) : [];
  const undeclared = pathParameterNames(route).filter((name) => !withSchemas || !declaredParams.includes(name));
  const responses: RouteConfig['responses'] = {};
  // A declared response wins, but keeps the headers the machinery adds (Retry-After, …).
  const all: Record<number, ResponseSpec> = { ...impliedResponses(route, options) };
  for (const [status, declared] of Object.entries(route.responses)) {
    const implied = all[Number(status)];
    all[Number(status)] = implied
      ? { ...implied, ...declared, headers: { ...implied.headers, ...declared.headers } }
      : declared;
  }
  for (const [status, spec] of Object.entries(all).sort(([a], [b]) => Number(a) - Number(b))) {
    responses[status] = responseConfig(
      route,
      Number(status),
      withSchemas
        ? spec
        : {
            ...spec,
            schema: undefined,
            contentType: spec.contentType ?? (spec.schema ? 'application/json' : undefined),
          },
    );
  }
  const description = [
    route.description,
    route.rateLimit === 'export'
      ? `Counts against the export budget as well: ${options.policies.export.points} requests per ${options.policies.export.windowSeconds} s per key.`
      : undefined,
  ]
    .filter(Boolean)
    .join('\n\n');

  const config: RouteConfig = {
    method: route.method,
    path: openApiPath(route),
    operationId: route.operationId,
    summary: route.summary,
    ...(description ? { description } : {}),
    tags: route.tags,
    ...(route.deprecated ? { deprecated: true } : {}),
    security:
      route.auth === 'apiKey' ? [{ [API_KEY_SCHEME]: [] }] : route.auth === 'admin' ? [{ [ADMIN_SCHEME]: [] }] : [],
    request: withSchemas
      ? {
          ...(request.query ? { query: request.query as z.ZodObject } : {}),
          ...(request.params ? { params: request.params as z.ZodObject } : {}),
          ...(request.headers ? { headers: request.headers } : {}),
          ...(request.body
            ? { body: { required: true, content: { 'application/json': { schema: request.body } } } }
            : {}),
        }
      : {},
    responses,
  };
  if (request.multipart) {
    config.request = {
      ...config.request,
      body: {
        required: true,
        description: request.multipart.description,
        content: {
          'multipart/form-data': {
            schema: {
              type: 'object',
              properties: { [request.multipart.fileField]: { type: 'string', format: 'binary' } },
              required: [request.multipart.fileField],
            },
          },
        },
      },
    };
  }
  if (undeclared.length > 0) {
    config.parameters = undeclared.map((name) => ({
      name,
      in: 'path' as const,
      required: true,
      schema: { type: 'string' as const },
    }));
  }
  return config;
}

function registerSecurity(registry: OpenAPIRegistry, base: DocumentOptions['base']): void {
  if (base === 'external') {
    registry.registerComponent('securitySchemes', API_KEY_SCHEME, {
      type: 'apiKey',
      in: 'header',
      name: 'X-API-Key',
      description: 'An API key from the tenant settings: tenant-wide, or scoped to one customerName.',
    });
  } else {
    registry.registerComponent('securitySchemes', ADMIN_SCHEME, {
      type: 'http',
      scheme: 'bearer',
      description: 'The deployment admin token (GANTRY_ADMIN_TOKEN).',
    });
  }
}

function documentConfig(options: DocumentOptions) {
  const path = basePaths[options.base];
  const external = options.base === 'external';
  return {
    openapi: OPENAPI_VERSION,
    info: {
      title: external ? 'Gantry external API' : 'Gantry admin API',
      version: API_VERSION,
      description: external
        ? `Assets, inspections and reports, telemetry, service requests and webhooks of one tenant. Start with \`GET /me\`; the guide is at ${path}/guide.`
        : 'Back-office provisioning of tenants, keys, master data, devices and geofences (bearer admin token).',
    },
    servers: [{ url: options.publicUrl ? `${options.publicUrl.replace(/\/+$/, '')}${path}` : path }],
  };
}

/** Checks that one route converts on its own, so a bad schema cannot take the whole document down. */
function routeProblem(route: RouteSpec, options: DocumentOptions): string | null {
  try {
    const registry = new OpenAPIRegistry();
    registerSecurity(registry, options.base);
    registry.registerPath(routeConfig(route, options, true));
    new OpenApiGeneratorV3(registry.definitions).generateDocument(documentConfig(options));
    return null;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
}

/**
 * The OpenAPI 3.0.3 document of one base, generated from the very route specs (and zod
 * schemas) that validate requests and responses. Hidden routes stay out; schemas named
 * with `.meta({ id })` become components.
 */
export function generateOpenApiDocument(routes: RouteSpec[], options: DocumentOptions): GeneratedDocument {
  const registry = new OpenAPIRegistry();
  registerSecurity(registry, options.base);
  const problems: GeneratedDocument['problems'] = [];
  const published = routes.filter((route) => route.base === options.base && !route.hidden);
  for (const route of published) {
    const problem = routeProblem(route, options);
    if (problem) problems.push({ operationId: route.operationId, error: problem });
    registry.registerPath(routeConfig(route, options, problem === null));
  }
  const document = new OpenApiGeneratorV3(registry.definitions).generateDocument(documentConfig(options));
  const tags = [...new Set(published.flatMap((route) => route.tags))];
  document.tags = tags.map((name) => ({ name }));
  return { document, problems };
}
