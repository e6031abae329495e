import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { migrateDatabase, readDatabaseStatus, StorageModeError } from '@gantry/db';
import { availableStorageModes } from '../support/database.ts';
import { serverUrl, withDatabase } from '../support/database-url.ts';

const created: string[] = [];

async function emptyDatabase(): Promise<string> {
  const name = `gantry_migrate_${randomBytes(3).toString('hex')}_test`;
  const admin = new pg.Client({ connectionString: serverUrl() });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  created.push(name);
  return withDatabase(serverUrl(), name);
}

afterAll(async () => {
  const admin = new pg.Client({ connectionString: serverUrl() });
  await admin.connect();
  for (const name of created) await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin.end();
});

describe.each(availableStorageModes())('migrations in %s mode', (mode) => {
  it('apply once when two processes migrate the same empty database at the same time, and again is a no-op', async () => {
    const url = await emptyDatabase();
    const [first, second] = await Promise.all([
      migrateDatabase(url, { storageMode: mode }),
      migrateDatabase(url, { storageMode: mode }),
    ]);
    expect(first.storageMode).toBe(mode);
    expect(second.storageMode).toBe(mode);
    const applied = [...first.applied, ...second.applied];
    expect(applied).toContain('0001_core');
    expect(applied.filter((name) => name === '0001_core')).toHaveLength(1);
    expect((await migrateDatabase(url, { storageMode: 'auto' })).applied).toEqual([]);

    const pool = new pg.Pool({ connectionString: url });
    const status = await readDatabaseStatus(pool);
    expect(status.storageMode).toBe(mode);
    expect(status.gold.map((gold) => gold.relation).sort()).toEqual([
      'positions_15min',
      'positions_1min',
      'utilization_daily',
      'utilization_fleet',
      'utilization_hourly',
    ]);
    const kinds = await pool.query<{ relname: string; relkind: string }>(
      `SELECT relname, relkind FROM pg_class
        WHERE relname IN ('positions_1min', 'utilization_hourly', 'utilization_hourly_counts', 'telemetry_readings')
        ORDER BY relname`,
    );
    if (mode === 'timescaledb') {
      // Positions are continuous aggregates (views over materialization hypertables);
      // utilization gold, kept by differences, is a table with its counts, as in PostgreSQL mode.
      expect(kinds.rows).toEqual([
        { relname: 'positions_1min', relkind: 'v' },
        { relname: 'telemetry_readings', relkind: 'r' },
        { relname: 'utilization_hourly', relkind: 'r' },
        { relname: 'utilization_hourly_counts', relkind: 'r' },
      ]);
      const hypertables = await pool.query<{ hypertable_name: string }>(
        `SELECT hypertable_name FROM timescaledb_information.hypertables WHERE hypertable_schema = 'public' ORDER BY 1`,
      );
      expect(hypertables.rows.map((row) => row.hypertable_name)).toEqual([
        'device_message_batches',
        'device_message_rows',
        'telemetry_readings',
        'telemetry_segments',
      ]);
    } else {
      // Silver is partitioned by day (db/postgres/0430_partitioned_time_series.sql).
      expect(kinds.rows).toEqual([
        { relname: 'positions_1min', relkind: 'r' },
        { relname: 'telemetry_readings', relkind: 'p' },
        { relname: 'utilization_hourly', relkind: 'r' },
        { relname: 'utilization_hourly_counts', relkind: 'r' },
      ]);
    }
    await pool.end();
  });
});

describe('storage mode', () => {
  it('keeps the mode a database was created in and refuses a conflicting explicit mode', async () => {
    const url = await emptyDatabase();
    await migrateDatabase(url, { storageMode: 'postgres' });
    const other = availableStorageModes().includes('timescaledb') ? 'timescaledb' : null;
    if (other) {
      await expect(migrateDatabase(url, { storageMode: other })).rejects.toThrow(StorageModeError);
      await expect(migrateDatabase(url, { storageMode: other })).rejects.toThrow(/set up in postgres mode/);
    }
    expect((await migrateDatabase(url, { storageMode: 'auto' })).storageMode).toBe('postgres');
  });

  it('GANTRY_STORAGE_MODE=timescaledb fails clearly where the extension cannot be used', async () => {
    if (availableStorageModes().includes('timescaledb')) {
      // This server has it: the same request must succeed instead.
      const url = await emptyDatabase();
      expect((await migrateDatabase(url, { storageMode: 'timescaledb' })).storageMode).toBe('timescaledb');
      return;
    }
    const url = await emptyDatabase();
    await expect(migrateDatabase(url, { storageMode: 'timescaledb' })).rejects.toThrow(
      /GANTRY_STORAGE_MODE=timescaledb, but/,
    );
  });
});
