import { createOutbox, createPool, migrateDatabase, type Pool } from '@gantry/db';
import type { Logger } from '@gantry/logger';
import { DEMO_CUSTOMER_NAME, DEMO_TENANT_NAME, provisioning, provisionDemo } from '@gantry/api';
import { startDemoFleet, type DemoFleet, type LatLon } from '@gantry/simulator';
import type { Command, CommandContext } from '../command.ts';
import { withDatabase } from '../with-database.ts';

export interface DemoKeys {
  tenantId: string;
  tenantKey: string;
  customerKey: string;
  customerName: string;
  created: boolean;
}

/**
 * Provisions the demo tenant if the database has none, or issues two new keys for the
 * existing one (keys are stored hashed and cannot be shown again).
 */
export async function ensureDemo(pool: Pool, maxAttempts: number): Promise<DemoKeys> {
  const deps = { pool, outbox: createOutbox({ maxAttempts }) };
  const existing = await pool.query<{ id: string }>(
    'SELECT id FROM tenants WHERE name = $1 ORDER BY created_at LIMIT 1',
    [DEMO_TENANT_NAME],
  );
  const tenantId = existing.rows[0]?.id;
  if (tenantId === undefined) {
    try {
      const demo = await provisionDemo(deps);
      return {
        tenantId: demo.tenantId,
        tenantKey: demo.tenantKey,
        customerKey: demo.customerKey,
        customerName: demo.customerName,
        created: true,
      };
    } catch (error) {
      // A half-provisioned demo tenant would keep every later start from provisioning it.
      await pool
        .query('/* cli:dropFailedDemo */ DELETE FROM tenants WHERE name = $1', [DEMO_TENANT_NAME])
        .catch(() => undefined);
      throw error;
    }
  }
  const stamp = new Date().toISOString().slice(0, 19);
  const tenantKey = await provisioning.createApiKey(deps, tenantId, { name: `Demo tenant key ${stamp}` });
  const customerKey = await provisioning.createApiKey(deps, tenantId, {
    name: `Demo customer key ${stamp}`,
    customerName: DEMO_CUSTOMER_NAME,
  });
  return {
    tenantId,
    tenantKey: tenantKey.key,
    customerKey: customerKey.key,
    customerName: DEMO_CUSTOMER_NAME,
    created: false,
  };
}

export interface DemoFleetStart {
  fleet: DemoFleet;
  devices: number;
  /** The fleet's past hours are uploaded first (a fresh demo: no device has sent anything yet). */
  history: boolean;
  historyHours: number;
}

/** Outer rings of a GeoJSON Polygon or MultiPolygon, as points. */
function outerRings(geometry: { type: string; coordinates: unknown }): LatLon[][] {
  const polygons = (geometry.type === 'MultiPolygon' ? geometry.coordinates : [geometry.coordinates]) as number[][][][];
  return polygons.map((polygon) => (polygon[0] ?? []).map(([lon, lat]) => ({ lat: lat!, lon: lon! })));
}

/**
 * Starts the simulated fleet of the demo tenant: every enabled device in the order they
 * were provisioned (demo-sc-01 first: it makes the pass through the first forbidden
 * zone), the tenant's operators, keeping out of the forbidden zones otherwise.
 * On a fresh demo the fleet first uploads its recent past; after a restart it carries on
 * from each device's last known position, hourmeter and spreader state. Null when there
 * is no demo tenant or it has no enabled device.
 */
export async function startDemoFleetFromDatabase(
  pool: Pool,
  options: {
    mqttUrl: string;
    username?: string | undefined;
    password?: string | undefined;
    logger?: Logger;
    historyHours?: number;
  },
): Promise<DemoFleetStart | null> {
  const tenant = await pool.query<{ id: string }>(
    '/* cli:demoTenant */ SELECT id FROM tenants WHERE name = $1 ORDER BY created_at LIMIT 1',
    [DEMO_TENANT_NAME],
  );
  const tenantId = tenant.rows[0]?.id;
  if (tenantId === undefined) return null;
  const { rows: devices } = await pool.query<{
    device_id: string;
    seen: boolean;
    latitude: number | null;
    longitude: number | null;
    hourmeter: string | null;
    adc_on: boolean | null;
  }>(
    `/* cli:demoDevices */
     SELECT d.device_id, s.device_id IS NOT NULL AS seen, s.latitude, s.longitude, s.hourmeter, s.adc_on
       FROM devices d LEFT JOIN device_state s ON s.device_id = d.id
      WHERE d.tenant_id = $1 AND d.enabled ORDER BY d.created_at, d.device_id`,
    [tenantId],
  );
  if (devices.length === 0) return null;
  const { rows: operators } = await pool.query<{ identifier: string }>(
    '/* cli:demoOperators */ SELECT identifier FROM operators WHERE tenant_id = $1 ORDER BY identifier',
    [tenantId],
  );
  const { rows: zones } = await pool.query<{ geometry: { type: string; coordinates: unknown } }>(
    `/* cli:demoForbiddenZones */ SELECT geometry FROM geofences WHERE tenant_id = $1 AND enabled AND type = 'forbidden' ORDER BY name, id`,
    [tenantId],
  );
  const history = devices.every((device) => !device.seen);
  const historyHours = options.historyHours ?? 10;
  const fleet = startDemoFleet({
    mqttUrl: options.mqttUrl,
    username: options.username,
    password: options.password,
    devices: devices.map((device) => ({
      deviceId: device.device_id,
      position:
        device.latitude === null || device.longitude === null ? null : { lat: device.latitude, lon: device.longitude },
      hourmeter: device.hourmeter === null ? null : Number(device.hourmeter),
      loaded: device.adc_on,
    })),
    operators: operators.map((operator) => operator.identifier),
    forbidden: zones.flatMap((zone) => outerRings(zone.geometry)),
    history,
    historyHours,
    logger: options.logger,
  });
  return { fleet, devices: devices.length, history, historyHours };
}

export const demoCommand: Command = {
  name: 'demo',
  summary: 'Provision the demo tenant (or new keys for it) and print a tenant key and a customer key',
  usage: 'gantry demo',
  run: (_argv, context) => withDatabase(context, (url) => provisionDemoCommand(url, context)),
};

async function provisionDemoCommand(url: string, { config, logger, print }: CommandContext): Promise<void> {
  await migrateDatabase(url, { storageMode: config.storageMode, retention: config.retention, logger });
  const pool = createPool(url, { max: 2, applicationName: 'gantry-cli' });
  try {
    const keys = await ensureDemo(pool, config.webhooks.maxAttempts);
    print(
      keys.created ? `demo tenant created: ${keys.tenantId}` : `demo tenant ${keys.tenantId} exists; new keys issued`,
    );
    print(`tenant key:   ${keys.tenantKey}`);
    print(`customer key: ${keys.customerKey}   (sees only "${keys.customerName}")`);
  } finally {
    await pool.end();
  }
}
