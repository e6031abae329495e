import type { Queryable } from '@gantry/db';
import { iso } from '../../http/common-schemas.ts';
import { adcStateSql, onlineStatusSql, workStateSql, type StatusRules } from './status.ts';
import type { Row } from './sql.ts';

/**
 * The latest known state of an asset (TelemetryAssetStateResponse.state, free-form in the
 * spec). The asset's most recently heard device speaks for it; every device is listed
 * under `devices`. Zone membership and active alerts come from derivation. (`s.*` comes
 * first so the device's text id wins over device_state's uuid column of the same name.)
 */
export async function readAssetState(
  db: Queryable,
  tenantId: string,
  assetId: string,
  rules: StatusRules,
): Promise<Record<string, unknown>> {
  const devices = await db.query(
    `/* api:readAssetStateDevices */
     SELECT s.*, d.device_id, d.display_name, d.enabled, ${onlineStatusSql(rules)} AS online_status, ${adcStateSql} AS adc_state,
            ${workStateSql} AS work_state, o.operator_name
       FROM devices d
       LEFT JOIN device_state s ON s.device_id = d.id
       LEFT JOIN operators o ON o.tenant_id = d.tenant_id AND o.identifier = s.identifier
      WHERE d.tenant_id = $1 AND d.asset_id = $2
      ORDER BY s.last_seen_at DESC NULLS LAST, d.device_id`,
    [tenantId, assetId],
  );
  const zones = await db.query(
    `/* api:readAssetStateZones */
     SELECT g.id, g.name, g.type, m.changed_at
       FROM geofence_memberships m JOIN geofences g ON g.id = m.geofence_id
      WHERE m.tenant_id = $1 AND m.asset_id = $2 AND m.inside
      ORDER BY g.name, g.id`,
    [tenantId, assetId],
  );
  const alerts = await db.query<{ active: number }>(
    `/* api:readAssetStateAlerts */
     SELECT count(*) AS active FROM geofence_alerts WHERE tenant_id = $1 AND asset_id = $2 AND is_active`,
    [tenantId, assetId],
  );
  const primary = devices.rows[0] as Row | undefined;
  const base = {
    geofences: zones.rows.map((zone: Row) => ({
      id: zone.id,
      name: zone.name,
      type: zone.type,
      enteredAt: iso(zone.changed_at as Date),
    })),
    activeAlertCount: alerts.rows[0]?.active ?? 0,
    devices: devices.rows.map((device: Row) => ({
      deviceId: device.device_id,
      displayName: device.display_name,
      enabled: device.enabled,
      onlineStatus: device.online_status,
      lastSeenAt: iso(device.last_seen_at as Date | null),
    })),
  };
  if (!primary) {
    return { telemetry: false, deviceId: null, onlineStatus: 'unknown', lastSeenAt: null, ...base };
  }
  const has = (column: string) => primary[column] !== null && primary[column] !== undefined;
  return {
    telemetry: true,
    deviceId: primary.device_id,
    enabled: primary.enabled,
    onlineStatus: primary.online_status,
    firstSeenAt: iso(primary.first_seen_at as Date | null),
    lastSeenAt: iso(primary.last_seen_at as Date | null),
    lastMessageAt: iso(primary.last_message_at as Date | null),
    lastMessageType: primary.last_message_type ?? null,
    position: has('position_ts')
      ? {
          latitude: primary.latitude,
          longitude: primary.longitude,
          speedKmh: primary.speed_kmh,
          heading: primary.heading,
          gpsValid: primary.gps_valid,
          ts: iso(primary.position_ts as Date),
        }
      : null,
    ignition: primary.ignition ?? null,
    ignitionTs: iso(primary.ignition_ts as Date | null),
    adcState: primary.adc_state,
    workState: primary.work_state,
    containerAttached: primary.adc_on ?? null,
    spreaderLocked: primary.adc_on ?? null,
    adcRaw: primary.adc_raw ?? null,
    adcTs: iso(primary.adc_ts as Date | null),
    hourmeterValue: primary.hourmeter ?? null,
    hourmeterTs: iso(primary.hourmeter_ts as Date | null),
    identifier: primary.identifier ?? null,
    identifierEvent: primary.identifier_event ?? null,
    operatorName: primary.operator_name ?? null,
    identifierTs: iso(primary.identifier_ts as Date | null),
    heartbeat: has('heartbeat_ts')
      ? {
          batteryV: primary.battery_v,
          rssi: primary.rssi,
          firmware: primary.firmware,
          uptimeS: primary.uptime_s,
          ts: iso(primary.heartbeat_ts as Date),
        }
      : null,
    imu: has('imu_ts') ? { peakG: primary.imu_peak_g, ts: iso(primary.imu_ts as Date) } : null,
    ...base,
  };
}
