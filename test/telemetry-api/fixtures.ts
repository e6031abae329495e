import { randomUUID } from 'node:crypto';
import type { Pool } from '@gantry/db';
import { provisioning } from '@gantry/api';
import { recountCounters } from '../../services/ingest/src/storage/counters.ts';
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
  acmeKey: string;
  globexKey: string;
  assets: FleetAsset[];
  byName: Record<string, FleetAsset>;
}

/**
 * A tenant with keys for customers Acme and Globex, an asset type and, per entry, one
 * asset with one device: `[name, customerName]`.
 */
export async function createFleet(
  pool: Pool,
  entries: Array<[string, string]>,
  tenantName = 'Telemetry tenant',
): Promise<Fleet> {
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
    const device = await provisioning.createDevice(deps, tenant.tenantId, {
      deviceId,
      assetId: asset.id,
      displayName: `${name} tracker`,
    });
    assets.push({ id: asset.id, name, identifier, customerName, deviceUuid: device.id, deviceId });
  }
  return {
    ...tenant,
    acmeKey: tenant.customerKeys.Acme!,
    globexKey: tenant.customerKeys.Globex!,
    assets,
    byName: Object.fromEntries(assets.map((asset) => [asset.name, asset])),
  };
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
  heartbeat?: boolean;
}

