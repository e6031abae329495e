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

const BINARY_TYPES = /^(application\/(?!json)|image\/|video\/|audio\/|\*\/\*)/;

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
  if (request.query || request.params || request.body || request.multipart || request.file || request.headers) {
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
  if (route.auth === 'apiKey' || route.auth === 'admin') {
    // The error middleware's answer while no database primary answers (a failover, a restart).
    implied[503] = error(
      'The database is unavailable for a moment (a failover or a restart); retry after Retry-After seconds',
      {
        'Retry-After': { description: 'Seconds to wait before retrying', schema: { type: 'integer' } },
      },
    );
  }
  if (route.tenantKeyOnly) implied[403] = error('The operation needs a tenant-wide key');
  // 405 belongs to the path, which OpenAPI 3.0 cannot give responses: stated on each operation.
  implied[405] = error(
    'The path exists, but not with the method used (TRACE, CONNECT, PUT, …); `Allow` lists the methods it has',
    { Allow: { description: 'The methods this path answers, comma-separated', schema: { type: 'string' } } },
  );
  if (request.body || ['post', 'put', 'patch'].includes(route.method)) {
    // A POST, PUT or PATCH body is read even where the operation takes none.
    const none = request.body ? '' : ' (this operation takes no body, but one sent is read)';
    implied[413] = error(`JSON body over ${options.limits.maxJsonBytes} bytes, counted after decompression${none}`);
    implied[415] = error(
      `The body declares a charset other than UTF-8 or a Content-Encoding other than identity, gzip, deflate or br${request.body ? ', or is not application/json' : ''}${none}`,
    );
  }
  if (request.file) {
    implied[413] = error(`File over ${request.file.maxBytes} bytes (JSON counted after decompression)`);
    implied[415] = error(
      'The body is neither text/csv nor application/json, declares a charset other than UTF-8, or compresses a CSV body',
    );
  }
  if (request.multipart) {
    implied[413] = error(`Upload over ${options.limits.maxUploadBytes} bytes`);
    implied[415] = error(
      'The body is not multipart/form-data, or uses a Content-Encoding (uploads are sent as they are)',
    );
  }
  return implied;
}

