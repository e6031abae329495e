import type { AppDeps } from '../../app.ts';
import type { RouteSpec } from '../../http/route.ts';

/** The spec's Service requests part. */
export function serviceRequestRoutes(_deps: AppDeps): RouteSpec[] {
  return [];
}
