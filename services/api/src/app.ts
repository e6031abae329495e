import Koa from 'koa';
import { koaBody } from 'koa-body';
import type { Config } from '@gantry/config';
import type { Outbox, Pool } from '@gantry/db';
import type { Logger } from '@gantry/logger';
import { createAuthenticator } from './http/auth.ts';
import { errorsAndAccessLog, requestId, securityHeaders } from './http/middleware.ts';
import { RouteRegistry } from './http/route.ts';
import { featureRoutes } from './features/index.ts';
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
}

export function createApp(deps: AppDeps): App {
  const registry = new RouteRegistry().add(...featureRoutes(deps));
  const koa = new Koa({ proxy: true });
  koa.silent = true;

  const router = registry.router({
    validateResponses: deps.validateResponses ?? false,
    authenticate: createAuthenticator(deps.pool, deps.config.http.adminToken),
  });

  koa.use(requestId());
  koa.use(errorsAndAccessLog(deps.logger.child({ component: 'http' })));
  koa.use(securityHeaders());
  koa.use(
    koaBody({
      json: true,
      jsonStrict: true,
      jsonLimit: deps.config.http.maxJsonBytes,
      multipart: false,
      urlencoded: false,
      text: false,
    }),
  );
  koa.use(router.routes());
  koa.use(router.allowedMethods());
  return { koa, registry };
}
