import type { AppDeps } from '../app.ts';
import type { RouteRegistry, RouteSpec } from '../http/route.ts';
import { consoleRoutes } from './console/routes.ts';
import { adminReferenceRoutes } from './docs/admin-reference.ts';
import { docsRoutes } from './docs/routes.ts';
import { healthRoutes } from './health/routes.ts';
import { meRoutes } from './me/routes.ts';
import { provisioningRoutes } from './provisioning/routes.ts';
import { unknownDeviceRoutes } from './provisioning/unknown-devices.routes.ts';
import { reportingRoutes } from './reporting/routes.ts';
import { serviceRequestRoutes } from './service-requests/routes.ts';
import { telemetryRoutes } from './telemetry/routes.ts';
import { webhookRoutes } from './webhooks/routes.ts';

/** Every route of the API, feature by feature; each feature owns its folder. */
export function featureRoutes(deps: AppDeps, registry: () => RouteRegistry): RouteSpec[] {
  return [
    ...healthRoutes(deps.readiness),
    ...meRoutes(),
    ...provisioningRoutes({ pool: deps.pool, outbox: deps.outbox }),
    ...unknownDeviceRoutes({ pool: deps.pool, outbox: deps.outbox }),
    ...reportingRoutes(deps),
    ...telemetryRoutes(deps),
    ...serviceRequestRoutes(deps),
    ...webhookRoutes(deps),
    ...docsRoutes(deps, registry),
    ...adminReferenceRoutes(),
    ...consoleRoutes(deps),
  ];
}
