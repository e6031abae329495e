import { loadConfig, type Config } from '@gantry/config';
import { createOutbox, markDirtySql, type Pool, type StorageMode } from '@gantry/db';
import { silentLogger } from '@gantry/logger';
import { provisioning } from '@gantry/api';
import type { SimulatedMessage } from '@gantry/simulator';
import { deriveDirtyDevices, type DerivationDeps } from '../../services/worker/src/features/derivation/service.ts';
import { refreshGold, type GoldDeps } from '../../services/worker/src/features/gold/refresh.ts';
import { applyPositionDeltas, PositionTally } from '../../services/ingest/src/storage/positions.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';

export interface FixtureDevice {
  /** devices.id */
  id: string;
  /** The id in MQTT topics. */
  deviceId: string;
  assetId: string;
}

export interface DerivationFixture {
  db: TestDatabase;
  pool: Pool;
  mode: StorageMode;
  tenantId: string;
  devices: FixtureDevice[];
  config: Config;
  derivationDeps: DerivationDeps;
  goldDeps: GoldDeps;
  drop(): Promise<void>;
}

export function derivationConfig(databaseUrl: string, env: Record<string, string> = {}): Config {
  return loadConfig({
    GANTRY_DATABASE_URL: databaseUrl,
    GANTRY_LOG_LEVEL: 'silent',
    GANTRY_LOG_FORMAT: 'json',
    ...env,
  });
}

/** A tenant with `count` assets (customers A and B alternately) and one device each. */
export async function createDerivationFixture(
  label: string,
  mode: StorageMode,
  count = 1,
  env: Record<string, string> = {},
): Promise<DerivationFixture> {
  const db = await createTestDatabase(label, mode);
  const deps = { pool: db.pool, outbox: createOutbox({ maxAttempts: 3 }) };
  const tenant = await provisioning.createTenant(deps, { name: `Derivation ${label}` });
  const devices: FixtureDevice[] = [];
  for (let index = 0; index < count; index += 1) {
    const asset = await provisioning.createAsset(deps, tenant.id, {
      name: `Straddle carrier ${index + 1}`,
      identifier: `SC-${index + 1}`,
      customerName: index % 2 === 0 ? 'Customer A' : 'Customer B',
    });
    const deviceId = `dev-${label}-${index + 1}`.slice(0, 64);
    const device = await provisioning.createDevice(deps, tenant.id, { deviceId, assetId: asset.id });
    devices.push({ id: device.id, deviceId, assetId: asset.id });
  }
  const config = derivationConfig(db.url, env);
  const logger = silentLogger();
  return {
    db,
    pool: db.pool,
    mode,
    tenantId: tenant.id,
    devices,
    config,
    derivationDeps: { pool: db.pool, outbox: deps.outbox, logger, config },
    goldDeps: { pool: db.pool, logger, storageMode: mode },
    drop: () => db.drop(),
  };
}

const num = (value: unknown): number | null => (typeof value === 'number' && Number.isFinite(value) ? value : null);

/** A simulated message as the silver row ingest stores for it (readings only, no batches). */
function silverRow(fixture: DerivationFixture, message: SimulatedMessage) {
  const device = fixture.devices.find((d) => d.deviceId === message.deviceId);
  if (!device) throw new Error(`no fixture device ${message.deviceId}`);
  const p = message.payload as Record<string, unknown>;
  const lat = num(p.lat);
  const lon = num(p.lon);
  const hdop = num(p.hdop);
  const gpsValid =
    message.type === 'gps'
      ? p.fix !== false && (hdop === null || hdop <= 5) && lat !== null && lon !== null && !(lat === 0 && lon === 0)
      : null;
  return [
    fixture.tenantId,
    device.id,
    device.assetId,
    message.type,
    new Date(message.ts).toISOString(),
    typeof p.ignition === 'boolean' ? p.ignition : null,
    lat,
    lon,
    num(p.speedKmh),
    num(p.hdop),
    typeof p.fix === 'boolean' ? p.fix : message.type === 'gps' ? true : null,
    gpsValid,
    message.type === 'adcin' ? p.state === 'on' : null,
    message.type === 'hourmeter' ? num(p.value) : null,
    num(p.peakG),
    num(p.samples),
    typeof p.identifier === 'string' ? p.identifier : null,
    message.type === 'identifier' ? ((p.event as string | undefined) ?? 'login') : null,
  ] as const;
}

/**
 * Stores messages as ingest does: silver rows (duplicates by (device, type, ts)
 * dropped), positions gold moved by the new valid fixes (PostgreSQL mode) and the device
 * marked dirty from its earliest new reading, in one transaction. Returns how many
 * readings were new.
 */
