import type { AppDeps } from '../../app.ts';
import type { RouteSpec } from '../../http/route.ts';
import { deviceRoutes } from './devices.routes.ts';

/** The spec's Telemetry part. */
export function telemetryRoutes(deps: AppDeps): RouteSpec[] {
  return [...deviceRoutes(deps)];
}
