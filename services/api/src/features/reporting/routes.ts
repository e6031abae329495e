import type { AppDeps } from '../../app.ts';
import type { RouteSpec } from '../../http/route.ts';

/** The spec's Reporting part (issue: Reporting API). */
export function reportingRoutes(_deps: AppDeps): RouteSpec[] {
  return [];
}
