import Koa from 'koa';
import type { Config } from '@gantry/config';
import type { Outbox, Pool } from '@gantry/db';
import type { Logger } from '@gantry/logger';
import { createAuthenticator } from './http/auth.ts';
import { requestBody } from './http/body.ts';
import { errorsAndAccessLog, requestId, securityHeaders } from './http/middleware.ts';
import { createRateLimiter } from './http/rate-limit.ts';
import { largeBodyLimits, methodNotAllowed, RouteRegistry } from './http/route.ts';
import { featureRoutes } from './features/index.ts';
import { createReadRouting } from './read-routing.ts';
import type { ReadinessCheck } from './features/health/routes.ts';

export interface AppDeps {
  config: Config;
  pool: Pool;
  logger: Logger;
  outbox: Outbox;
  /** Named dependency probes for /readyz (database, broker…). */
  readiness: Record<string, ReadinessCheck>;
  /** Check every JSON response against its declared schema (tests). */
  validateResponses?: boolean;
}

export interface App {
  koa: Koa;
  registry: RouteRegistry;
  /** Releases what the app holds open (the rate-limit store connection). */
  close(): Promise<void>;
}

export function createApp(deps: AppDeps): App {
  const reads = createReadRouting({
    primary: deps.pool,
    replica: deps.config.readReplica,
    poolSize: deps.config.dbPoolSize,
    logger: deps.logger.child({ component: 'read-routing' }),
  });
  // Features query through the routing pool; key checks and rate limits keep the primary.
  const registry: RouteRegistry = new RouteRegistry().add(
    ...featureRoutes({ ...deps, pool: reads.pool }, () => registry, reads.describe),
  );
  const koa = new Koa({ proxy: true });
  koa.silent = true;

  const rateLimiter = createRateLimiter(
    deps.config.rateLimit,
    deps.pool,
    deps.logger.child({ component: 'rate-limit' }),
  );
  const router = registry.router({
    validateResponses: deps.validateResponses ?? false,
    authenticate: createAuthenticator(deps.pool, deps.config.http.adminToken),
    before: (route) => [...rateLimiter.forRoute(route), ...reads.forRoute(route)],
  });

  koa.use(requestId());
  koa.use(errorsAndAccessLog(deps.logger.child({ component: 'http' })));
  koa.use(securityHeaders());
  koa.use(requestBody({ maxJsonBytes: deps.config.http.maxJsonBytes, largeBodies: largeBodyLimits(registry.routes) }));
  koa.use(methodNotAllowed());
  koa.use(router.routes());
  return { koa, registry, close: () => Promise.all([rateLimiter.close(), reads.close()]).then(() => undefined) };
}
