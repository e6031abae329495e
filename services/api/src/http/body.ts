import type { Context, Middleware } from 'koa';
import { koaBody } from 'koa-body';
import { UnsupportedMediaTypeError, ValidationError } from '../errors.ts';

/** Content-Encodings a JSON body may use: decoded, with the size limit applied to the decoded bytes. */
export const DECODED_ENCODINGS = ['gzip', 'deflate', 'br'] as const;

/** Charsets a JSON body may declare: JSON between systems is UTF-8 (RFC 8259 §8.1), ASCII being a subset. */
const JSON_CHARSETS = /^(utf-?8|us-ascii)$/i;

/** The methods whose bodies are read, whatever the route: the ones koa-body parses. */
export const READ_METHODS = new Set(['POST', 'PUT', 'PATCH']);

export function hasRequestBody(ctx: Context): boolean {
  return Number(ctx.get('content-length') || 0) > 0 || ctx.get('transfer-encoding') !== '';
}

/** The request's Content-Encoding, lower-cased; `identity` when absent. */
function contentEncoding(ctx: Context): string {
  const value = ctx.get('content-encoding').trim().toLowerCase();
  return value === '' ? 'identity' : value;
}

/**
 * Parses JSON bodies (koa-body, at most `maxJsonBytes` once decoded) after refusing, with
 * a 415, what cannot be read: a Content-Encoding other than identity, gzip, deflate or br
 * (uploads take identity only: files are sent as they are), and a JSON charset other
 * than UTF-8. A body that does not decode is a 400, never a 500. Multipart uploads and
 * other media types are left to the routes that take them.
 */
export function requestBody(options: { maxJsonBytes: number }): Middleware {
  const parse = koaBody({
    json: true,
    jsonStrict: true,
    jsonLimit: options.maxJsonBytes,
    multipart: false,
    urlencoded: false,
    text: false,
  });
  return async (ctx, next) => {
    // Bodies of other methods are never read (koa-body's parsed methods), so never refused.
    if (!hasRequestBody(ctx) || !READ_METHODS.has(ctx.method)) return parse(ctx, next);
    const encoding = contentEncoding(ctx);
    const json = ctx.is('json') !== false;
    if (encoding !== 'identity') {
      if (!(DECODED_ENCODINGS as readonly string[]).includes(encoding) || !json) {
        throw new UnsupportedMediaTypeError(
          `Content-Encoding ${JSON.stringify(encoding.slice(0, 40))} is not supported: send identity, or gzip, deflate or br for JSON bodies`,
          'unsupported_content_encoding',
        );
      }
      // The decoder matches exact lower-case names.
      ctx.req.headers['content-encoding'] = encoding;
    }
    if (json && ctx.request.charset !== '' && !JSON_CHARSETS.test(ctx.request.charset)) {
      throw new UnsupportedMediaTypeError(
        `charset ${JSON.stringify(ctx.request.charset.slice(0, 40))} is not supported: JSON bodies are UTF-8`,
        'unsupported_charset',
      );
    }
    let parsed = false;
    try {
      await parse(ctx, () => {
        parsed = true;
        return next();
      });
    } catch (caught) {
      // Decoder errors carry no HTTP status: the body was not valid compressed data.
      const status = (caught as { status?: unknown }).status;
      if (!parsed && encoding !== 'identity' && typeof status !== 'number') {
        throw new ValidationError(`the request body is not valid ${encoding} data`, 'invalid_body');
      }
      throw caught;
    }
  };
}
