import type { AppDeps } from '../../app.ts';
import type { RouteSpec } from '../../http/route.ts';
import { assetRoutes } from './assets.routes.ts';
import { deviceMapRoutes } from './device-map/routes.ts';
import { deviceRoutes } from './devices.routes.ts';
import { exportRoutes, listExports } from './exports.routes.ts';
import { geofenceRoutes } from './geofences.routes.ts';
import { metricRoutes } from './metrics.routes.ts';
import { sessionRoutes } from './sessions.routes.ts';

/** The spec's Telemetry part (see docs/telemetry-api.md). */
export function telemetryRoutes(deps: AppDeps): RouteSpec[] {
  return [
    ...assetRoutes(deps),
    ...deviceRoutes(deps),
    ...deviceMapRoutes(deps),
    ...sessionRoutes(deps),
    ...geofenceRoutes(deps),
    ...metricRoutes(deps),
    ...exportRoutes(deps, listExports(deps.config.telemetryStatus)),
  ];
}
