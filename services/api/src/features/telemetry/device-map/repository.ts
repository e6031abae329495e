import type { Queryable } from '@gantry/db';
import { deviceConditions, type DeviceFilter } from '../devices.repository.ts';
import type { TelemetryDeviceBody } from '../schemas.ts';
import { SqlParams, type TelemetryScope } from '../sql.ts';
import { onlineStatusSql, type StatusRules } from '../status.ts';
import { WORLD, type Bbox } from './bbox.ts';
import type { TelemetryDeviceClusterBody } from './schemas.ts';

/** A cell is this many pixels square at the zoom asked (web mercator, 256-pixel tiles): a cluster marker's room. */
export const CELL_PIXELS = 64;

/** Web mercator's latitude limit: the square world of the tiles. */
const MAX_MERCATOR_LATITUDE = 85.0511287798066;

/** Cells across the world at a zoom: 2^zoom tiles of 256 pixels, cut into cells of CELL_PIXELS. */
export function cellsAcross(zoom: number): number {
  return 2 ** zoom * (256 / CELL_PIXELS);
}

interface CellRow {
  count: number;
  latitude: number;
  longitude: number;
  minLon: number;
  minLat: number;
  maxLon: number;
  maxLat: number;
  online: number;
  silent: number;
  offline: number;
  unknown: number;
  disabled: number;
  id: string | null;
  deviceId: string | null;
  assetId: string | null;
  assetName: string | null;
  assetDisplayCode: string | null;
  onlineStatus: TelemetryDeviceBody['onlineStatus'] | null;
}

/**
 * The devices in scope (and the filter) with a position in the box, grouped by the web-mercator grid cell
 * of the zoom they lie in: one pass over the devices in scope (their state row holds the
 * last position), never over readings. A cell's device fields are its devices' minimum,
 * so the device itself when it is alone.
 */
export function clusterStatement(
  scope: TelemetryScope,
  filter: DeviceFilter & { bbox: Bbox },
  zoom: number,
  rules: StatusRules,
): { text: string; values: unknown[] } {
  const params = new SqlParams();
  const conditions = deviceConditions(params, scope, filter, rules);
  const n = params.add(cellsAcross(zoom), 'float8');
  const limit = params.add(MAX_MERCATOR_LATITUDE, 'float8');
  const byStatus = ['online', 'silent', 'offline', 'unknown', 'disabled']
    .map((status) => `count(*) FILTER (WHERE online_status = '${status}')::int AS "${status}"`)
    .join(',\n            ');
  return {
    text: `/* api:listTelemetryDeviceClusters */
     WITH placed AS (
       SELECT d.id, d.device_id, a.id AS asset_id, a.name, a.display_code, ${onlineStatusSql(rules)} AS online_status,
              s.latitude, s.longitude,
              least(floor((s.longitude + 180) / 360 * ${n}), ${n} - 1) AS cx,
              least(floor((1 - ln(tan(m.phi) + 1 / cos(m.phi)) / pi()) / 2 * ${n}), ${n} - 1) AS cy
         FROM devices d
         JOIN assets a ON a.id = d.asset_id
         JOIN device_state s ON s.device_id = d.id
        CROSS JOIN LATERAL (SELECT radians(greatest(least(s.latitude, ${limit}), -${limit})) AS phi) m
        WHERE ${conditions.join(' AND ')}
     )
     SELECT count(*)::int AS count, avg(latitude) AS latitude, avg(longitude) AS longitude,
            min(longitude) AS "minLon", min(latitude) AS "minLat", max(longitude) AS "maxLon", max(latitude) AS "maxLat",
            ${byStatus},
            CASE WHEN count(*) = 1 THEN min(id::text) END AS id,
            CASE WHEN count(*) = 1 THEN min(device_id) END AS "deviceId",
            CASE WHEN count(*) = 1 THEN min(asset_id::text) END AS "assetId",
            CASE WHEN count(*) = 1 THEN min(name) END AS "assetName",
            CASE WHEN count(*) = 1 THEN min(display_code) END AS "assetDisplayCode",
            CASE WHEN count(*) = 1 THEN min(online_status) END AS "onlineStatus"
       FROM placed
      GROUP BY cy, cx
      ORDER BY cy, cx`,
    values: params.values,
  };
}

function toCluster(row: CellRow): TelemetryDeviceClusterBody {
  return {
    count: row.count,
    latitude: row.latitude,
    longitude: row.longitude,
    bbox: [row.minLon, row.minLat, row.maxLon, row.maxLat],
    onlineStatusCounts: {
      online: row.online,
      silent: row.silent,
      offline: row.offline,
      unknown: row.unknown,
      disabled: row.disabled,
    },
    device:
      row.id === null
        ? null
        : {
            id: row.id,
            deviceId: row.deviceId!,
            assetId: row.assetId!,
            assetName: row.assetName!,
            assetDisplayCode: row.assetDisplayCode!,
            onlineStatus: row.onlineStatus!,
          },
  };
}

/**
 * The cells of the box (the whole world without one) at the zoom, with their total and
 * the box around every device counted.
 */
export async function listDeviceClusters(
  db: Queryable,
  scope: TelemetryScope,
  filter: DeviceFilter,
  zoom: number,
  rules: StatusRules,
) {
  const bbox = filter.bbox ?? WORLD;
  const { text, values } = clusterStatement(scope, { ...filter, bbox }, zoom, rules);
  const { rows } = await db.query<CellRow>(text, values);
  let extent: Bbox | null = null;
  for (const row of rows)
    extent = extent
      ? [
          Math.min(extent[0], row.minLon),
          Math.min(extent[1], row.minLat),
          Math.max(extent[2], row.maxLon),
          Math.max(extent[3], row.maxLat),
        ]
      : [row.minLon, row.minLat, row.maxLon, row.maxLat];
  return {
    bbox,
    zoom,
    cellPixels: CELL_PIXELS,
    total: rows.reduce((sum, row) => sum + row.count, 0),
    extent,
    cells: rows.map(toCluster),
  };
}
