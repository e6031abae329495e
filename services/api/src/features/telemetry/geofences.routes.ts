import { assertAssetFilterVisible } from './assets.repository.ts';
import { z } from 'zod';
import type { AppDeps } from '../../app.ts';
import { requireApiKey } from '../../http/auth.ts';
import { resolveRange } from '../../http/query.ts';
import { defineRoute, type RouteSpec } from '../../http/route.ts';
import { notFound, readErrors, TELEMETRY_TAG } from './common.ts';
import { listGeofenceAlerts, listGeofences } from './geofences.repository.ts';
import { acknowledgeGeofenceAlert } from './geofences.service.ts';
import { alertStatusParam, assetIdFilter, booleanParam, paging, range, rangeRules, searchParam } from './params.ts';
import {
  TelemetryGeofenceAlert,
  TelemetryGeofenceAlertListResponse,
  TelemetryGeofenceListResponse,
} from './schemas.ts';
import { scopeOf } from './sql.ts';

export const geofenceAlertFilterQuery = z.object({
  ...range,
  assetId: assetIdFilter,
  geofenceId: z.uuid('must be a UUID').optional().meta({ description: 'Only alerts of this geofence' }),
  status: alertStatusParam,
  active: booleanParam.meta({ description: 'Only active (true) or resolved (false) alerts' }),
  alertType: z.enum(['forbidden_enter', 'allowed_exit'], 'must be forbidden_enter or allowed_exit').optional(),
  q: searchParam.meta({
    description: 'Case-insensitive search over asset name, identifier, display code and geofence name',
  }),
});

export function geofenceRoutes(deps: AppDeps): RouteSpec[] {
  return [
    defineRoute({
      method: 'get',
      base: 'external',
      path: '/telemetry/geofences',
      operationId: 'listTelemetryGeofences',
      summary: 'Geofences with their active alerts and the assets inside (counted over the assets the key may see)',
      tags: [TELEMETRY_TAG],
      auth: 'apiKey',
      request: {
        query: z.object({
          q: searchParam.meta({ description: 'Case-insensitive search over the geofence name' }),
          type: z.enum(['allowed', 'forbidden'], 'must be allowed or forbidden').optional(),
          enabled: booleanParam.meta({ description: 'Only enabled (true) or disabled (false) geofences' }),
        }),
      },
      responses: {
        200: { description: 'Every geofence of the tenant, by name', schema: TelemetryGeofenceListResponse },
        ...readErrors,
      },
      handler: async (ctx, { query, auth }) => {
        ctx.body = { items: await listGeofences(deps.pool, scopeOf(requireApiKey(auth)), query) };
      },
    }),
    defineRoute({
      method: 'get',
      base: 'external',
      path: '/telemetry/geofence-alerts',
      operationId: 'listTelemetryGeofenceAlerts',
      summary: 'Geofence alerts, newest first',
      description:
        'Alerts active at some time in [from, to) are included: opened before to and not resolved before from. Default range: the last 7 days; at most 366 days.',
      tags: [TELEMETRY_TAG],
      auth: 'apiKey',
      request: { query: geofenceAlertFilterQuery.extend(paging) },
      responses: {
        200: { description: 'One page of alerts', schema: TelemetryGeofenceAlertListResponse },
        ...readErrors,
        404: notFound,
      },
      handler: async (ctx, { query, auth }) => {
        const { limit, offset, from, to, ...filter } = query;
        const resolved = resolveRange({ from, to }, rangeRules.sessions);
        const scope = scopeOf(requireApiKey(auth));
        await assertAssetFilterVisible(deps.pool, scope, filter.assetId);
        const items = await listGeofenceAlerts(
          deps.pool,
          scope,
          { ...filter, from: resolved.from, to: resolved.to },
          limit,
          offset,
        );
        ctx.body = { items, paging: { limit, offset }, range: resolved.echo };
      },
    }),
    defineRoute({
      method: 'post',
      base: 'external',
      path: '/telemetry/geofence-alerts/:id/acknowledge',
      operationId: 'acknowledgeTelemetryGeofenceAlert',
      summary: 'Acknowledge a geofence alert',
      description:
        'Sets status acknowledged and acknowledgedAt, and sends telemetry.geofence_alert.acknowledged. Idempotent: acknowledging an acknowledged alert returns it unchanged and sends nothing.',
      tags: [TELEMETRY_TAG],
      auth: 'apiKey',
      request: { params: z.object({ id: z.uuid('must be a UUID') }) },
      responses: {
        200: { description: 'The acknowledged alert', schema: TelemetryGeofenceAlert },
        ...readErrors,
        404: notFound,
      },
      handler: async (ctx, { params, auth }) => {
        const key = requireApiKey(auth);
        ctx.body = await acknowledgeGeofenceAlert(deps, scopeOf(key), params.id, key.keyName);
      },
    }),
  ];
}
