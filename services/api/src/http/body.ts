import type { Readable } from 'node:stream';
import zlib from 'node:zlib';
import bourne from '@hapi/bourne';
import { findIllFormedText, mayHoldSurrogateEscape } from '@gantry/contracts';
import type { Context, Middleware } from 'koa';
import getRawBody from 'raw-body';
import { UnsupportedMediaTypeError, ValidationError } from '../errors.ts';
import { decodeUtf8Body, ILL_FORMED_TEXT } from './text.ts';

/** Content-Encodings a JSON body may use: decoded, with the size limit applied to the decoded bytes. */
export const DECODED_ENCODINGS = ['gzip', 'deflate', 'br'] as const;

/** Charsets a JSON body may declare: JSON between systems is UTF-8 (RFC 8259 §8.1), ASCII being a subset. */
const JSON_CHARSETS = /^(utf-?8|us-ascii)$/i;

/** The methods whose bodies are read, whatever the route. */
export const READ_METHODS = new Set(['POST', 'PUT', 'PATCH']);

export function hasRequestBody(ctx: Context): boolean {
  return Number(ctx.get('content-length') || 0) > 0 || ctx.get('transfer-encoding') !== '';
}

/** The request's Content-Encoding, lower-cased; `identity` when absent. */
function contentEncoding(ctx: Context): string {
  const value = ctx.get('content-encoding').trim().toLowerCase();
  return value === '' ? 'identity' : value;
}

/** Media types read as JSON bodies (others are left to the routes that take them). */
const JSON_TYPES = [
  'application/json',
  'application/json-patch+json',
  'application/vnd.api+json',
  'application/csp-report',
  'application/reports+json',
];

/** A JSON text must be an object or an array. */
const OBJECT_OR_ARRAY = /^[ \t\n\r]*[[{]/;

/** The request's body as its bytes, decoded from its Content-Encoding. */
function decodedStream(ctx: Context, encoding: string): Readable {
  if (encoding === 'gzip') return ctx.req.pipe(zlib.createGunzip());
  if (encoding === 'deflate') return ctx.req.pipe(zlib.createInflate());
  if (encoding === 'br') return ctx.req.pipe(zlib.createBrotliDecompress());
  return ctx.req;
}

/**
 * The JSON value of a body read as bytes. Bytes that are not UTF-8 and lone surrogate
 * escapes are refused naming the field that holds them (text.ts): read leniently, they
 * would be stored as U+FFFD, or refused by PostgreSQL after the fact.
 */
function parseJsonBody(bytes: Buffer): unknown {
  const { text, valid } = decodeUtf8Body(bytes);
  if (text === '') return {};
  let value: unknown;
  try {
    if (!OBJECT_OR_ARRAY.test(text)) throw new SyntaxError('not an object or an array');
    // bourne refuses __proto__ keys, which would poison objects merged from the body.
    value = bourne.parse(text, { protoAction: 'error' });
  } catch {
    if (!valid) throw new ValidationError('request body is not valid UTF-8', 'invalid_body');
    throw new ValidationError('request body is not valid JSON', 'invalid_body');
  }
  if (!valid || mayHoldSurrogateEscape(text)) {
    const path = findIllFormedText(value);
    if (path !== null) {
      throw new ValidationError(
        path === '' ? `invalid body: ${ILL_FORMED_TEXT}` : `invalid body field ${path}: ${ILL_FORMED_TEXT}`,
        'invalid_body',
      );
    }
    // A bad byte can make a pair with an escaped high surrogate just before it: refused all the same.
    if (!valid) throw new ValidationError('request body is not valid UTF-8', 'invalid_body');
  }
  return value;
}

/**
 * Parses JSON bodies (at most `maxJsonBytes` once decoded) after refusing, with a 415,
 * what cannot be read: a Content-Encoding other than identity, gzip, deflate or br
 * (uploads take identity only: files are sent as they are), and a JSON charset other
 * than UTF-8. A body that does not decode is a 400, never a 500; so is text that could
 * not be stored as it was sent (parseJsonBody). Multipart uploads and other media types
 * are left to the routes that take them.
 */
export function requestBody(options: {
  maxJsonBytes: number;
  /** Routes that take whole files (route.ts largeBodyLimits) read JSON bodies up to their own limit. */
  largeBodies?: { pattern: RegExp; maxBytes: number }[];
}): Middleware {
  return async (ctx, next) => {
    // Bodies of other methods are never read, so never refused.
    if (!hasRequestBody(ctx) || !READ_METHODS.has(ctx.method)) return next();
    const encoding = contentEncoding(ctx);
    const json = ctx.is('json') !== false;
    if (encoding !== 'identity') {
      if (!(DECODED_ENCODINGS as readonly string[]).includes(encoding) || !json) {
        throw new UnsupportedMediaTypeError(
          `Content-Encoding ${JSON.stringify(encoding.slice(0, 40))} is not supported: send identity, or gzip, deflate or br for JSON bodies`,
          'unsupported_content_encoding',
        );
      }
    }
    if (json && ctx.request.charset !== '' && !JSON_CHARSETS.test(ctx.request.charset)) {
      throw new UnsupportedMediaTypeError(
        `charset ${JSON.stringify(ctx.request.charset.slice(0, 40))} is not supported: JSON bodies are UTF-8`,
        'unsupported_charset',
      );
    }
    if (!ctx.is(JSON_TYPES)) return next();
    let bytes: Buffer;
    try {
      bytes = await getRawBody(decodedStream(ctx, encoding), {
        limit: options.largeBodies?.find((entry) => entry.pattern.test(ctx.path))?.maxBytes ?? options.maxJsonBytes,
        // The declared length is the encoded one: it bounds only an identity body.
        length: encoding === 'identity' ? ctx.get('content-length') || null : null,
      });
    } catch (caught) {
      // Decoder errors carry no HTTP status: the body was not valid compressed data.
      if (encoding !== 'identity' && typeof (caught as { status?: unknown }).status !== 'number') {
        throw new ValidationError(`the request body is not valid ${encoding} data`, 'invalid_body');
      }
      throw caught;
    }
    (ctx.request as { body?: unknown }).body = parseJsonBody(bytes);
    return next();
  };
}

/**
 * The body of a route that takes a file (RouteSpec.request.file): JSON as the body reader
 * parsed it, or CSV text read here up to maxBytes. Anything else is a 415.
 */
export async function readFileBody(
  ctx: Context,
  maxBytes: number,
): Promise<{ format: 'json'; value: unknown } | { format: 'csv'; value: string }> {
  if (ctx.is('json')) return { format: 'json', value: (ctx.request as { body?: unknown }).body ?? {} };
  if (!hasRequestBody(ctx) || !ctx.is('text/csv')) {
    throw new UnsupportedMediaTypeError(
      'the body must be a CSV file (Content-Type: text/csv) or JSON (application/json)',
      'invalid_content_type',
    );
  }
  const encoding = contentEncoding(ctx);
  if (encoding !== 'identity') {
    throw new UnsupportedMediaTypeError(
      'a CSV body is sent as it is (no Content-Encoding)',
      'unsupported_content_encoding',
    );
  }
  const bytes = await getRawBody(ctx.req, { limit: maxBytes, length: ctx.get('content-length') || null });
  const { text, valid } = decodeUtf8Body(bytes);
  if (!valid) throw new ValidationError('request body is not valid UTF-8', 'invalid_body');
  if (text.includes('\u0000'))
    throw new ValidationError('request body must not contain NUL characters', 'invalid_body');
  return { format: 'csv', value: text };
}
