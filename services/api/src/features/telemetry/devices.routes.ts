import { assertAssetFilterVisible } from './assets.repository.ts';
import { z } from 'zod';
import type { AppDeps } from '../../app.ts';
import { requireApiKey } from '../../http/auth.ts';
import { defineRoute, type RouteSpec } from '../../http/route.ts';
import { notFound, readErrors, TELEMETRY_TAG } from './common.ts';
import { bboxParam } from './device-map/bbox.ts';
import { countDevices, listDevices } from './devices.repository.ts';
import { assetIdFilter, booleanParam, onlineStatusParam, paging, searchParam } from './params.ts';
import { TelemetryDeviceListResponse } from './schemas.ts';
import { scopeOf } from './sql.ts';

export const deviceFilterQuery = z.object({
  assetId: assetIdFilter,
  q: searchParam.meta({
    description: 'Case-insensitive search over device id, display name, asset name, identifier and display code',
  }),
  status: onlineStatusParam,
  enabled: booleanParam.meta({ description: 'Only enabled (true) or disabled (false) devices' }),
  bbox: bboxParam,
});

export function deviceRoutes(deps: AppDeps): RouteSpec[] {
  return [
    defineRoute({
      method: 'get',
      base: 'external',
      path: '/telemetry/devices',
      operationId: 'listTelemetryDevices',
      summary: 'Telemetry devices with their latest state and online status',
      tags: [TELEMETRY_TAG],
      auth: 'apiKey',
      request: {
        query: deviceFilterQuery.extend({
          ...paging,
          total: booleanParam.meta({
            description: 'true: `paging.total` counts the devices matching the filters over every page',
          }),
        }),
      },
      responses: {
        200: { description: 'One page of devices, ordered by device id', schema: TelemetryDeviceListResponse },
        ...readErrors,
        404: notFound,
      },
      handler: async (ctx, { query, auth }) => {
        const { limit, offset, total, ...filter } = query;
        const scope = scopeOf(requireApiKey(auth));
        await assertAssetFilterVisible(deps.pool, scope, filter.assetId);
        const rules = deps.config.telemetryStatus;
        const [items, count] = await Promise.all([
          listDevices(deps.pool, scope, filter, rules, limit, offset),
          total ? countDevices(deps.pool, scope, filter, rules) : undefined,
        ]);
        ctx.body = { items, paging: { limit, offset, ...(count === undefined ? {} : { total: count }) } };
      },
    }),
  ];
}
