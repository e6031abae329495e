import type { AppDeps } from '../../app.ts';
import type { RouteSpec } from '../../http/route.ts';

/** The spec's Telemetry part. */
export function telemetryRoutes(_deps: AppDeps): RouteSpec[] {
  return [];
}
