import type { Context, Middleware } from 'koa';
import { Redis } from 'ioredis';
import { Counter, register } from 'prom-client';
import {
  RateLimiterMemory,
  RateLimiterPostgres,
  RateLimiterRedis,
  RateLimiterRes,
  type RateLimiterAbstract,
} from 'rate-limiter-flexible';
import type { Config } from '@gantry/config';
import type { Pool } from '@gantry/db';
import type { Logger } from '@gantry/logger';
import { RateLimitedError } from '../errors.ts';
import type { ApiKeyAuth } from './auth.ts';
import type { RouteSpec } from './route.ts';

/**
 * One budget: `points` requests per fixed window of `windowSeconds`, per API key.
 * The default budget is sized so the sustained rate is perSecond and a client may spend
 * up to `burst` requests at once (defaults: 40 per 2 s = 20/s with bursts of 40).
 */
export interface RatePolicy {
  name: 'default' | 'export';
  points: number;
  windowSeconds: number;
}

export function ratePolicies(config: Config['rateLimit']): Record<RatePolicy['name'], RatePolicy> {
  const windowSeconds = Math.max(1, Math.round(config.burst / config.perSecond));
  return {
    default: {
      name: 'default',
      windowSeconds,
      // A burst below the sustained rate is raised to it, so the rate still holds.
      points: Math.max(config.burst, Math.ceil(config.perSecond * windowSeconds)),
    },
    export: { name: 'export', points: config.exportsPerMinute, windowSeconds: 60 },
  };
}

const rateLimited =
  (register.getSingleMetric('gantry_rate_limited_total') as Counter<'policy'> | undefined) ??
  new Counter({ name: 'gantry_rate_limited_total', help: 'Requests answered 429, by budget', labelNames: ['policy'] });

const storeErrors =
  (register.getSingleMetric('gantry_rate_limit_store_errors_total') as Counter<'store'> | undefined) ??
  new Counter({
    name: 'gantry_rate_limit_store_errors_total',
    help: 'Rate-limit store calls that failed and fell back to the per-process limiter',
    labelNames: ['store'],
  });

export interface RateLimiter {
  /** Where budgets are kept: postgres (default) or redis (GANTRY_REDIS_URL). */
  readonly store: 'postgres' | 'redis';
  readonly policies: Record<RatePolicy['name'], RatePolicy>;
  /** Middleware for one route (none for public and admin routes). */
  forRoute(route: RouteSpec): Middleware[];
  close(): Promise<void>;
}

interface Budget {
  policy: RatePolicy;
  limiter: RateLimiterAbstract;
}

/**
 * Per-key budgets shared by every API process: in PostgreSQL (the rate_limits table) or,
 * when GANTRY_REDIS_URL is set, in Redis. If the shared store fails, a per-process
 * in-memory budget of the same size takes over (rate-limiter-flexible's insurance
 * limiter) so an outage of the store neither blocks nor unthrottles the API.
 */
export function createRateLimiter(config: Config['rateLimit'], pool: Pool, logger: Logger): RateLimiter {
  const policies = ratePolicies(config);
  const store = config.redisUrl ? 'redis' : 'postgres';
  const redis = config.redisUrl
    ? new Redis(config.redisUrl, {
        // Fail fast to the insurance limiter instead of queueing while disconnected.
        enableOfflineQueue: false,
        maxRetriesPerRequest: 1,
        connectionName: 'gantry-api-rate-limit',
      })
    : null;
  redis?.on('error', (error: Error) => logger.warn({ err: error.message }, 'rate-limit store (redis) error'));

  const budget = (policy: RatePolicy): Budget => {
    const common = {
      keyPrefix: `gantry:${policy.name}`,
      points: policy.points,
      duration: policy.windowSeconds,
      insuranceLimiter: new RateLimiterMemory({ points: policy.points, duration: policy.windowSeconds }),
    };
    const limiter = redis
      ? new RateLimiterRedis({ ...common, storeClient: redis, rejectIfRedisNotReady: true })
      : new RateLimiterPostgres({
          ...common,
          storeClient: pool,
          storeType: 'pool',
          tableName: 'rate_limits',
          tableCreated: true,
        });
    return { policy, limiter };
  };
  const budgets = { default: budget(policies.default), export: budget(policies.export) };

  const consume = async (entry: Budget, key: string): Promise<{ res: RateLimiterRes; allowed: boolean }> => {
    try {
      return { res: await entry.limiter.consume(key), allowed: true };
    } catch (caught) {
      if (caught instanceof RateLimiterRes) return { res: caught, allowed: false };
      // Only reached when the insurance limiter failed as well.
      storeErrors.inc({ store });
      logger.warn(
        { err: caught instanceof Error ? caught.message : String(caught) },
        'rate-limit store failed; request allowed',
      );
      return { res: new RateLimiterRes(entry.policy.points, 0, 0, false), allowed: true };
    }
  };

  const middleware =
    (spend: Budget[]): Middleware =>
    async (ctx: Context, next) => {
      const auth = ctx.state.auth as ApiKeyAuth;
      let shown: { entry: Budget; res: RateLimiterRes } | null = null;
      for (const entry of spend) {
        const { res, allowed } = await consume(entry, auth.keyId);
        const headers = rateLimitHeaders(entry.policy, res);
        if (!allowed) {
          rateLimited.inc({ policy: entry.policy.name });
          throw new RateLimitedError(secondsUntil(res), headers);
        }
        // The budget closest to running out is the one a client needs to see.
        if (shown === null || res.remainingPoints <= shown.res.remainingPoints) shown = { entry, res };
      }
      if (shown) ctx.set(rateLimitHeaders(shown.entry.policy, shown.res));
      await next();
    };
  const standard = middleware([budgets.default]);
  const exports = middleware([budgets.default, budgets.export]);

  return {
    store,
    policies,
    forRoute(route) {
      if (route.auth !== 'apiKey') return [];
      return [route.rateLimit === 'export' ? exports : standard];
    },
    async close() {
      if (redis) await redis.quit().catch(() => redis.disconnect());
    },
  };
}

function secondsUntil(res: RateLimiterRes): number {
  return Math.max(1, Math.ceil(res.msBeforeNext / 1000));
}

/** RateLimit-* fields of the IETF draft (draft-ietf-httpapi-ratelimit-headers). */
export function rateLimitHeaders(policy: RatePolicy, res: RateLimiterRes): Record<string, string> {
  return {
    'RateLimit-Limit': String(policy.points),
    'RateLimit-Remaining': String(Math.max(0, res.remainingPoints)),
    'RateLimit-Reset': String(Math.max(0, Math.ceil(res.msBeforeNext / 1000))),
    'RateLimit-Policy': `${policy.points};w=${policy.windowSeconds}`,
  };
}
