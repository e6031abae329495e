/**
 * The one error family of the HTTP layer. Domain code throws these; the error
 * middleware turns them into `{"error", "code"}` with their status.
 */
export class AppError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = new.target.name;
  }
}

export class ValidationError extends AppError {
  constructor(message: string, code = 'invalid_request') {
    super(400, code, message);
  }
}

export class UnauthorizedError extends AppError {
  constructor(message = 'invalid api key', code = 'invalid_api_key') {
    super(401, code, message);
  }
}

export class ForbiddenError extends AppError {
  constructor(message: string, code = 'forbidden') {
    super(403, code, message);
  }
}

export class NotFoundError extends AppError {
  constructor(message = 'not found', code = 'not_found') {
    super(404, code, message);
  }
}

export class MethodNotAllowedError extends AppError {
  constructor(method: string, path: string, allowed: string[]) {
    super(405, 'method_not_allowed', `method ${method} is not allowed on ${path}`, { Allow: allowed.join(', ') });
  }
}

export class ConflictError extends AppError {
  constructor(message: string, code = 'conflict') {
    super(409, code, message);
  }
}

export class PayloadTooLargeError extends AppError {
  constructor(message: string, code = 'payload_too_large') {
    super(413, code, message);
  }
}

/** A body the server cannot read: wrong media type, charset or Content-Encoding. */
export class UnsupportedMediaTypeError extends AppError {
  constructor(message: string, code = 'unsupported_media_type') {
    super(415, code, message);
  }
}

export class UnprocessableError extends AppError {
  constructor(message: string, code = 'unprocessable') {
    super(422, code, message);
  }
}

/** A file refused as a whole: every row at fault, so the caller fixes them all at once. */
export class RowProblemsError extends AppError {
  constructor(
    message: string,
    readonly problems: { row: number; field: string; message: string }[],
  ) {
    super(422, 'invalid_rows', message);
  }
}

export class RateLimitedError extends AppError {
  constructor(retryAfterSeconds: number, headers: Record<string, string> = {}) {
    super(429, 'rate_limited', 'rate limit exceeded', { 'Retry-After': String(retryAfterSeconds), ...headers });
  }
}
