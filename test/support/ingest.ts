import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Config } from '@gantry/config';
import type { Pool, StorageMode } from '@gantry/db';
import { silentLogger, type Logger } from '@gantry/logger';
import { startIngest, type RunningIngest } from '@gantry/ingest';
import { createOutbox } from '@gantry/db';
import { provisioning } from '@gantry/api';
import { OVERSIZED_PAYLOAD_BYTES, timeBounds } from '../../services/ingest/src/ingest.ts';
import { parseMessage, type ParsedMessage } from '../../services/ingest/src/pipeline/steps.ts';
import { inTransaction } from '../../services/ingest/src/storage/transaction.ts';
import { writeBatch } from '../../services/ingest/src/storage/write-batch.ts';
import { testConfig } from './api.ts';

export interface ProvisionedDevice {
  deviceId: string;
  /** devices.id */
  id: string;
  assetId: string;
}

export interface ProvisionedFleet {
  tenantId: string;
  devices: ProvisionedDevice[];
  byDeviceId: Map<string, ProvisionedDevice>;
}

/** A tenant with one asset and one enabled device per id, through the provisioning service. */
export async function provisionFleet(
  pool: Pool,
  deviceIds: string[],
  tenantName = 'Ingest test terminal',
): Promise<ProvisionedFleet> {
  const deps = { pool, outbox: createOutbox({ maxAttempts: 3 }) };
  const tenant = await provisioning.createTenant(deps, { name: tenantName });
  const type = await provisioning.createAssetType(deps, tenant.id, { name: 'Straddle carrier' });
  const devices: ProvisionedDevice[] = [];
  for (const [index, deviceId] of deviceIds.entries()) {
    const asset = await provisioning.createAsset(deps, tenant.id, {
      name: `Machine ${index + 1}`,
      identifier: `M-${index + 1}`,
      assetTypeId: type.id,
    });
    const device = await provisioning.createDevice(deps, tenant.id, { deviceId, assetId: asset.id });
    devices.push({ deviceId, id: device.id, assetId: asset.id });
  }
  return { tenantId: tenant.id, devices, byDeviceId: new Map(devices.map((device) => [device.deviceId, device])) };
}

/** The same as provisionFleet for hundreds of devices: one tenant, one asset per device, in two statements. */
export async function provisionFleetBulk(
  pool: Pool,
  deviceIds: string[],
  tenantName = 'Ingest load terminal',
): Promise<ProvisionedFleet> {
  const tenant = await provisioning.createTenant(
    { pool, outbox: createOutbox({ maxAttempts: 3 }) },
    { name: tenantName },
  );
  const { rows: assets } = await pool.query<{ id: string; identifier: string }>(
    `INSERT INTO assets (tenant_id, name, identifier) SELECT $1, 'Machine ' || id, id FROM unnest($2::text[]) AS id RETURNING id, identifier`,
    [tenant.id, deviceIds],
  );
  const { rows } = await pool.query<{ id: string; device_id: string; asset_id: string }>(
    `INSERT INTO devices (tenant_id, device_id, asset_id) SELECT $1, d, a FROM unnest($2::text[], $3::uuid[]) AS u(d, a)
     RETURNING id, device_id, asset_id`,
    [tenant.id, assets.map((asset) => asset.identifier), assets.map((asset) => asset.id)],
  );
  const devices = rows.map((row) => ({ deviceId: row.device_id, id: row.id, assetId: row.asset_id }));
  return { tenantId: tenant.id, devices, byDeviceId: new Map(devices.map((device) => [device.deviceId, device])) };
}

/** Device ids no other test file uses (topics carry no tenant, and brokers may be shared). */
export function uniqueDeviceIds(count: number, prefix = 'dev'): string[] {
  const run = randomBytes(3).toString('hex');
  return Array.from({ length: count }, (_, index) => `${prefix}-${run}-${String(index + 1).padStart(4, '0')}`);
}

export interface TestIngest extends RunningIngest {
  config: Config;
}

/**
 * Ingest in-process against a test database and broker, with a client id and shared
 * group of its own so ingests of other test files on the same broker do not take its
 * messages. Extra GANTRY_* variables override the defaults.
 */
export async function startTestIngest(options: {
  pool: Pool;
  databaseUrl: string;
  mqttUrl: string;
  storageMode?: StorageMode;
  env?: Record<string, string>;
  logger?: Logger;
}): Promise<TestIngest> {
  const id = randomBytes(4).toString('hex');
  const config = testConfig(options.databaseUrl, {
    GANTRY_MQTT_URL: options.mqttUrl,
    GANTRY_INGEST_CLIENT_ID: `gantry-ingest-test-${id}`,
    GANTRY_INGEST_SHARED_GROUP: `ingest-test-${id}`,
    GANTRY_INGEST_BATCH_MS: '50',
    ...options.env,
  });
  const ingest = await startIngest({
    config,
    pool: options.pool,
    logger: options.logger ?? silentLogger(),
    storageMode: options.storageMode ?? 'postgres',
  });
  return { ...ingest, config };
}

/**
 * Polls until `read` returns a value `done` accepts, and returns it; throws with the
 * last value after `timeoutMs` (a hang guard, not a timing assertion).
 */
export async function waitFor<T>(
  read: () => Promise<T>,
  done: (value: T) => boolean,
  timeoutMs = 60_000,
  label = 'condition',
  intervalMs = 50,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${label}; last value: ${JSON.stringify(value)}`);
    await sleep(intervalMs);
  }
}

/** Row count of a query returning `count`. */
export async function countOf(pool: Pool, sql: string, params: unknown[] = []): Promise<number> {
  const { rows } = await pool.query<{ count: number }>(sql, params);
  return Number(rows[0]?.count ?? 0);
}

/** A raw MQTT message parsed as ingest parses it, with the time bounds of its arrival. */
export function parseRaw(config: Config, raw: { topic: string; payload: Buffer; receivedAt: number }): ParsedMessage {
  return parseMessage(raw, {
    maxPayloadBytes: config.ingest.maxPayloadBytes,
    bounds: timeBounds(config, raw.receivedAt),
  });
}

/** One ingest batch written and committed as the batcher does (without its retries). */
export function writeParsed(pool: Pool, messages: ParsedMessage[], method: 'unnest' | 'copy') {
  return inTransaction(pool, 30_000, (client) =>
    writeBatch(client, messages, { method, oversizedPayloadBytes: OVERSIZED_PAYLOAD_BYTES }),
  );
}
