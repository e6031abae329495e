import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Context } from 'koa';
import type { Queryable } from '@gantry/db';
import { ForbiddenError, UnauthorizedError } from '../errors.ts';
import type { RouteSpec } from './route.ts';

export interface ApiKeyAuth {
  kind: 'apiKey';
  tenantId: string;
  tenantName: string;
  keyId: string;
  keyName: string;
  /** Set for customer-scoped keys: they see only rows with exactly this customerName. */
  customerName: string | null;
  customerScoped: boolean;
}

export type AuthContext = ApiKeyAuth | { kind: 'admin' } | { kind: 'public' };

const KEY_PATTERN = /^gk_([a-z0-9]{12})_([A-Za-z0-9_-]{43})$/;

export interface GeneratedApiKey {
  key: string;
  prefix: string;
  hash: Buffer;
}

/** A new random key: "gk_" + 12-character lookup prefix + "_" + 256-bit secret. */
export function generateApiKey(): GeneratedApiKey {
  const prefix = randomBytes(12)
    .toString('base64url')
    .toLowerCase()
    .replace(/[^a-z0-9]/g, '0')
    .slice(0, 12);
  const key = `gk_${prefix}_${randomBytes(32).toString('base64url')}`;
  return { key, prefix, hash: hashApiKey(key) };
}

export function hashApiKey(key: string): Buffer {
  return createHash('sha256').update(key).digest();
}

function safeEqual(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}

/** Throttles last_used_at writes to one per key per minute per process. */
const lastUsedWrites = new Map<string, number>();

export async function authenticateApiKey(db: Queryable, presented: string | undefined): Promise<ApiKeyAuth> {
  if (presented === undefined || presented === '')
    throw new UnauthorizedError('missing api key (X-API-Key header)', 'missing_api_key');
  const match = KEY_PATTERN.exec(presented.trim());
  if (!match) throw new UnauthorizedError();
  const { rows } = await db.query<{
    id: string;
    name: string;
    customer_name: string | null;
    key_hash: Buffer;
    enabled: boolean;
    tenant_id: string;
    tenant_name: string;
  }>(
    `/* api:authenticateApiKey */
     SELECT k.id, k.name, k.customer_name, k.key_hash, k.enabled, t.id AS tenant_id, t.name AS tenant_name
       FROM api_keys k JOIN tenants t ON t.id = k.tenant_id
      WHERE k.key_prefix = $1`,
    [match[1]],
  );
  const row = rows[0];
  // Hash even when no row matched, so a miss takes as long as a wrong secret.
  const presentedHash = hashApiKey(presented.trim());
  if (!row || !safeEqual(presentedHash, row.key_hash) || !row.enabled) throw new UnauthorizedError();

  const now = Date.now();
  if ((lastUsedWrites.get(row.id) ?? 0) < now - 60_000) {
    lastUsedWrites.set(row.id, now);
    await db.query(`/* api:touchApiKey */ UPDATE api_keys SET last_used_at = now() WHERE id = $1`, [row.id]);
  }
  return {
    kind: 'apiKey',
    tenantId: row.tenant_id,
    tenantName: row.tenant_name,
    keyId: row.id,
    keyName: row.name,
    customerName: row.customer_name,
    customerScoped: row.customer_name !== null,
  };
}

export function authenticateAdmin(configuredToken: string | undefined, authorization: string | undefined): void {
  if (configuredToken === undefined) {
    throw new UnauthorizedError('the admin API is disabled: set GANTRY_ADMIN_TOKEN', 'admin_disabled');
  }
  const match = /^Bearer\s+(.+)$/i.exec(authorization ?? '');
  if (!match?.[1]) throw new UnauthorizedError('missing admin token (Authorization: Bearer …)', 'missing_admin_token');
  const presented = createHash('sha256').update(match[1].trim()).digest();
  const expected = createHash('sha256').update(configuredToken).digest();
  if (!timingSafeEqual(presented, expected)) throw new UnauthorizedError('invalid admin token', 'invalid_admin_token');
}

export function createAuthenticator(db: Queryable, adminToken: string | undefined) {
  return async (ctx: Context, route: RouteSpec): Promise<AuthContext> => {
    switch (route.auth) {
      case 'public':
        return { kind: 'public' };
      case 'admin':
        authenticateAdmin(adminToken, ctx.get('authorization') || undefined);
        return { kind: 'admin' };
      case 'apiKey': {
        const auth = await authenticateApiKey(db, ctx.get('x-api-key') || undefined);
        if (route.tenantKeyOnly && auth.customerScoped) {
          throw new ForbiddenError(
            'this operation needs a tenant-wide API key; customer-scoped keys may not use it',
            'tenant_key_required',
          );
        }
        return auth;
      }
    }
  };
}

/** The API key of a route declared with auth 'apiKey' (narrowing helper for handlers). */
export function requireApiKey(auth: AuthContext): ApiKeyAuth {
  if (auth.kind !== 'apiKey') throw new UnauthorizedError();
  return auth;
}
