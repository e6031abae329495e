import type { Queryable } from '@gantry/db';
import { readReadingTotals, wholeHours } from './counts.repository.ts';
import { assetScopeCondition, scopeBlock, SqlParams, type TelemetryScope } from './sql.ts';

const WEEK_MS = 7 * 86_400_000;

/**
 * What telemetry the key's assets have. A capability is enabled once a device of an
 * asset in scope has ever reported that kind of reading (the latest-state timestamps),
 * so a fleet out of coverage for a week keeps its capabilities; `messageTypesLast7d`
 * counts the valid readings per type of the last 7 days — the whole hours covering
 * them, the counters' grain (a batch upload counts by the types inside it; every type
 * is listed). Geofence alerts need telemetry and at least one enabled geofence.
 */
export async function readCapabilities(db: Queryable, scope: TelemetryScope) {
  const params = new SqlParams();
  const assetScope = assetScopeCondition(params, scope);
  const tenant = params.add(scope.tenantId, 'uuid');
  const { rows } = await db.query(
    `/* api:telemetryCapabilities */
     WITH scoped AS (SELECT a.id FROM assets a WHERE ${assetScope}),
          scoped_devices AS (SELECT d.id, d.asset_id FROM devices d JOIN scoped ON scoped.id = d.asset_id)
     SELECT (SELECT count(*) FROM scoped) AS total_assets,
            (SELECT count(DISTINCT asset_id) FROM scoped_devices) AS telemetry_assets,
            (SELECT coalesce(array_agg(id), '{}') FROM scoped_devices) AS device_ids,
            bool_or(s.position_ts IS NOT NULL) AS gps,
            bool_or(s.heartbeat_ts IS NOT NULL) AS heartbeat,
            bool_or(s.hourmeter_ts IS NOT NULL) AS hourmeter,
            bool_or(s.identifier_ts IS NOT NULL) AS identifier,
            bool_or(s.imu_ts IS NOT NULL) AS imu,
            bool_or(s.adc_ts IS NOT NULL) AS adcin,
            EXISTS (SELECT 1 FROM geofences g WHERE g.tenant_id = ${tenant} AND g.enabled) AS geofences
       FROM scoped_devices sd LEFT JOIN device_state s ON s.device_id = sd.id`,
    params.values,
  );
  const row = rows[0] as Record<string, unknown>;
  const deviceIds = row.device_ids as string[];
  const now = Date.now();
  // Every reading type is listed, 0 when none came, so clients see stable keys.
  const messageTypesLast7d: Record<string, number> = await readReadingTotals(db, {
    tenantId: scope.tenantId,
    devices: deviceIds,
    ...wholeHours({ from: new Date(now - WEEK_MS), to: new Date(now) }),
  });
  const telemetryAssets = row.telemetry_assets as number;
  const telemetryEnabled = telemetryAssets > 0;
  return {
    telemetryEnabled,
    gpsEnabled: row.gps === true,
    heartbeatEnabled: row.heartbeat === true,
    hourmeterEnabled: row.hourmeter === true,
    identifierEnabled: row.identifier === true,
    imuEnabled: row.imu === true,
    containerWorkStateEnabled: row.adcin === true,
    geofenceAlertsEnabled: telemetryEnabled && row.geofences === true,
    telemetryAssets,
    totalAssets: row.total_assets as number,
    messageTypesLast7d,
    scope: scopeBlock(scope),
  };
}
