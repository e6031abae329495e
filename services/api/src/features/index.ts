import type { AppDeps } from '../app.ts';
import type { RouteSpec } from '../http/route.ts';
import { healthRoutes } from './health/routes.ts';
import { meRoutes } from './me/routes.ts';
import { provisioningRoutes } from './provisioning/routes.ts';

/** Every route of the API, feature by feature. */
export function featureRoutes(deps: AppDeps): RouteSpec[] {
  return [
    ...healthRoutes(deps.readiness),
    ...meRoutes(),
    ...provisioningRoutes({ pool: deps.pool, outbox: deps.outbox }),
  ];
}
