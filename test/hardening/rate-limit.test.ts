import net from 'node:net';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Koa from 'koa';
import { silentLogger } from '@gantry/logger';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAuthenticator } from '../../services/api/src/http/auth.ts';
import { errorsAndAccessLog } from '../../services/api/src/http/middleware.ts';
import { createRateLimiter, ratePolicies } from '../../services/api/src/http/rate-limit.ts';
import { defineRoute, RouteRegistry } from '../../services/api/src/http/route.ts';
import { json, startTestApi, testConfig, type TestApi } from '../support/api.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { createTenantWithKeys, type TenantFixture } from '../support/fixtures.ts';
import { registeredRoutes } from './support.ts';

// A window far longer than any test takes, so no budget refills mid-test: 5 requests per
// 50 s window (0.1/s sustained, bursts of 5).
const SMALL_BUDGET = {
  // One token back every 100 s: a loaded machine that takes seconds between two requests
  // must not see a refill in the middle of a check that counts them.
  GANTRY_RATE_LIMIT_PER_SECOND: '0.01',
  GANTRY_RATE_LIMIT_BURST: '5',
  GANTRY_EXPORT_RATE_LIMIT_PER_MINUTE: '2',
};

let db: TestDatabase;
let tenant: TenantFixture;
const started: TestApi[] = [];

async function startApi(env: Record<string, string>): Promise<TestApi> {
  const api = await startTestApi(db.pool, db.url, env);
  started.push(api);
  return api;
}

function redisReachable(): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port: 6379 });
    socket.setTimeout(1000, () => socket.destroy());
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
    socket.once('close', () => resolve(false));
  });
}

const hasRedis = await redisReachable();
if (!hasRedis)
  console.warn(
    '[rate-limit] no Redis at 127.0.0.1:6379 (Debian package "redis-server"): the shared-Redis test is skipped',
  );

beforeAll(async () => {
  db = await createTestDatabase('rate_limit');
  tenant = await createTenantWithKeys(db.pool, ['Acme', 'Globex']);
});
afterAll(async () => {
  for (const api of started) await api.close();
  await db?.drop();
});

function headersOf(response: Response) {
  return {
    limit: response.headers.get('ratelimit-limit'),
    remaining: response.headers.get('ratelimit-remaining'),
    reset: Number(response.headers.get('ratelimit-reset')),
    policy: response.headers.get('ratelimit-policy'),
  };
}

/** Spends a key's whole budget alternating between the instances, then checks the 429. */
async function spendAcross(instances: TestApi[], key: string): Promise<void> {
  for (let index = 0; index < 5; index++) {
    const response = await instances[index % instances.length]!.external('/me', key);
    expect(response.status).toBe(200);
    expect(headersOf(response)).toMatchObject({ limit: '5', remaining: String(4 - index), policy: '5;w=500' });
    expect(headersOf(response).reset).toBeGreaterThan(0);
    expect(headersOf(response).reset).toBeLessThanOrEqual(500);
  }
  const refused = await instances[1 % instances.length]!.external('/me', key);
  expect(refused.status).toBe(429);
  const retryAfter = Number(refused.headers.get('retry-after'));
  expect(retryAfter).toBeGreaterThanOrEqual(1);
  expect(retryAfter).toBeLessThanOrEqual(500);
  expect(headersOf(refused)).toMatchObject({ limit: '5', remaining: '0' });
  expect(await json(refused)).toEqual({ error: 'rate limit exceeded', code: 'rate_limited' });
}

