import type { AppDeps } from '../app.ts';
import type { RouteRegistry, RouteSpec } from '../http/route.ts';
import type { DatabasesReport } from '../read-routing.ts';
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

/**
 * The GET routes of a read-only feature, flagged to read a replica when one is
 * configured: their answers may lag the primary by the replica's lag (bounded), and no
 * caller needs them to see a write of someone else at once.
 */
function readsOnReplica(routes: RouteSpec[]): RouteSpec[] {
  return routes.map((route) => (route.method === 'get' ? { ...route, reads: 'replica' } : route));
}

/**
 * Every route of the API, feature by feature; each feature owns its folder. Telemetry and
 * reporting read a replica when there is one; service requests, webhooks, provisioning
 * and the rest always use the primary (their callers act on what they just wrote).
 */
export function featureRoutes(
  deps: AppDeps,
  registry: () => RouteRegistry,
  databases: () => DatabasesReport,
): RouteSpec[] {
  return [
    ...healthRoutes(deps.readiness, databases),
    ...meRoutes(),
    ...provisioningRoutes({ pool: deps.pool, outbox: deps.outbox }),
    ...unknownDeviceRoutes({ pool: deps.pool, outbox: deps.outbox }),
    ...readsOnReplica(reportingRoutes(deps)),
    ...readsOnReplica(telemetryRoutes(deps)),
    ...serviceRequestRoutes(deps),
    ...webhookRoutes(deps),
    ...docsRoutes(deps, registry),
    ...adminReferenceRoutes(),
    ...consoleRoutes(deps),
  ];
}
