import { randomUUID } from 'node:crypto';
import type { Middleware } from 'koa';
import { Histogram, register } from 'prom-client';
import { isDatabaseUnavailable } from '@gantry/db';
import type { Logger } from '@gantry/logger';
import { AppError, RowProblemsError } from '../errors.ts';

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Takes a sane X-Request-Id from the caller or makes one; echoes it on the response. */
export function requestId(): Middleware {
  return async (ctx, next) => {
    const incoming = ctx.get('x-request-id');
    ctx.state.requestId = REQUEST_ID.test(incoming) ? incoming : randomUUID();
    ctx.set('X-Request-Id', ctx.state.requestId as string);
    await next();
  };
}

const httpDuration =
  (register.getSingleMetric('gantry_http_request_duration_seconds') as
    | Histogram<'method' | 'route' | 'status'>
    | undefined) ??
  new Histogram({
    name: 'gantry_http_request_duration_seconds',
    help: 'HTTP request duration by route and status',
    labelNames: ['method', 'route', 'status'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
  });

/**
 * Turns every error into `{"error", "code"}`. AppErrors keep their status and message;
 * anything else is a 500 that says nothing of internals (the log has the details).
 * Also logs one line per request and records its duration.
 */
export function errorsAndAccessLog(logger: Logger): Middleware {
  return async (ctx, next) => {
    const started = process.hrtime.bigint();
    try {
      await next();
      if (ctx.status === 404 && ctx.body === undefined) {
        ctx.status = 404;
        ctx.body = { error: `no such endpoint: ${ctx.method} ${ctx.path}`, code: 'not_found' };
      } else if (ctx.status === 405 && (ctx.body === undefined || typeof ctx.body === 'string')) {
        ctx.body = { error: `method ${ctx.method} is not allowed on ${ctx.path}`, code: 'method_not_allowed' };
      }
    } catch (caught) {
      const error = toAppError(caught);
      ctx.status = error.status;
      for (const [name, value] of Object.entries(error.headers)) ctx.set(name, value);
      ctx.body = {
        error: error.message,
        code: error.code,
        ...(error instanceof RowProblemsError ? { problems: error.problems } : {}),
      };
      if (error.code === DATABASE_UNAVAILABLE) {
        logger.warn({ err: caught, requestId: ctx.state.requestId, path: ctx.path }, 'database unavailable');
      } else if (error.status >= 500) {
        logger.error(
          { err: caught, requestId: ctx.state.requestId, method: ctx.method, path: ctx.path },
          'request failed',
        );
        if (!(caught instanceof AppError)) ctx.body = { error: 'internal server error', code: 'internal_error' };
      }
    } finally {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const route =
        (ctx.state.route as { operationId?: string } | undefined)?.operationId ??
        (ctx.status === 404 ? 'unmatched' : ctx.path);
      httpDuration.observe({ method: ctx.method, route, status: String(ctx.status) }, seconds);
      logger.info(
        {
          requestId: ctx.state.requestId,
          method: ctx.method,
          path: ctx.path,
          status: ctx.status,
          ms: Math.round(seconds * 1000),
          keyId: (ctx.state.auth as { keyId?: string } | undefined)?.keyId,
        },
        'request',
      );
    }
  };
}

const DATABASE_UNAVAILABLE = 'database_unavailable';

/** Seconds a client is told to wait while no primary answers: a Patroni failover takes 10–30 s. */
const DATABASE_RETRY_AFTER_SECONDS = 5;

/**
 * Maps errors of the libraries underneath (body parser, Koa, pg) onto AppErrors. A
 * database that cannot be reached or has just been demoted (a failover in progress) is
 * a 503 with Retry-After: the request may succeed as is once a primary answers again.
 */
function toAppError(caught: unknown): AppError {
  if (caught instanceof AppError) return caught;
  if (isDatabaseUnavailable(caught)) {
    return new AppError(503, DATABASE_UNAVAILABLE, 'the database is unavailable right now; retry shortly', {
      'Retry-After': String(DATABASE_RETRY_AFTER_SECONDS),
    });
  }
  const error = caught as {
    status?: number;
    statusCode?: number;
    expose?: boolean;
    type?: string;
    message?: string;
    code?: string;
  };
  const status = error.status ?? error.statusCode;
  if (
    status === 413 ||
    error.type === 'entity.too.large' ||
    error.code === 'ETOOBIG' ||
    /maxFileSize|maxTotalFileSize|exceeded/i.test(error.message ?? '')
  ) {
    return new AppError(413, 'payload_too_large', 'request body is too large');
  }
  if (error.type === 'entity.parse.failed' || (status === 400 && error.expose)) {
    return new AppError(400, 'invalid_body', 'request body is not valid JSON');
  }
  if (typeof status === 'number' && status >= 400 && status < 500) {
    return new AppError(status, 'bad_request', error.expose && error.message ? error.message : 'bad request');
  }
  return new AppError(500, 'internal_error', 'internal server error');
}

/** Headers for every response; HTML pages set their own Content-Security-Policy and caching. */
export function securityHeaders(): Middleware {
  return async (ctx, next) => {
    ctx.set('X-Content-Type-Options', 'nosniff');
    ctx.set('Referrer-Policy', 'no-referrer');
    ctx.set('X-Frame-Options', 'DENY');
    ctx.set('Cross-Origin-Resource-Policy', 'same-origin');
    // API answers are data, never documents to render or frame.
    ctx.set('Content-Security-Policy', "default-src 'none'; frame-ancestors 'none'");
    // Answers to a key are that key's data: no shared cache may keep them.
    ctx.set('Cache-Control', 'no-store');
    if (ctx.secure) ctx.set('Strict-Transport-Security', 'max-age=31536000');
    await next();
  };
}