describe('rate limits per API key (spec: Limits)', () => {
  it('sizes the default budget from GANTRY_RATE_LIMIT_PER_SECOND and _BURST (20/s, bursts of 40 → 40 per 2 s)', () => {
    const defaults = ratePolicies(
      testConfig(db.url, {
        GANTRY_RATE_LIMIT_PER_SECOND: '20',
        GANTRY_RATE_LIMIT_BURST: '40',
        GANTRY_EXPORT_RATE_LIMIT_PER_MINUTE: '30',
      }).rateLimit,
    );
    expect(defaults.default).toEqual({ name: 'default', points: 40, windowSeconds: 2 });
    expect(defaults.export).toEqual({ name: 'export', points: 30, windowSeconds: 60 });
  });

  it('two API processes on one database share each key budget (PostgreSQL store) and answer 429 with Retry-After', async () => {
    const instances = [await startApi(SMALL_BUDGET), await startApi(SMALL_BUDGET)];
    await spendAcross(instances, tenant.tenantKey);
    // Another key of the same tenant has a budget of its own.
    const other = await instances[0]!.external('/me', tenant.customerKeys.Acme!);
    expect(other.status).toBe(200);
    expect(headersOf(other).remaining).toBe('4');
    // Public pages are not counted against anyone.
    expect((await fetch(`${instances[0]!.url}/api/external/v1/guide`)).status).toBe(200);
  });

  it('puts the RateLimit headers on every authenticated response, errors included', async () => {
    const api = await startApi(SMALL_BUDGET);
    const key = tenant.customerKeys.Globex!;
    const routes = await registeredRoutes(db.pool, api.config);
    const withParams = routes.find(
      (route) =>
        route.base === 'external' &&
        route.auth === 'apiKey' &&
        route.method === 'get' &&
        route.request?.params &&
        !route.tenantKeyOnly,
    );
    expect(withParams, 'an external GET route with a path parameter').toBeDefined();
    const invalid = await api.external(withParams!.path.replace(/:[A-Za-z0-9_]+/g, 'not-a-uuid'), key);
    expect(invalid.status).toBeGreaterThanOrEqual(400);
    expect(invalid.status).toBeLessThan(500);
    expect(headersOf(invalid)).toMatchObject({ limit: '5', remaining: '4' });
    const ok = await api.external('/me', key);
    expect(headersOf(ok)).toMatchObject({ limit: '5', remaining: '3' });
    // No key, no budget to report.
    const missing = await api.external('/me', null);
    expect(missing.status).toBe(401);
    expect(missing.headers.get('ratelimit-limit')).toBeNull();
  });

  it.runIf(hasRedis)('two API processes with GANTRY_REDIS_URL share each key budget through Redis', async () => {
    const env = { ...SMALL_BUDGET, GANTRY_REDIS_URL: 'redis://127.0.0.1:6379' };
    const instances = [await startApi(env), await startApi(env)];
    const fresh = await createTenantWithKeys(db.pool, [], 'Redis tenant');
    await spendAcross(instances, fresh.tenantKey);
    // The PostgreSQL store saw none of it.
    const counted = await db.pool.query(`SELECT count(*)::int AS n FROM rate_limits WHERE key LIKE '%' || $1`, [
      fresh.tenantKey.slice(3, 15),
    ]);
    expect(counted.rows[0].n).toBe(0);
  });

  it('keeps serving and limiting per process when the Redis store is unreachable', async () => {
    const api = await startApi({ ...SMALL_BUDGET, GANTRY_REDIS_URL: 'redis://127.0.0.1:1' });
    const fresh = await createTenantWithKeys(db.pool, [], 'Insured tenant');
    await spendAcross([api], fresh.tenantKey);
  });
});

describe('the export budget', () => {
  it('every export route of the registry declares rateLimit: export', async () => {
    const routes = await registeredRoutes(db.pool, testConfig(db.url));
    const exports = routes.filter((route) => /\/export\.(csv|xlsx)$/.test(route.path));
    expect(exports.filter((route) => route.rateLimit !== 'export').map((route) => route.operationId)).toEqual([]);
  });

  it('an export route spends both budgets: the third export in a minute is 429 while other calls still pass', async () => {
    // A minimal app with the real authenticator, limiter and error middleware, so the
    // export budget is tested whatever export routes the features register.
    const config = testConfig(db.url, SMALL_BUDGET);
    const limiter = createRateLimiter(config.rateLimit, db.pool, silentLogger());
    const registry = new RouteRegistry().add(
      ...(['export', 'default'] as const).map((kind) =>
        defineRoute({
          method: 'get',
          base: 'external',
          path: `/probe/${kind}`,
          operationId: `probe_${kind}`,
          summary: 'probe',
          tags: ['probe'],
          auth: 'apiKey',
          rateLimit: kind,
          responses: { 200: { description: 'ok', contentType: 'text/csv' } },
          handler: async (ctx) => {
            ctx.type = 'text/csv';
            ctx.body = 'a\n';
          },
        }),
      ),
    );
    const koa = new Koa();
    koa.use(errorsAndAccessLog(silentLogger()));
    koa.use(
      registry
        .router({
          validateResponses: true,
          authenticate: createAuthenticator(db.pool, undefined),
          before: (route) => limiter.forRoute(route),
        })
        .routes(),
    );
    const server = http.createServer(koa.callback()).listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/external/v1`;
    const fresh = await createTenantWithKeys(db.pool, [], 'Export tenant');
    const call = (kind: string) => fetch(`${base}/probe/${kind}`, { headers: { 'X-API-Key': fresh.tenantKey } });
    try {
      const first = await call('export');
      expect(first.status).toBe(200);
      expect(headersOf(first)).toMatchObject({ limit: '2', remaining: '1', policy: '2;w=60' });
      expect((await call('export')).status).toBe(200);
      const third = await call('export');
      expect(third.status).toBe(429);
      expect(Number(third.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(headersOf(third)).toMatchObject({ limit: '2', remaining: '0' });
      // The request budget was spent three times, the export budget is what refused.
      const plain = await call('default');
      expect(plain.status).toBe(200);
      expect(headersOf(plain)).toMatchObject({ limit: '5', remaining: '1' });
    } finally {
      await new Promise((resolve) => server.close(resolve));
      await limiter.close();
    }
  });
});
