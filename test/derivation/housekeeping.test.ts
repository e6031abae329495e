import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { maintainPartitions, partitionName, type PoolClient } from '@gantry/db';
import { silentLogger } from '@gantry/logger';
import { pruneCheckpoints } from '../../services/worker/src/features/derivation/repository.ts';
import { housekeepingLoop } from '../../services/worker/src/features/housekeeping/loop.ts';
import { testConfig } from '../support/api.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { provisionFleetBulk, uniqueDeviceIds } from '../support/ingest.ts';

const DAY_MS = 86_400_000;
const floorDay = (ms: number) => Math.floor(ms / DAY_MS) * DAY_MS;

describe('housekeeping: partitions and retention (PostgreSQL mode)', () => {
  let db: TestDatabase;
  let client: PoolClient;

  beforeAll(async () => {
    db = await createTestDatabase('housekeeping');
    client = await db.pool.connect();
  });

  afterAll(async () => {
    client.release();
    await db.drop();
  });

  async function partitions(table: string): Promise<string[]> {
    const { rows } = await db.pool.query<{ name: string }>(
      `SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        WHERE i.inhparent = $1::regclass ORDER BY 1`,
      [table],
    );
    return rows.map((row) => row.name);
  }

  async function insertReadings(deviceId: string, tenantId: string, assetId: string, times: number[]) {
    await db.pool.query(
      `INSERT INTO telemetry_readings (tenant_id, device_id, asset_id, type, ts, received_at)
       SELECT $1, $2, $3, 'heartbeat', t, t FROM unnest($4::timestamptz[]) AS t`,
      [tenantId, deviceId, assetId, times.map((t) => new Date(t).toISOString())],
    );
  }

  it('creates the days ahead, keeps a reading older than any partition in the default one, then gives it a day of its own', async () => {
    const now = Date.now();
    const today = floorDay(now);
    await maintainPartitions(client, { now });
    for (const table of ['telemetry_readings', 'device_message_batches', 'device_message_rows']) {
      const names = await partitions(table);
      for (let day = today - DAY_MS; day <= today + 7 * DAY_MS; day += DAY_MS)
        expect(names).toContain(partitionName(table, day));
      expect(names).toContain(`${table}_default`);
    }

    const fleet = await provisionFleetBulk(db.pool, uniqueDeviceIds(1, 'late'));
    const device = fleet.devices[0]!;
    // 100 days back: older than any partition (migrate and the worker make them from yesterday on).
    const late = today - 100 * DAY_MS + 3_600_000;
    const before = await partitions('telemetry_readings');
    await insertReadings(device.id, fleet.tenantId, device.assetId, [late]);
    const stored = await db.pool.query<{ partition: string }>(
      `SELECT tableoid::regclass::text AS partition FROM telemetry_readings WHERE device_id = $1`,
      [device.id],
    );
    expect(stored.rows).toEqual([{ partition: 'telemetry_readings_default' }]);

    const again = await maintainPartitions(client, { now });
    expect(again.created).toEqual([partitionName('telemetry_readings', floorDay(late))]);
    expect(again.moved).toBe(1);
    const moved = await db.pool.query<{ partition: string; ts: Date }>(
      `SELECT tableoid::regclass::text AS partition, ts FROM telemetry_readings WHERE device_id = $1`,
      [device.id],
    );
    expect(moved.rows).toEqual([
      { partition: partitionName('telemetry_readings', floorDay(late)), ts: new Date(late) },
    ]);
    // One partition for the day that has data, none for the 90-odd days between.
    expect(await partitions('telemetry_readings')).toEqual(
      [...before, partitionName('telemetry_readings', floorDay(late))].sort(),
    );
    // Its key still deduplicates across the move.
    await expect(insertReadings(device.id, fleet.tenantId, device.assetId, [late])).rejects.toThrow(/duplicate key/);
  });

  it('drops whole days past the retention, silver and bronze, without deleting a row', async () => {
    const now = Date.now();
    // Partitions for the last 47 days, as a worker running all along would have made them.
    await maintainPartitions(client, { now: now - 46 * DAY_MS, aheadDays: 50 });
    // Every row delete on silver's or bronze's partitions is logged here.
    await db.pool.query(`
      CREATE TABLE deleted_rows (relation text NOT NULL);
      CREATE FUNCTION log_deleted_row() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN INSERT INTO deleted_rows VALUES (TG_TABLE_NAME); RETURN OLD; END $$;
      CREATE TRIGGER log_deleted_row AFTER DELETE ON telemetry_readings FOR EACH ROW EXECUTE FUNCTION log_deleted_row();
      CREATE TRIGGER log_deleted_row AFTER DELETE ON device_message_rows FOR EACH ROW EXECUTE FUNCTION log_deleted_row();`);

    const fleet = await provisionFleetBulk(db.pool, uniqueDeviceIds(3, 'retention'));
    // Per device: readings 45, 31, 29 and 1 days old, the first two past 30 days.
    const ages = [45, 31, 29, 1];
    for (const device of fleet.devices)
      await insertReadings(
        device.id,
        fleet.tenantId,
        device.assetId,
        ages.map((days) => now - days * DAY_MS),
      );
    // Bronze: a rejected message 20 days old (past 14 days) and one from today.
    await db.pool.query(
      `INSERT INTO device_messages (received_at, topic, status, error, payload_size, payload)
       SELECT t, 'gantry/v1/devices/x/gps', 'rejected', 'invalid_json', 1, '\\x7b'
         FROM unnest(ARRAY[now() - interval '20 days', now()]) AS t`,
    );
    const silverBefore = await partitions('telemetry_readings');
    const expired = silverBefore.filter(
      (name) =>
        name.startsWith('telemetry_readings_p') &&
        name <= partitionName('telemetry_readings', floorDay(now - 30 * DAY_MS) - DAY_MS),
    );
    expect(expired).toContain(partitionName('telemetry_readings', floorDay(now - 45 * DAY_MS)));

    const config = testConfig(db.url, { GANTRY_READING_RETENTION_DAYS: '30', GANTRY_BRONZE_RETENTION_DAYS: '14' });
    const loop = housekeepingLoop({ pool: db.pool, config, storageMode: 'postgres', logger: silentLogger() });
    expect(await loop.runOnce()).toBeGreaterThan(0);

    const silverAfter = await partitions('telemetry_readings');
    for (const name of expired) expect(silverAfter).not.toContain(name);
    expect(silverAfter).toContain(partitionName('telemetry_readings', floorDay(now - 29 * DAY_MS)));
    expect(silverAfter).toContain('telemetry_readings_default');
    const { rows } = await db.pool.query<{ device_id: string; oldest_days: number; count: number }>(
      `SELECT device_id, count(*)::int AS count, floor(extract(epoch FROM now() - min(ts)) / 86400)::int AS oldest_days
         FROM telemetry_readings WHERE device_id = ANY ($1::uuid[]) GROUP BY device_id`,
      [fleet.devices.map((device) => device.id)],
    );
    expect(rows).toHaveLength(3);
    for (const row of rows) expect(row).toMatchObject({ count: 2, oldest_days: 29 });
    const bronze = await db.pool.query<{ age_days: number }>(
      `SELECT floor(extract(epoch FROM now() - received_at) / 86400)::int AS age_days FROM device_message_rows`,
    );
    expect(bronze.rows).toEqual([{ age_days: 0 }]);
    expect(await partitions('device_message_rows')).not.toContain(
      partitionName('device_message_rows', floorDay(now - 20 * DAY_MS)),
    );
    const deleted = await db.pool.query(`SELECT relation FROM deleted_rows`);
    expect(deleted.rows).toEqual([]);
    // Nothing left to do: a second pass drops and creates nothing.
    expect(await loop.runOnce()).toBe(0);
  });
});

