import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { housekeepingLoop } from '../../services/worker/src/features/housekeeping/loop.ts';
import { testConfig } from '../support/api.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { provisionFleetBulk, uniqueDeviceIds } from '../support/ingest.ts';

const DAY_MS = 86_400_000;

describe('housekeeping: silver retention (PostgreSQL mode)', () => {
  let db: TestDatabase;

  beforeAll(async () => {
    db = await createTestDatabase('housekeeping');
  });

  afterAll(async () => {
    await db.drop();
  });

  it('deletes every device’s readings older than the retention and keeps the rest', async () => {
    const fleet = await provisionFleetBulk(db.pool, uniqueDeviceIds(3, 'retention'));
    const config = testConfig(db.url, { GANTRY_READING_RETENTION_DAYS: '30' });
    const now = Date.now();
    // Per device: readings 45, 31, 29 and 1 days old (hourly runs), the first two past 30 days.
    const ages = [45, 31, 29, 1];
    for (const device of fleet.devices) {
      await db.pool.query(
        `INSERT INTO telemetry_readings (tenant_id, device_id, asset_id, type, ts, received_at)
         SELECT $1, $2, $3, 'heartbeat', t, t FROM unnest($4::timestamptz[]) AS t`,
        [fleet.tenantId, device.id, device.assetId, ages.map((days) => new Date(now - days * DAY_MS).toISOString())],
      );
    }
    const loop = housekeepingLoop({ pool: db.pool, config, storageMode: 'postgres' });
    expect(await loop.runOnce()).toBe(6);
    const { rows } = await db.pool.query<{ device_id: string; oldest_days: number; count: number }>(
      `SELECT device_id, count(*)::int AS count, floor(extract(epoch FROM now() - min(ts)) / 86400)::int AS oldest_days
         FROM telemetry_readings GROUP BY device_id`,
    );
    expect(rows).toHaveLength(3);
    for (const row of rows) expect(row).toMatchObject({ count: 2, oldest_days: 29 });
    expect(await loop.runOnce()).toBe(0);
  });
});
