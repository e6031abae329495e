import { randomUUID } from 'node:crypto';
import type { Pool } from '@gantry/db';
import { provisioning } from '@gantry/api';
import { createTenantWithKeys, provisioner, type TenantFixture } from '../support/fixtures.ts';

// Telemetry test data written straight into the tables ingest and derivation fill, so
// each API answer can be checked against numbers chosen here.

export interface FleetAsset {
  id: string;
  name: string;
  identifier: string;
  customerName: string;
  /** devices.id (uuid) and devices.device_id (the MQTT id). */
  deviceUuid: string;
  deviceId: string;
}

export interface Fleet extends TenantFixture {
  assets: FleetAsset[];
  byName: Record<string, FleetAsset>;
}

/**
 * A tenant with keys for customers Acme and Globex, an asset type and, per entry, one
 * asset with one device: `[name, customerName]`.
 */
export async function createFleet(pool: Pool, entries: Array<[string, string]>, tenantName = 'Telemetry tenant'): Promise<Fleet> {
  const tenant = await createTenantWithKeys(pool, ['Acme', 'Globex'], tenantName);
  const deps = provisioner(pool);
  await provisioning.createAssetType(deps, tenant.tenantId, { name: 'Straddle carrier' });
  const assets: FleetAsset[] = [];
  for (const [name, customerName] of entries) {
    const identifier = name.toUpperCase().replace(/\s+/g, '-');
    const asset = await provisioning.createAsset(deps, tenant.tenantId, {
      name,
      identifier,
      assetType: 'Straddle carrier',
      customerName,
      location: 'Yard 1',
    });
    const deviceId = `dev-${identifier.toLowerCase()}-${randomUUID().slice(0, 6)}`;
    const device = await provisioning.createDevice(deps, tenant.tenantId, { deviceId, assetId: asset.id, displayName: `${name} tracker` });
    assets.push({ id: asset.id, name, identifier, customerName, deviceUuid: device.id, deviceId });
  }
  return { ...tenant, assets, byName: Object.fromEntries(assets.map((asset) => [asset.name, asset])) };
}

export interface StateRow {
  lastSeenAt: Date;
  lastMessageAt?: Date;
  lastMessageType?: string;
  latitude?: number;
  longitude?: number;
  adcOn?: boolean | null;
  ignition?: boolean | null;
  hourmeter?: number;
  identifier?: string;
}

/** The device_state row ingest would keep for the asset's device. */
export async function insertDeviceState(pool: Pool, tenantId: string, asset: FleetAsset, state: StateRow): Promise<void> {
  await pool.query(
    `INSERT INTO device_state (device_id, tenant_id, asset_id, first_seen_at, last_seen_at, last_message_at, last_message_type,
       latitude, longitude, position_ts, gps_valid, adc_on, adc_ts, hourmeter, hourmeter_ts, identifier, identifier_ts, ignition, ignition_ts,
       heartbeat_ts, battery_v)
     VALUES ($1, $2, $3, $4::timestamptz - interval '30 days', $4, $5, $6, $7, $8, $5, $7::float8 IS NOT NULL, $9, $5, $10, $5, $11, $5, $12, $5, $5, 12.6)
     ON CONFLICT (device_id) DO UPDATE SET last_seen_at = EXCLUDED.last_seen_at`,
    [
      asset.deviceUuid,
      tenantId,
      asset.id,
      state.lastSeenAt,
      state.lastMessageAt ?? state.lastSeenAt,
      state.lastMessageType ?? 'gps',
      state.latitude ?? null,
      state.longitude ?? null,
      state.adcOn ?? null,
      state.hourmeter ?? null,
      state.identifier ?? null,
      state.ignition ?? null,
    ],
  );
}

export function minutesAgo(minutes: number): Date {
  return new Date(Date.now() - minutes * 60_000);
}