export async function storeReadings(
  fixture: DerivationFixture,
  messages: SimulatedMessage[],
  receivedAt = new Date(),
): Promise<number> {
  if (messages.length === 0) return 0;
  const rows = messages.map((message) => silverRow(fixture, message));
  const column = (index: number) => rows.map((row) => row[index]);
  const client = await fixture.pool.connect();
  try {
    await client.query('BEGIN');
    const inserted = await client.query<{
      tenant_id: string;
      device_id: string;
      asset_id: string | null;
      type: string;
      ts: Date;
      gps_valid: boolean | null;
      latitude: number | null;
      longitude: number | null;
    }>(
      `INSERT INTO telemetry_readings (tenant_id, device_id, asset_id, type, ts, received_at, ignition, latitude, longitude,
         speed_kmh, hdop, fix, gps_valid, adc_on, hourmeter, peak_g, imu_samples, identifier, identifier_event)
       SELECT t, d, a, ty, ts, $19, ig, la, lo, sp, hd, fx, gv, adc, hm, pg, sm, idf, ev
         FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::text[], $5::timestamptz[], $6::bool[], $7::float8[], $8::float8[],
                     $9::real[], $10::real[], $11::bool[], $12::bool[], $13::bool[], $14::int8[], $15::real[], $16::int[],
                     $17::text[], $18::text[])
              AS r(t, d, a, ty, ts, ig, la, lo, sp, hd, fx, gv, adc, hm, pg, sm, idf, ev)
       ON CONFLICT DO NOTHING
       RETURNING tenant_id, device_id, asset_id, type, ts, gps_valid, latitude, longitude`,
      [...Array.from({ length: 18 }, (_, i) => column(i)), receivedAt],
    );
    if (fixture.mode === 'postgres') {
      const tally = new PositionTally();
      for (const row of inserted.rows)
        if (row.type === 'gps' && row.gps_valid && row.asset_id)
          tally.add(row.tenant_id, row.asset_id, row.ts.getTime(), row.latitude!, row.longitude!);
      await applyPositionDeltas(client, tally);
    }
    const first = new Map<string, number>();
    for (const row of inserted.rows)
      first.set(row.device_id, Math.min(first.get(row.device_id) ?? Infinity, row.ts.getTime()));
    await client.query(markDirtySql, [
      [...first.keys()],
      [...first.keys()].map(() => fixture.tenantId),
      [...first.values()].map((ts) => new Date(ts)),
    ]);
    await client.query('COMMIT');
    return inserted.rows.length;
  } catch (error) {
    await client.query('ROLLBACK');
    throw error;
  } finally {
    client.release();
  }
}

/** Marks a device dirty from a time, as ingest does for a duplicate it dropped anyway. */
export async function markDirty(fixture: DerivationFixture, device: FixtureDevice, from: number): Promise<void> {
  await fixture.pool.query(markDirtySql, [[device.id], [fixture.tenantId], [new Date(from)]]);
}

/** Runs derivation until no device is dirty; returns the runs' device count. */
export async function deriveAll(fixture: DerivationFixture, now: number = Date.now()): Promise<number> {
  let devices = 0;
  for (let guard = 0; guard < 10_000; guard += 1) {
    const run = await deriveDirtyDevices(fixture.derivationDeps, () => now);
    if (run.devices === 0) return devices;
    devices += run.devices;
  }
  throw new Error('derivation did not settle');
}

/** Applies the whole invalidation log to gold (both modes). */
export async function refreshAll(fixture: DerivationFixture, now: number = Date.now()): Promise<void> {
  for (let guard = 0; guard < 1_000; guard += 1) {
    const result = await refreshGold(fixture.goldDeps, { now: () => now });
    if (result.failed.length > 0) throw new Error(`gold refresh failed for ${result.failed.join(', ')}`);
    if (!result.more) return;
  }
  throw new Error('gold refresh did not settle');
}

export interface StoredOutputs {
  segments: Array<Record<string, unknown>>;
  usageSessions: Array<Record<string, unknown>>;
  identifierSessions: Array<Record<string, unknown>>;
}

/** Everything derivation stored for a device, in start order (for comparisons). */
export async function readOutputs(fixture: DerivationFixture, device: FixtureDevice): Promise<StoredOutputs> {
  const segments = await fixture.pool.query(
    `SELECT start_ts, end_ts, has_data, running, moving, loaded, seconds, distance_m, hourmeter_delta, container_cycles,
            imu_anomalies, imu_samples, gps_points
       FROM telemetry_segments WHERE device_id = $1 ORDER BY start_ts`,
    [device.id],
  );
  const usage = await fixture.pool.query(`SELECT * FROM usage_sessions WHERE device_id = $1 ORDER BY start_ts`, [
    device.id,
  ]);
  const ident = await fixture.pool.query(`SELECT * FROM identifier_sessions WHERE device_id = $1 ORDER BY start_ts`, [
    device.id,
  ]);
  return { segments: segments.rows, usageSessions: usage.rows, identifierSessions: ident.rows };
}