/** The device_state row ingest would keep for the asset's device; each group's time is set when the group is given. */
export async function insertDeviceState(
  pool: Pool,
  tenantId: string,
  asset: FleetAsset,
  state: StateRow,
): Promise<void> {
  await pool.query(
    `INSERT INTO device_state (device_id, tenant_id, asset_id, first_seen_at, last_seen_at, last_message_at, last_message_type,
       latitude, longitude, position_ts, gps_valid, adc_on, adc_ts, hourmeter, hourmeter_ts, identifier, identifier_ts, ignition, ignition_ts,
       heartbeat_ts, battery_v)
     VALUES ($1, $2, $3, $4::timestamptz - interval '30 days', $4, $5::timestamptz, $6, $7, $8, CASE WHEN $7::float8 IS NOT NULL THEN $5::timestamptz END,
       $7::float8 IS NOT NULL, $9, CASE WHEN $9::boolean IS NOT NULL THEN $5::timestamptz END, $10, CASE WHEN $10::bigint IS NOT NULL THEN $5::timestamptz END,
       $11, CASE WHEN $11::text IS NOT NULL THEN $5::timestamptz END, $12, CASE WHEN $12::boolean IS NOT NULL THEN $5::timestamptz END,
       CASE WHEN $13 THEN $5::timestamptz END, CASE WHEN $13 THEN 12.6 END)
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
      state.heartbeat ?? false,
    ],
  );
}

export interface ReadingInput {
  type: string;
  ts: Date | string;
  receivedAt?: Date | string;
  latitude?: number;
  longitude?: number;
  gpsValid?: boolean;
}

/** Silver readings of the asset's device. */
export async function insertReadings(
  pool: Pool,
  tenantId: string,
  asset: FleetAsset,
  readings: ReadingInput[],
): Promise<void> {
  await pool.query(
    `INSERT INTO telemetry_readings (tenant_id, device_id, asset_id, type, ts, received_at, latitude, longitude, gps_valid, fix)
     SELECT $1, $2, $3, r.type, r.ts, r.received_at, r.latitude, r.longitude, r.gps_valid, r.gps_valid
       FROM unnest($4::text[], $5::timestamptz[], $6::timestamptz[], $7::float8[], $8::float8[], $9::boolean[])
            AS r(type, ts, received_at, latitude, longitude, gps_valid)`,
    [
      tenantId,
      asset.deviceUuid,
      asset.id,
      readings.map((reading) => reading.type),
      readings.map((reading) => reading.ts),
      readings.map((reading) => reading.receivedAt ?? reading.ts),
      readings.map((reading) => reading.latitude ?? (reading.type === 'gps' ? 51.95 : null)),
      readings.map((reading) => reading.longitude ?? (reading.type === 'gps' ? 4.05 : null)),
      readings.map((reading) => (reading.type === 'gps' ? (reading.gpsValid ?? true) : null)),
    ],
  );
  // Ingest counts what it writes in the same transaction; written here directly, the device is recounted.
  await recountCounters(pool, { deviceIds: [asset.deviceUuid] });
}

export interface MessageInput {
  type: string;
  receivedAt: Date;
  deviceTs?: Date | null;
  status?: 'accepted' | 'rejected' | 'duplicate' | 'partial';
  error?: string;
  errorDetail?: string;
  payload?: string;
}

/** Bronze messages of the asset's device, as ingest keeps them. */
export async function insertMessages(
  pool: Pool,
  tenantId: string,
  asset: FleetAsset,
  messages: MessageInput[],
): Promise<void> {
  await pool.query(
    `INSERT INTO device_messages (received_at, topic, device_key, device_id, tenant_id, asset_id, message_type, status, error, error_detail,
       device_ts, reading_count, payload_size, payload)
     SELECT m.received_at, 'gantry/v1/devices/' || $4 || '/' || m.type, $4, $2, $1, $3, m.type, m.status, m.error, m.error_detail,
            m.device_ts, CASE WHEN m.status = 'rejected' THEN 0 ELSE 1 END, octet_length(convert_to(m.payload, 'UTF8')), convert_to(m.payload, 'UTF8')
       FROM unnest($5::text[], $6::timestamptz[], $7::timestamptz[], $8::text[], $9::text[], $10::text[], $11::text[])
            AS m(type, received_at, device_ts, status, error, error_detail, payload)`,
    [
      tenantId,
      asset.deviceUuid,
      asset.id,
      asset.deviceId,
      messages.map((message) => message.type),
      messages.map((message) => message.receivedAt),
      messages.map((message) => (message.deviceTs === undefined ? message.receivedAt : message.deviceTs)),
      messages.map((message) => message.status ?? 'accepted'),
      messages.map((message) => message.error ?? null),
      messages.map((message) => message.errorDetail ?? null),
      messages.map((message) => message.payload ?? '{"ts":1}'),
    ],
  );
  await recountCounters(pool, { deviceIds: [asset.deviceUuid] });
}

export function minutesAgo(minutes: number): Date {
  return new Date(Date.now() - minutes * 60_000);
}

export interface UsageSessionInput {
  start: string;
  end: string;
  isOpen?: boolean;
  identifier?: string | null;
  distanceM?: number;
  loadedSeconds?: number;
  emptySeconds?: number;
  cycles?: number;
  hourmeterDelta?: number | null;
  startReason?: string;
  endReason?: string | null;
}

/** A usage session as derivation stores it; the numbers not given follow from the times. */
export async function insertUsageSession(
  pool: Pool,
  tenantId: string,
  asset: FleetAsset,
  input: UsageSessionInput,
): Promise<string> {
  const id = randomUUID();
  const duration = Math.round((Date.parse(input.end) - Date.parse(input.start)) / 1000);
  await pool.query(
    `INSERT INTO usage_sessions (id, tenant_id, device_id, asset_id, start_ts, end_ts, is_open, start_reason, end_reason, confidence,
       identifier, distance_m, duration_seconds, moving_seconds, stationary_running_seconds, stop_count, trip_count,
       imu_anomaly_count, imu_sample_count, hourmeter_delta, container_cycle_count, loaded_seconds, empty_seconds,
       loaded_distance_m, empty_distance_m)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 1.0, $10, $11, $12, $13, $14, 2, 3, 1, 40, $15, $16, $17, $18, $19, $20)`,
    [
      id,
      tenantId,
      asset.deviceUuid,
      asset.id,
      input.start,
      input.end,
      input.isOpen ?? false,
      input.startReason ?? 'ignition_on',
      input.endReason === undefined ? 'ignition_off' : input.endReason,
      input.identifier ?? null,
      input.distanceM ?? 1000,
      duration,
      Math.round(duration / 2),
      duration - Math.round(duration / 2),
      input.hourmeterDelta === undefined ? duration : input.hourmeterDelta,
      input.cycles ?? 4,
      input.loadedSeconds ?? Math.round(duration / 4),
      input.emptySeconds ?? duration - Math.round(duration / 4),
      (input.distanceM ?? 1000) * 0.25,
      (input.distanceM ?? 1000) * 0.75,
    ],
  );
  return id;
}

export interface IdentifierSessionInput {
  identifier: string;
  start: string;
  end: string;
  isOpen?: boolean;
  distanceM?: number;
  endReason?: string | null;
}

export async function insertIdentifierSession(
  pool: Pool,
  tenantId: string,
  asset: FleetAsset,
  input: IdentifierSessionInput,
): Promise<string> {
  const id = randomUUID();
  const duration = Math.round((Date.parse(input.end) - Date.parse(input.start)) / 1000);
  await pool.query(
    `INSERT INTO identifier_sessions (id, tenant_id, device_id, asset_id, identifier, start_ts, end_ts, is_open, end_reason, confidence,
       distance_m, duration_seconds, event_count, gps_point_count, stop_count, trip_count, container_cycle_count,
       loaded_seconds, empty_seconds, loaded_distance_m, empty_distance_m)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 1.0, $10, $11, 120, 100, 1, 2, 3, $12, $13, $14, $15)`,
    [
      id,
      tenantId,
      asset.deviceUuid,
      asset.id,
      input.identifier,
      input.start,
      input.end,
      input.isOpen ?? false,
      input.endReason === undefined ? 'logout' : input.endReason,
      input.distanceM ?? 500,
      duration,
      Math.round(duration / 2),
      duration - Math.round(duration / 2),
      (input.distanceM ?? 500) / 2,
      (input.distanceM ?? 500) / 2,
    ],
  );
  return id;
}

export async function createOperator(
  pool: Pool,
  tenantId: string,
  identifier: string,
  operatorName: string,
): Promise<void> {
  await provisioning.createOperator(provisioner(pool), tenantId, { identifier, operatorName });
}

/** A square zone around (lon, lat). */
export async function createGeofence(
  pool: Pool,
  tenantId: string,
  name: string,
  type: 'allowed' | 'forbidden',
  lon = 4.0,
  lat = 51.9,
) {
  return provisioning.createGeofence(provisioner(pool), tenantId, {
    name,
    type,
    geometry: {
      type: 'Polygon',
      coordinates: [
        [
          [lon, lat],
          [lon + 0.1, lat],
          [lon + 0.1, lat + 0.1],
          [lon, lat + 0.1],
          [lon, lat],
        ],
      ],
    },
  });
}

export async function insertMembership(
  pool: Pool,
  tenantId: string,
  geofenceId: string,
  asset: FleetAsset,
  inside: boolean,
): Promise<void> {
  await pool.query(
    `INSERT INTO geofence_memberships (tenant_id, geofence_id, asset_id, device_id, inside, changed_at) VALUES ($1, $2, $3, $4, $5, now())`,
    [tenantId, geofenceId, asset.id, asset.deviceUuid, inside],
  );
}

export interface AlertInput {
  createdAt: string;
  alertType?: 'forbidden_enter' | 'allowed_exit';
  resolvedAt?: string | null;
  status?: 'open' | 'acknowledged';
}

export async function insertAlert(
  pool: Pool,
  tenantId: string,
  geofenceId: string,
  asset: FleetAsset,
  input: AlertInput,
): Promise<string> {
  const id = randomUUID();
  await pool.query(
    `INSERT INTO geofence_alerts (id, tenant_id, geofence_id, asset_id, device_id, alert_type, status, is_active, created_at,
       acknowledged_at, resolved_at, latitude, longitude)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, CASE WHEN $7 = 'acknowledged' THEN $9::timestamptz END, $10, 51.95, 4.05)`,
    [
      id,
      tenantId,
      geofenceId,
      asset.id,
      asset.deviceUuid,
      input.alertType ?? 'forbidden_enter',
      input.status ?? 'open',
      !input.resolvedAt,
      input.createdAt,
      input.resolvedAt ?? null,
    ],
  );
  return id;
}

export interface SegmentInput {
  start: string;
  seconds: number;
  running?: boolean;
  moving?: boolean;
  loaded?: boolean;
  distanceM?: number;
  cycles?: number;
  hourmeterDelta?: number;
  hasData?: boolean;
}

/** Derived segments (never crossing an hour boundary, as derivation writes them). */
export async function insertSegments(
  pool: Pool,
  tenantId: string,
  asset: FleetAsset,
  segments: SegmentInput[],
): Promise<void> {
  for (const segment of segments) {
    const end = new Date(Date.parse(segment.start) + segment.seconds * 1000).toISOString();
    await pool.query(
      `INSERT INTO telemetry_segments (tenant_id, device_id, asset_id, start_ts, end_ts, has_data, running, moving, loaded, seconds,
         distance_m, hourmeter_delta, container_cycles, imu_anomalies, imu_samples, gps_points)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, 0, 0, 0)`,
      [
        tenantId,
        asset.deviceUuid,
        asset.id,
        segment.start,
        end,
        segment.hasData ?? true,
        segment.running ?? true,
        segment.moving ?? false,
        segment.loaded ?? false,
        segment.seconds,
        segment.distanceM ?? 0,
        segment.hourmeterDelta ?? 0,
        segment.cycles ?? 0,
      ],
    );
  }
}

export interface ServiceRequestInput {
  createdAt: string;
  status?: string;
  priority?: string;
  customerName?: string;
  asset?: FleetAsset | null;
}

let serviceRequestSeq = 0;

export async function insertServiceRequest(pool: Pool, tenantId: string, input: ServiceRequestInput): Promise<void> {
  serviceRequestSeq += 1;
  await pool.query(
    `INSERT INTO service_requests (tenant_id, seq, display_code, title, status, priority, customer_name, asset_id, created_at, updated_at)
     VALUES ($1, $2, $3, 'Leak', $4, $5, $6, $7, $8, $8)`,
    [
      tenantId,
      serviceRequestSeq,
      `SR-T${serviceRequestSeq}`,
      input.status ?? 'new',
      input.priority ?? 'normal',
      input.customerName ?? input.asset?.customerName ?? '',
      input.asset?.id ?? null,
      input.createdAt,
    ],
  );
}