describe('checkpoint thinning', () => {
  let db: TestDatabase;

  beforeAll(async () => {
    db = await createTestDatabase('checkpoints');
  });

  afterAll(async () => {
    await db.drop();
  });

  it('keeps hourly checkpoints for the late-data window, then one a day, then one a week, and one past retention', async () => {
    const device = '00000000-0000-4000-8000-0000000c0001';
    // A checkpoint every hour for 200 days, as a device reporting all along leaves them.
    await db.pool.query(
      `INSERT INTO derivation_checkpoints (device_id, at, carry)
       SELECT $1, date_trunc('hour', now()) - h * interval '1 hour', '{"v": 1}' FROM generate_series(0, 200 * 24) h`,
      [device],
    );
    const horizon = { hourlyDays: 3, dailyDays: 31, readingDays: 120 };
    const count = async (from: number, to: number) => {
      const { rows } = await db.pool.query<{ count: number }>(
        `SELECT count(*)::int AS count FROM derivation_checkpoints
          WHERE at >= now() - make_interval(days => $1) AND at < now() - make_interval(days => $2)`,
        [to, from],
      );
      return rows[0]!.count;
    };
    const thinned = await pruneCheckpoints(db.pool, horizon);
    expect(thinned).toBeGreaterThan(4000);
    // Hourly within 3 days (the hour may have turned since the rows were written: ±1).
    expect(Math.abs((await count(0, 3)) - 72)).toBeLessThanOrEqual(1);
    // One a day from 3 to 31 days (the days at either edge may be shared with the neighbours).
    expect(Math.abs((await count(4, 30)) - 26)).toBeLessThanOrEqual(1);
    // One a week until the 120-day retention.
    const weekly = await count(32, 119);
    expect(weekly).toBeGreaterThanOrEqual(11);
    expect(weekly).toBeLessThanOrEqual(14);
    // Past retention only the newest, from which a late reading at the edge restarts.
    expect(await count(121, 400)).toBe(0);
    expect(await count(120, 400)).toBe(1);
    const total = await count(0, 400);
    expect(total).toBeLessThan(72 + 29 + 14 + 2);

    // The size no longer follows the age of the data: another 100 days of history thins to the same.
    await db.pool.query(
      `INSERT INTO derivation_checkpoints (device_id, at, carry)
       SELECT $1, date_trunc('hour', now()) - h * interval '1 hour', '{"v": 1}' FROM generate_series(200 * 24 + 1, 300 * 24) h`,
      [device],
    );
    await pruneCheckpoints(db.pool, horizon);
    // (±1: the hour or the day may turn between the two passes.)
    expect(Math.abs((await count(0, 400)) - total)).toBeLessThanOrEqual(1);
    expect(await pruneCheckpoints(db.pool, horizon)).toBeLessThanOrEqual(1);
  });
});
