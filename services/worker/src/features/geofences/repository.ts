import { zoneGeometrySchema } from '@gantry/contracts';
import type { PoolClient, Queryable } from '@gantry/db';
import type { GeofenceZone } from '@gantry/telemetry-core';

export interface TenantZone extends GeofenceZone {
  tenantId: string;
  name: string;
}

/** Enabled zones of the given tenants; a zone whose stored geometry fails validation is skipped. */
export async function loadEnabledZones(
  db: Queryable,
  tenantIds: string[],
): Promise<{ zones: TenantZone[]; invalid: string[] }> {
  const { rows } = await db.query<{
    id: string;
    tenant_id: string;
    name: string;
    type: 'allowed' | 'forbidden';
    geometry: unknown;
    bbox: number[];
  }>(
    `/* worker:loadEnabledZones */
     SELECT id, tenant_id, name, type, geometry, bbox FROM geofences WHERE enabled AND tenant_id = ANY ($1::uuid[])`,
    [tenantIds],
  );
  const zones: TenantZone[] = [];
  const invalid: string[] = [];
  for (const row of rows) {
    const geometry = zoneGeometrySchema.safeParse(row.geometry);
    if (!geometry.success) {
      invalid.push(row.id);
      continue;
    }
    zones.push({
      id: row.id,
      tenantId: row.tenant_id,
      name: row.name,
      type: row.type,
      geometry: geometry.data,
      bbox: row.bbox,
    });
  }
  return { zones, invalid };
}

export interface Membership {
  inside: boolean;
  changedAt: number;
  /** The device whose transition it follows. */
  deviceId: string;
}

export interface ActiveAlert {
  id: string;
  status: string;
  createdAt: Date;
  acknowledgedAt: Date | null;
  latitude: number | null;
  longitude: number | null;
}

const key = (geofenceId: string, assetId: string) => `${geofenceId}|${assetId}`;
export { key as membershipKey };

/** Memberships and active alerts of the given (zone, asset) pairs, locked for this transaction. */
export async function lockZoneStates(
  client: PoolClient,
  pairs: Array<{ geofenceId: string; assetId: string }>,
): Promise<{ memberships: Map<string, Membership>; alerts: Map<string, ActiveAlert> }> {
  const geofenceIds = pairs.map((p) => p.geofenceId);
  const assetIds = pairs.map((p) => p.assetId);
  const memberships = await client.query<{
    geofence_id: string;
    asset_id: string;
    inside: boolean;
    changed_at: Date;
    device_id: string;
  }>(
    `/* worker:lockMemberships */
     SELECT m.geofence_id, m.asset_id, m.inside, m.changed_at, m.device_id
       FROM geofence_memberships m JOIN unnest($1::uuid[], $2::uuid[]) AS p(geofence_id, asset_id)
         ON m.geofence_id = p.geofence_id AND m.asset_id = p.asset_id
      ORDER BY m.geofence_id, m.asset_id
        FOR UPDATE OF m`,
    [geofenceIds, assetIds],
  );
  const alerts = await client.query<{
    id: string;
    geofence_id: string;
    asset_id: string;
    status: string;
    created_at: Date;
    acknowledged_at: Date | null;
    latitude: number | null;
    longitude: number | null;
  }>(
    `/* worker:lockActiveAlerts */
     SELECT a.id, a.geofence_id, a.asset_id, a.status, a.created_at, a.acknowledged_at, a.latitude, a.longitude
       FROM geofence_alerts a JOIN unnest($1::uuid[], $2::uuid[]) AS p(geofence_id, asset_id)
         ON a.geofence_id = p.geofence_id AND a.asset_id = p.asset_id
      WHERE a.is_active
      ORDER BY a.id
        FOR UPDATE OF a`,
    [geofenceIds, assetIds],
  );
  return {
    memberships: new Map(
      memberships.rows.map((row) => [
        key(row.geofence_id, row.asset_id),
        { inside: row.inside, changedAt: row.changed_at.getTime(), deviceId: row.device_id },
      ]),
    ),
    alerts: new Map(
      alerts.rows.map((row) => [
        key(row.geofence_id, row.asset_id),
        {
          id: row.id,
          status: row.status,
          createdAt: row.created_at,
          acknowledgedAt: row.acknowledged_at,
          latitude: row.latitude,
          longitude: row.longitude,
        },
      ]),
    ),
  };
}

export async function saveMembership(
  client: PoolClient,
  row: { tenantId: string; geofenceId: string; assetId: string; deviceId: string; inside: boolean; changedAt: number },
): Promise<void> {
  await client.query(
    `/* worker:saveMembership */
     INSERT INTO geofence_memberships (tenant_id, geofence_id, asset_id, device_id, inside, changed_at)
     VALUES ($1, $2, $3, $4, $5, $6)
     ON CONFLICT (geofence_id, asset_id) DO UPDATE
       SET inside = EXCLUDED.inside, changed_at = EXCLUDED.changed_at, device_id = EXCLUDED.device_id`,
    [row.tenantId, row.geofenceId, row.assetId, row.deviceId, row.inside, new Date(row.changedAt)],
  );
}

export async function insertAlert(
  client: PoolClient,
  row: {
    tenantId: string;
    geofenceId: string;
    assetId: string;
    deviceId: string;
    alertType: string;
    createdAt: number;
    latitude: number;
    longitude: number;
  },
): Promise<string> {
  const { rows } = await client.query<{ id: string }>(
    `/* worker:openGeofenceAlert */
     INSERT INTO geofence_alerts (tenant_id, geofence_id, asset_id, device_id, alert_type, latitude, longitude, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
     RETURNING id`,
    [
      row.tenantId,
      row.geofenceId,
      row.assetId,
      row.deviceId,
      row.alertType,
      row.latitude,
      row.longitude,
      new Date(row.createdAt),
    ],
  );
  return rows[0]!.id;
}

export async function resolveAlert(client: PoolClient, id: string, resolvedAt: number): Promise<void> {
  await client.query(
    `/* worker:resolveGeofenceAlert */
     UPDATE geofence_alerts SET is_active = false, resolved_at = $2, updated_at = now() WHERE id = $1`,
    [id, new Date(resolvedAt)],
  );
}

export interface AssetRef {
  id: string;
  identifier: string;
  name: string;
  displayCode: string;
  assetType: string;
  location: string;
  customerName: string;
}

/** The spec's AssetRef of each asset (for webhook payloads); assets that no longer exist are absent. */
export async function loadAssetRefs(db: Queryable, assetIds: string[]): Promise<Map<string, AssetRef>> {
  const { rows } = await db.query<{
    id: string;
    identifier: string;
    name: string;
    display_code: string;
    asset_type: string;
    location: string;
    customer_name: string;
  }>(
    `/* worker:loadAssetRefs */
     SELECT a.id, a.identifier, a.name, a.display_code, coalesce(t.name, '') AS asset_type, a.location, a.customer_name
       FROM assets a LEFT JOIN asset_types t ON t.id = a.asset_type_id
      WHERE a.id = ANY ($1::uuid[])`,
    [assetIds],
  );
  return new Map(
    rows.map((row) => [
      row.id,
      {
        id: row.id,
        identifier: row.identifier,
        name: row.name,
        displayCode: row.display_code,
        assetType: row.asset_type,
        location: row.location,
        customerName: row.customer_name,
      },
    ]),
  );
}
