import type { Context, Middleware } from 'koa';
import Router from '@koa/router';
import type { z } from 'zod';
import { MethodNotAllowedError, UnsupportedMediaTypeError, ValidationError } from '../errors.ts';
import type { AuthContext } from './auth.ts';
import { hasRequestBody } from './body.ts';
import { assertWellFormedHeader, assertWellFormedQuery } from './text.ts';

export type HttpMethod = 'get' | 'post' | 'patch' | 'put' | 'delete';

/** Where a route lives: the external API, the admin API, or the server root. */
export type RouteBase = 'external' | 'admin' | 'root';

export const basePaths: Record<RouteBase, string> = {
  external: '/api/external/v1',
  admin: '/api/admin/v1',
  root: '',
};

export interface ResponseSpec {
  description: string;
  /** JSON body schema; omit for non-JSON bodies (files, HTML) or empty bodies. */
  schema?: z.ZodType;
  /** Content type of a non-JSON body (text/csv, text/html, …). */
  contentType?: string;
  headers?: Record<string, { description: string; schema: { type: 'string' | 'integer' | 'boolean' } }>;
}

export interface RouteInput<Q, P, B> {
  query: Q;
  params: P;
  body: B;
  auth: AuthContext;
}

export interface RouteSpec<
  Q extends z.ZodType = z.ZodType,
  P extends z.ZodType = z.ZodType,
  B extends z.ZodType = z.ZodType,
> {
  method: HttpMethod;
  base: RouteBase;
  /** Koa-style path relative to the base: `/telemetry/assets/:assetId/state`. */
  path: string;
  operationId: string;
  summary: string;
  description?: string;
  tags: string[];
  /** apiKey: X-API-Key required; admin: bearer admin token; public: no credentials. */
  auth: 'apiKey' | 'admin' | 'public';
  /** Customer-scoped keys get 403 on this route (webhook subscriptions, say). */
  tenantKeyOnly?: boolean;
  deprecated?: boolean;
  /** For deprecated routes: the path (relative to the base) that replaces it, sent as a `Link`. */
  successor?: string;
  /** Keeps the route out of the OpenAPI document (health probes, metrics). */
  hidden?: boolean;
  /**
   * 'replica': a read-only route whose answer may lag the primary by a few seconds; with
   * GANTRY_DATABASE_READ_URL set it reads the replica (services/api/src/read-routing.ts).
   */
  reads?: 'replica';
  /** Routes with a rate budget of their own (exports). */
  rateLimit?: 'default' | 'export';
  request?: {
    query?: Q;
    params?: P;
    body?: B;
    /** multipart/form-data: the handler reads the parsed upload itself. */
    multipart?: { description: string; fileField: string };
    /**
     * The body is a whole file, CSV (text/csv) or JSON, of at most maxBytes: JSON is
     * parsed by the body reader (checked by the handler against `json`), CSV is left to the
     * handler (readFileBody).
     */
    file?: { description: string; json: z.ZodType; maxBytes: number };
    headers?: z.ZodObject;
  };
  responses: Record<number, ResponseSpec>;
  handler: (ctx: Context, input: RouteInput<z.output<Q>, z.output<P>, z.output<B>>) => Promise<void>;
}

/** RFC 9745 `Deprecation` value of deprecated routes: deprecated since v1 1.0.0 (2026-01-01). */
export const DEPRECATED_SINCE = '@1767225600';

/** Identity function that keeps the handler's input types tied to the schemas. */
export function defineRoute<
  Q extends z.ZodType = z.ZodUndefined,
  P extends z.ZodType = z.ZodUndefined,
  B extends z.ZodType = z.ZodUndefined,
>(spec: RouteSpec<Q, P, B>): RouteSpec {
  return spec as unknown as RouteSpec;
}

/** The value at a zod issue's path inside the input (undefined when absent). */
function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let current = input;
  for (const key of path) {
    if (current === null || typeof current !== 'object') return undefined;
    current = (current as Record<PropertyKey, unknown>)[key];
  }
  return current;
}

