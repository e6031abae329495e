import type { AppDeps } from '../../app.ts';
import type { RouteSpec } from '../../http/route.ts';

/** The spec's Webhooks part. */
export function webhookRoutes(_deps: AppDeps): RouteSpec[] {
  return [];
}
