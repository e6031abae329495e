import { createHash } from 'node:crypto';
import type { Queryable } from '@gantry/db';
import { ConflictError, UnprocessableError, ValidationError } from '../../errors.ts';

// Idempotency-Key: remembered 24 h per API key. The row in idempotency_keys
// is the lock, so it holds across API processes: the first request claims the key
// (state in_flight, committed at once so others see it), its own transaction then marks
// it completed together with the change, so "changed" and "remembered" commit as one.

const REMEMBER = '24 hours';
/**
 * An in-flight claim older than this belongs to a process that died mid-request (its
 * transaction rolled back); a new request may take the key over. The takeover is safe:
 * completing checks the claim's token, so a late original can no longer commit.
 */
const ABANDONED_AFTER = '5 minutes';

const KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;

export interface IdempotentRequest {
  apiKeyId: string;
  key: string;
  method: string;
  path: string;
  requestHash: string;
}

export type IdempotencyClaim =
  | { kind: 'claimed'; request: IdempotentRequest; token: string }
  | { kind: 'replay'; status: number; body: unknown };

/** JSON with object keys sorted, so the same body in another key order hashes the same. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, item]) => item !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([name, item]) => `${JSON.stringify(name)}:${canonicalJson(item)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/** The request an Idempotency-Key header names, or null when the header is absent. */
export function idempotentRequest(
  header: string | undefined,
  request: { apiKeyId: string; method: string; path: string; body: unknown },
): IdempotentRequest | null {
  if (header === undefined || header === '') return null;
  if (!KEY_PATTERN.test(header)) {
    throw new ValidationError(
      'invalid header Idempotency-Key: 1–255 visible ASCII characters',
      'invalid_idempotency_key',
    );
  }
  const requestHash = createHash('sha256')
    .update(`${request.method.toUpperCase()} ${request.path}\n${canonicalJson(request.body ?? {})}`)
    .digest('hex');
  return {
    apiKeyId: request.apiKeyId,
    key: header,
    method: request.method.toUpperCase(),
    path: request.path,
    requestHash,
  };
}

/**
 * Claims the key for this request, or tells what to do instead: replay the stored
 * answer, 422 when the key was used for a different request, 409 while it is in flight.
 */
export async function claimIdempotencyKey(
  db: Queryable,
  request: IdempotentRequest,
  attempt = 1,
): Promise<IdempotencyClaim> {
  if (attempt === 1) {
    // Each claim clears a few expired keys (any API key's), so the table never needs a sweeper.
    await db.query(
      `/* api:pruneIdempotencyKeys */
       DELETE FROM idempotency_keys
        WHERE ctid = ANY (ARRAY (SELECT ctid FROM idempotency_keys WHERE expires_at < now() ORDER BY expires_at LIMIT 50))`,
    );
  }
  const claimed = await db.query<{ token: string }>(
    `/* api:claimIdempotencyKey */
     INSERT INTO idempotency_keys (api_key_id, idempotency_key, method, path, request_hash, state, created_at, expires_at)
     VALUES ($1, $2, $3, $4, $5, 'in_flight', clock_timestamp(), clock_timestamp() + interval '${REMEMBER}')
     ON CONFLICT (api_key_id, idempotency_key) DO UPDATE
        SET method = EXCLUDED.method, path = EXCLUDED.path, request_hash = EXCLUDED.request_hash, state = 'in_flight',
            response_status = NULL, response_body = NULL, created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at
      WHERE idempotency_keys.expires_at <= now()
         OR (idempotency_keys.state = 'in_flight' AND idempotency_keys.created_at < now() - interval '${ABANDONED_AFTER}')
     RETURNING created_at::text AS token`,
    [request.apiKeyId, request.key, request.method, request.path, request.requestHash],
  );
  const token = claimed.rows[0]?.token;
  if (token) return { kind: 'claimed', request, token };

  const { rows } = await db.query<{
    request_hash: string;
    state: string;
    response_status: number | null;
    response_body: unknown;
  }>(
    `/* api:readIdempotencyKey */
     SELECT request_hash, state, response_status, response_body FROM idempotency_keys WHERE api_key_id = $1 AND idempotency_key = $2`,
    [request.apiKeyId, request.key],
  );
  const existing = rows[0];
  // Gone between the two statements (its first request failed and released it): try again.
  if (!existing && attempt < 3) return claimIdempotencyKey(db, request, attempt + 1);
  if (!existing)
    throw new ConflictError(
      'a request with this Idempotency-Key is still being processed; retry once it has finished',
      'idempotency_in_flight',
    );
  if (existing.request_hash !== request.requestHash) {
    throw new UnprocessableError(
      'Idempotency-Key was already used with a different request (method, path or body); use a new key for a new request',
      'idempotency_key_reused',
    );
  }
  if (existing.state === 'in_flight') {
    throw new ConflictError(
      'a request with this Idempotency-Key is still being processed; retry once it has finished',
      'idempotency_in_flight',
    );
  }
  return { kind: 'replay', status: existing.response_status ?? 200, body: existing.response_body };
}

/** Stores the answer; call inside the transaction of the change. */
export async function completeIdempotencyKey(
  db: Queryable,
  claim: Extract<IdempotencyClaim, { kind: 'claimed' }>,
  status: number,
  body: unknown,
): Promise<void> {
  const { rowCount } = await db.query(
    `/* api:completeIdempotencyKey */
     UPDATE idempotency_keys SET state = 'completed', response_status = $4, response_body = $5
      WHERE api_key_id = $1 AND idempotency_key = $2 AND created_at = $3::timestamptz AND state = 'in_flight'`,
    [claim.request.apiKeyId, claim.request.key, claim.token, status, JSON.stringify(body)],
  );
  if (rowCount === 0) {
    throw new ConflictError(
      'this request took too long and its Idempotency-Key was taken over by a retry',
      'idempotency_in_flight',
    );
  }
}

/** Forgets a claim whose request failed, so the client may retry with the same key. */
export async function releaseIdempotencyKey(
  db: Queryable,
  claim: Extract<IdempotencyClaim, { kind: 'claimed' }>,
): Promise<void> {
  await db.query(
    `/* api:releaseIdempotencyKey */
     DELETE FROM idempotency_keys WHERE api_key_id = $1 AND idempotency_key = $2 AND created_at = $3::timestamptz AND state = 'in_flight'`,
    [claim.request.apiKeyId, claim.request.key, claim.token],
  );
}