/**
 * "limit: Too big" style messages that name the parameter or field at fault. A value
 * that is absent altogether says "is required" rather than the rule for its form
 * (a missing assetId is not "must be a UUID").
 */
export function describeIssues(location: string, error: z.ZodError, input?: unknown): string {
  const parts = error.issues.slice(0, 3).map((issue) => {
    const name = issue.path.length > 0 ? issue.path.join('.') : null;
    const missing =
      (issue.code === 'invalid_type' || issue.code === 'invalid_value') &&
      name !== null &&
      valueAt(input, issue.path) === undefined;
    const message = missing ? 'is required' : issue.message;
    return name === null ? `${location}: ${message}` : `${location} ${name}: ${message}`;
  });
  return `invalid ${parts.join('; ')}`;
}

/**
 * The path to the first string (value or key) holding a NUL character, or null.
 * PostgreSQL text and jsonb cannot store NUL, so such input is refused at the edge
 * with a 400 instead of failing in the database. Iterative: bodies may nest deeply.
 */
export function findNulCharacter(value: unknown): string | null {
  const pending: { value: unknown; path: string }[] = [{ value, path: '' }];
  while (pending.length > 0) {
    const { value: current, path } = pending.pop()!;
    if (typeof current === 'string') {
      if (current.includes('\u0000')) return path;
    } else if (current !== null && typeof current === 'object') {
      for (const [key, inner] of Object.entries(current)) {
        const innerPath = path ? `${path}.${key}` : key;
        if (key.includes('\u0000')) return innerPath;
        pending.push({ value: inner, path: innerPath });
      }
    }
  }
  return null;
}

function parseInput<S extends z.ZodType | undefined>(schema: S, value: unknown, location: string, code: string) {
  if (!schema) return undefined;
  const nul = findNulCharacter(value);
  if (nul !== null)
    throw new ValidationError(`invalid ${location}${nul ? ` ${nul}` : ''}: must not contain NUL characters`, code);
  const result = schema.safeParse(value);
  if (!result.success) throw new ValidationError(describeIssues(location, result.error, value), code);
  return result.data;
}

/** The first value of each query parameter (a repeated parameter counts once). */
function flattenQuery(query: Record<string, string | string[] | undefined>): Record<string, string> {
  const flat: Record<string, string> = {};
  for (const [name, value] of Object.entries(query)) {
    const first = Array.isArray(value) ? value[0] : value;
    if (first !== undefined) flat[name] = first;
  }
  return flat;
}

/** The declared request headers that the request carries, under their declared names. */
function declaredHeaders(ctx: Context, schema: z.ZodObject): Record<string, string> {
  const present: Record<string, string> = {};
  for (const name of Object.keys(schema.shape)) {
    const value = ctx.request.headers[name.toLowerCase()];
    if (value === undefined) continue;
    present[name] = Array.isArray(value) ? value.join(', ') : value;
    assertWellFormedHeader(name, present[name]);
  }
  return present;
}

export interface MountOptions {
  /** Checks every JSON response against its declared schema (tests turn this on). */
  validateResponses: boolean;
  authenticate: (ctx: Context, route: RouteSpec) => Promise<AuthContext>;
  /** Middleware run before the handler of each route (rate limits, say). */
  before?: (route: RouteSpec) => Middleware[];
}