function responseConfig(route: RouteSpec, status: number, spec: ResponseSpec): ResponseConfig {
  const headers: HeaderSpec = {
    ...requestIdHeader,
    // Answers made before the rate limiter runs (authentication, method, body reading) carry no budget headers.
    ...(route.auth === 'apiKey' && ![401, 405, 413, 415].includes(status) ? rateLimitHeaders : {}),
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
  if (request.file && withSchemas) {
    config.request = {
      ...config.request,
      body: {
        required: true,
        description: request.file.description,
        content: {
          'text/csv': { schema: { type: 'string' } },
          'application/json': { schema: request.file.json },
        },
      },
    };
  }
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

/** What each tag groups; a tag without an entry here is reported by the OpenAPI linter. */
export const TAG_DESCRIPTIONS: Record<string, string> = {
  'Self-description': 'This document, the HTML guide and the HTML reference; public, no key needed.',
  'Key and scope': 'Which tenant and customer scope the X-API-Key sees: the first call to make.',
  Reporting: 'Assets, asset types, inspection templates, inspections and reports, an overview, and CSV/XLSX exports.',
  Telemetry:
    'Devices fitted to the assets and what they measure: state, positions, sessions, utilization, container work, data quality, geofences and their alerts, operators; paginated CSV/XLSX exports.',
  'Service requests':
    'Tickets about assets: create, list, read, update (resolve, close, reopen), cancel, and their files.',
  Webhooks: 'The event catalog and delivery contract, the tenant’s subscriptions and the delivery log.',
  Admin: 'Back-office provisioning: tenants, API keys, master data, devices, operators and geofences.',
};

/** No open-source licence is granted: the API is offered under the operator's terms. */
const LICENSE = { name: 'Proprietary' };

const EXTERNAL_DESCRIPTION = (path: string) =>
  [
    `Assets, inspections and reports, telemetry, service requests and webhooks of one tenant. Start with \`GET /me\`; the guide is at ${path}/guide.`,
    'Every error is JSON `{"error", "code"}` with the status that says why: 400 bad parameter, header or body; 401 key; 403 scope; 404 not found; ' +
      '405 method not allowed on the path (with `Allow`); 409 conflict; 413 body too large (counted after decompression); ' +
      '415 body not readable (media type, a charset other than UTF-8, a Content-Encoding other than identity, gzip, deflate or br); 422 Idempotency-Key reused with another body; ' +
      '429 rate limited (with `Retry-After`); 500 server error (quote `X-Request-Id`); 503 database unavailable for a moment, during a failover (with `Retry-After`).',
    'Secrets are never returned, with one stated exception: a webhook signing secret that the server generates (on create without `secret`, or on `rotateSecret`) ' +
      'is shown once, in that answer. A secret the client sends is never echoed.',
    'Clients must ignore unknown response fields.',
  ].join('\n\n');

function documentConfig(options: DocumentOptions) {
  const path = basePaths[options.base];
  const external = options.base === 'external';
  return {
    openapi: OPENAPI_VERSION,
    info: {
      title: external ? 'Gantry external API' : 'Gantry admin API',
      version: API_VERSION,
      description: external
        ? EXTERNAL_DESCRIPTION(path)
        : 'Back-office provisioning of tenants, keys, master data, devices and geofences (bearer admin token).',
      license: LICENSE,
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

const isZodSchema = (value: unknown): value is z.ZodType =>
  value !== null && typeof value === 'object' && '_zod' in (value as object);

/**
 * The schemas named with `.meta({ id })` that the routes' schemas reach, each after the
 * named schemas it contains. Generating them first, in this order, makes every
 * component from the schema itself: the generator would otherwise build a component
 * from its first use, and a first use through `.nullable()` made the component itself
 * nullable (and dropped the nullability from the uses that needed it).
 */
function namedSchemasLeafFirst(routes: RouteSpec[]): z.ZodType[] {
  const seen = new Set<z.ZodType>();
  const ordered: z.ZodType[] = [];
  const visit = (schema: z.ZodType): void => {
    if (seen.has(schema)) return;
    seen.add(schema);
    const def = (schema as unknown as { _zod: { def: Record<string, unknown> } })._zod.def;
    for (const [key, value] of Object.entries(def)) {
      if (isZodSchema(value)) visit(value);
      else if (Array.isArray(value)) value.filter(isZodSchema).forEach(visit);
      else if (key === 'shape' && isNode(value)) Object.values(value).filter(isZodSchema).forEach(visit);
      else if (key === 'getter' && typeof value === 'function') {
        const inner: unknown = (value as () => unknown)();
        if (isZodSchema(inner)) visit(inner);
      }
    }
    if (z.globalRegistry.get(schema)?.id) ordered.push(schema);
  };
  for (const route of routes) {
    for (const schema of [route.request?.body, ...Object.values(route.responses).map((spec) => spec.schema)]) {
      if (schema) visit(schema);
    }
  }
  return ordered;
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
  const definitions = [
    ...namedSchemasLeafFirst(
      published.filter((route) => !problems.some((p) => p.operationId === route.operationId)),
    ).map((schema) => ({ type: 'schema' as const, schema })),
    ...registry.definitions,
  ];
  const document = new OpenApiGeneratorV3(definitions).generateDocument(documentConfig(options));
  const tags = [...new Set(published.flatMap((route) => route.tags))];
  document.tags = tags.map((name) =>
    TAG_DESCRIPTIONS[name] ? { name, description: TAG_DESCRIPTIONS[name] } : { name },
  );
  normalizeFor303(document);
  return { document, problems };
}

type Node = Record<string, unknown>;

const isNode = (value: unknown): value is Node => value !== null && typeof value === 'object' && !Array.isArray(value);

/**
 * A schema that matches null and nothing else, in OpenAPI 3.0.3 terms: `nullable` only
 * widens a `type` given beside it, and `enum: [null]` then leaves null alone.
 */
const NULL_ONLY = { type: 'object', nullable: true, enum: [null] } as const;

/**
 * Rewrites what the generator emits into what OpenAPI 3.0.3 means by it:
 * - a nullable reference, emitted as `allOf: [{$ref}, {nullable: true}]` (where the
 *   `nullable` has no effect: it widens no `type`), becomes
 *   `oneOf: [{$ref}, NULL_ONLY]`, so validators and generated clients accept the null
 *   the server sends;
 * - `{nullable: true}` alone (z.unknown(): any value) becomes `{}`, which already
 *   allows anything;
 * - parameters lose `nullable` (a query string has no null);
 * - a property with a `default` is not `required` (zod's `.default()` makes the field
 *   optional in a request: the server fills it in).
 */
export function normalizeFor303(document: OpenAPIObject): void {
  const visit = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(visit);
    if (!isNode(value)) return value;
    const allOf = value.allOf;
    if (Array.isArray(allOf) && allOf.length === 2 && isNode(allOf[1]) && allOf[1].nullable === true) {
      const { nullable: _nullable, ...siblings } = allOf[1];
      const { allOf: _allOf, ...rest } = value;
      return visit({ ...rest, ...siblings, oneOf: [allOf[0], NULL_ONLY] });
    }
    const node: Node = {};
    for (const [key, inner] of Object.entries(value)) node[key] = visit(inner);
    if (Array.isArray(node.required) && isNode(node.properties)) {
      const properties = node.properties;
      const required = node.required.filter((name) => !(isNode(properties[name]) && 'default' in properties[name]));
      if (required.length > 0) node.required = required;
      else delete node.required;
    }
    if (node.nullable === true && node.type === undefined && !node.oneOf && !node.anyOf && !node.allOf) {
      const { nullable: _nullable, ...rest } = node;
      return rest;
    }
    return node;
  };
  const normalized = visit(document) as OpenAPIObject;
  for (const item of Object.values(normalized.paths ?? {})) {
    for (const operation of Object.values(item as Node)) {
      if (!isNode(operation) || !Array.isArray(operation.parameters)) continue;
      for (const parameter of operation.parameters) {
        if (isNode(parameter) && isNode(parameter.schema)) delete parameter.schema.nullable;
      }
    }
  }
  Object.assign(document, normalized);
}
