import { z } from 'zod';
import type { AppDeps } from '../../../app.ts';
import { requireApiKey } from '../../../http/auth.ts';
import { defineRoute, type RouteSpec } from '../../../http/route.ts';
import { assertAssetFilterVisible } from '../assets.repository.ts';
import { notFound, readErrors, TELEMETRY_TAG } from '../common.ts';
import { deviceFilterQuery } from '../devices.routes.ts';
import { scopeOf } from '../sql.ts';
import { CELL_PIXELS, listDeviceClusters } from './repository.ts';
import { TelemetryDeviceClusterResponse } from './schemas.ts';

/** Leaflet's and most tile services' deepest zoom is 20 to 22. */
const MAX_ZOOM = 24;

const zoomParam = z.coerce
  .number({ error: `must be an integer between 0 and ${MAX_ZOOM}` })
  .int(`must be an integer between 0 and ${MAX_ZOOM}`)
  .min(0, `must be an integer between 0 and ${MAX_ZOOM}`)
  .max(MAX_ZOOM, `must be an integer between 0 and ${MAX_ZOOM}`)
  .meta({
    description: `Map zoom (web mercator, 256-pixel tiles: 2^zoom tiles across the world); cells are ${CELL_PIXELS} pixels square at it`,
    example: 14,
    // Required, which the document cannot tell by itself: coercion takes null (as 0).
    param: { required: true },
  });

/** What a map needs to draw a fleet of any size: its devices counted by grid cell of the view. */
export function deviceMapRoutes(deps: AppDeps): RouteSpec[] {
  return [
    defineRoute({
      method: 'get',
      base: 'external',
      path: '/telemetry/devices/clusters',
      operationId: 'listTelemetryDeviceClusters',
      summary: 'Devices with a position, counted by map grid cell: clusters for a map',
      description:
        `The devices of /telemetry/devices (same key scope and filters) whose last position lies in \`bbox\`, grouped by the web-mercator grid cell they lie in at \`zoom\` (cells of ${CELL_PIXELS}×${CELL_PIXELS} pixels, aligned on the tiles): per cell the number of devices, their mean position, the box around them and their count per online status, and the device itself when the cell holds one. ` +
        'The answer grows with the cells in view, not with the fleet: a map asks for the box it shows, then for the devices themselves (`/telemetry/devices?bbox=…`) once few are in view.',
      tags: [TELEMETRY_TAG],
      auth: 'apiKey',
      request: { query: deviceFilterQuery.extend({ zoom: zoomParam }) },
      responses: {
        200: {
          description: 'The cells holding devices, north to south, west to east',
          schema: TelemetryDeviceClusterResponse,
        },
        ...readErrors,
        404: notFound,
      },
      handler: async (ctx, { query, auth }) => {
        const { zoom, ...filter } = query;
        const scope = scopeOf(requireApiKey(auth));
        await assertAssetFilterVisible(deps.pool, scope, filter.assetId);
        ctx.body = await listDeviceClusters(deps.pool, scope, filter, zoom, deps.config.telemetryStatus);
      },
    }),
  ];
}