/** Wraps a route spec into a Koa middleware: auth, validation, handler, response check. */
export function routeMiddleware(route: RouteSpec, options: MountOptions): Middleware {
  return async (ctx) => {
    const auth = ctx.state.auth as AuthContext;
    const params = parseInput(route.request?.params, ctx.params, 'path parameter', 'invalid_parameter');
    // Checked on the raw query string: the parsed one has U+FFFD where the bytes were not
    // UTF-8. A route that takes no query reads none of it.
    if (route.request?.query) assertWellFormedQuery(ctx.querystring);
    const query = parseInput(route.request?.query, flattenQuery(ctx.query), 'query parameter', 'invalid_parameter');
    if (route.request?.headers) {
      // A declared header is checked as the document states it (an empty Idempotency-Key is a 400).
      parseInput(route.request.headers, declaredHeaders(ctx, route.request.headers), 'header', 'invalid_header');
    }
    const rawBody = (ctx.request as { body?: unknown }).body;
    if (route.request?.body && hasRequestBody(ctx) && !ctx.request.is('json')) {
      throw new UnsupportedMediaTypeError(
        'the request body must be JSON (Content-Type: application/json)',
        'invalid_content_type',
      );
    }
    const body = parseInput(route.request?.body, rawBody ?? {}, 'body field', 'invalid_body');
    await route.handler(ctx, { query, params, body, auth });
    if (options.validateResponses) checkResponse(route, ctx);
  };
}

function checkResponse(route: RouteSpec, ctx: Context): void {
  const spec = route.responses[ctx.status];
  if (!spec) {
    throw new Error(`${route.operationId} answered ${ctx.status}, which it does not declare`);
  }
  if (!spec.schema) return;
  const result = spec.schema.safeParse(ctx.body);
  if (!result.success) {
    throw new Error(
      `${route.operationId} ${ctx.status} response does not match its schema: ${JSON.stringify(result.error.issues.slice(0, 5))}`,
    );
  }
}

/**
 * After the router: a path that exists but not with the request's method is a 405 with
 * `Allow` (whatever the method, TRACE and CONNECT included), OPTIONS answers the `Allow`
 * list, and an unknown path stays a 404 for the error middleware.
 */
export function methodNotAllowed(): Middleware {
  return async (ctx, next) => {
    await next();
    if (ctx.status !== 404 || ctx.body !== undefined) return;
    const matched = (ctx as { matched?: { methods: string[] }[] }).matched ?? [];
    const allowed = [...new Set(matched.flatMap((layer) => layer.methods))];
    if (allowed.length === 0) return;
    if (ctx.method === 'OPTIONS') {
      ctx.set('Allow', [...allowed, 'OPTIONS'].join(', '));
      ctx.status = 200;
      ctx.body = '';
      return;
    }
    throw new MethodNotAllowedError(ctx.method, ctx.path, allowed);
  };
}

/** Where a route's body may exceed the JSON limit: its full path as a pattern, and its limit. */
export function largeBodyLimits(routes: RouteSpec[]): { pattern: RegExp; maxBytes: number }[] {
  return routes.flatMap((route) => {
    if (!route.request?.file) return [];
    const path = `${basePaths[route.base]}${route.path}`.replace(/:[A-Za-z]+/g, '[^/]+');
    return [{ pattern: new RegExp(`^${path}$`), maxBytes: route.request.file.maxBytes }];
  });
}

/** Collects every route of the app; mounts them and feeds the OpenAPI document. */
export class RouteRegistry {
  readonly routes: RouteSpec[] = [];

  add(...routes: RouteSpec[]): this {
    for (const route of routes) {
      const duplicate = this.routes.find(
        (other) =>
          other.operationId === route.operationId ||
          (other.method === route.method && other.base === route.base && other.path === route.path),
      );
      if (duplicate) throw new Error(`route ${route.method} ${route.path} (${route.operationId}) registered twice`);
      this.routes.push(route);
    }
    return this;
  }

  router(options: MountOptions): Router {
    const router = new Router();
    for (const route of this.routes) {
      const fullPath = `${basePaths[route.base]}${route.path}` || '/';
      router[route.method](
        route.operationId,
        fullPath,
        async (ctx, next) => {
          ctx.state.route = route;
          if (route.deprecated) {
            ctx.set('Deprecation', DEPRECATED_SINCE);
            if (route.successor)
              ctx.set('Link', `<${basePaths[route.base]}${route.successor}>; rel="successor-version"`);
          }
          ctx.state.auth = await options.authenticate(ctx, route);
          await next();
        },
        ...(options.before?.(route) ?? []),
        routeMiddleware(route, options),
      );
    }
    return router;
  }
}
