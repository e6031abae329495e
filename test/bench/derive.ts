/**
 * pnpm bench:derive — derivation and gold on a seeded fleet history.
 *
 * 1. Seeds gantry_bench_derive_<mode> once (generate_series straight into silver): 500
 *    devices × 7 days, one reading every 10 s (GPS, a spreader change every 5 minutes,
 *    an hourmeter reading every minute, heartbeats; machines work 06:00–18:00 UTC, drive
 *    in circles part of each half hour, park at night). Later runs reuse the seed (a
 *    marker in gantry_meta) and only reset what derivation produced; --reseed rebuilds.
 * 2. Derivation throughput: the whole backlog derived by GANTRY_BENCH_WORKERS (default 2)
 *    concurrent workers; readings/s of history (re-reads not counted), then the first
 *    gold refresh.
 * 3. Lag under load: silver rows inserted at GANTRY_BENCH_RATE readings/s (default 5,000,
 *    every 200 ms in one transaction with the queue marks, as ingest does) for
 *    GANTRY_BENCH_LIVE_SECONDS (default 60) while the workers and the gold refresher run;
 *    lag = now − newest derived reading, per derivation run (its worst device).
 * 4. The hourly utilization query for 30 days × 500 assets (a second tenant whose
 *    segments are seeded directly), from gold and computed live, fleet and per asset.
 *
 * Targets: lag p99 < 5 s; gold ≥ 20× faster than live and p95 < 50 ms. The machine is
 * shared: figures are indicative. GANTRY_BENCH_MODE=postgres|timescaledb|auto (default
 * auto), GANTRY_BENCH_DEVICES, GANTRY_BENCH_DAYS for smaller runs; --drop removes the
 * database at the end; --skip-backlog keeps the previous run's derived state (to repeat
 * the load and query phases), --skip-queries stops after the load phase.
 */
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import type pg from 'pg';
import { loadConfig } from '@gantry/config';
import {
  checkTimescaleAvailability,
  createOutbox,
  createPool,
  markDirtySql,
  migrateDatabase,
  readUtilization,
  type Pool,
  type StorageMode,
} from '@gantry/db';
import { silentLogger } from '@gantry/logger';
import { deriveDirtyDevices, type DerivationDeps } from '../../services/worker/src/features/derivation/service.ts';
import { refreshGold } from '../../services/worker/src/features/gold/refresh.ts';
import { benchServerUrl, onServer as onTestServer, withDatabase } from '../support/database-url.ts';
import { describeSessionTables, sessionTableStats, type SessionTableStats } from './session-tables.ts';
import { cpuTimes } from './machine-cpu.ts';

const onServer = <T>(fn: (client: pg.Client) => Promise<T>) => onTestServer(fn, benchServerUrl());

const DEVICES = Number(process.env.GANTRY_BENCH_DEVICES ?? 500);
const DAYS = Number(process.env.GANTRY_BENCH_DAYS ?? 7);
const INTERVAL_S = 10;
const WORKERS = Number(process.env.GANTRY_BENCH_WORKERS ?? 2);
const RATE = Number(process.env.GANTRY_BENCH_RATE ?? 5_000);
const LIVE_SECONDS = Number(process.env.GANTRY_BENCH_LIVE_SECONDS ?? 60);
const QUERY_DAYS = 30;
const WARM_UP_MS = 15_000;
const QUERY_ASSETS = 500;
const args = new Set(process.argv.slice(2));
const HOUR = 3_600_000;
const DAY = 24 * HOUR;

function log(message: string): void {
  process.stdout.write(`${new Date().toISOString().slice(11, 19)} [load ${os.loadavg()[0]!.toFixed(1)}] ${message}\n`);
}

function percentile(values: number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

const TENANT = '00000000-0000-4000-8000-00000000b001';
const QUERY_TENANT = '00000000-0000-4000-8000-00000000b002';

async function chooseMode(): Promise<StorageMode> {
  const requested = process.env.GANTRY_BENCH_MODE ?? 'auto';
  if (requested === 'postgres' || requested === 'timescaledb') return requested;
  const available = await onServer((client) => checkTimescaleAvailability(client));
  return available.available ? 'timescaledb' : 'postgres';
}

/** Creates (or reuses) the seeded database; returns its pool and the history's time range. */
async function prepare(mode: StorageMode): Promise<{ pool: Pool; url: string; start: number; end: number }> {
  const database = `gantry_bench_derive_${mode}`;
  const url = withDatabase(benchServerUrl(), database);
  const marker = `derive-bench-v1:${DEVICES}x${DAYS}`;
  const exists = await onServer(
    async (client) => (await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [database])).rowCount === 1,
  );
  if (exists && !args.has('--reseed')) {
    const pool = createPool(url, { max: WORKERS + 4 });
    const { rows } = await pool.query<{ value: { marker: string; start: number; end: number } }>(
      `SELECT value FROM gantry_meta WHERE key = 'bench:derive'`,
    );
    if (rows[0]?.value.marker === marker) {
      log(`reusing the seeded ${database} (${DEVICES} devices × ${DAYS} days); --reseed rebuilds it`);
      // Migrations added since the seed (the seed's data does not depend on them).
      await migrateDatabase(url, { storageMode: mode, retention: { bronzeDays: 14, readingDays: 400 } });
      return { pool, url, start: rows[0].value.start, end: rows[0].value.end };
    }
    await pool.end();
  }
  await onServer(async (client) => {
    await client.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    await client.query(`CREATE DATABASE ${database}`);
  });
  await migrateDatabase(url, { storageMode: mode, retention: { bronzeDays: 14, readingDays: 400 } });
  const pool = createPool(url, { max: WORKERS + 4 });
  await pool.query(`ALTER DATABASE ${database} SET synchronous_commit = off`);
  if (mode === 'timescaledb') {
    // Compression and retention jobs would rewrite chunks under the benchmark.
    await pool.query(
      `SELECT alter_job(job_id, scheduled => false) FROM timescaledb_information.jobs WHERE job_id >= 1000`,
    );
  }
  const end = Math.floor(Date.now() / (INTERVAL_S * 1000)) * INTERVAL_S * 1000 - 10 * 60_000;
  const start = end - DAYS * DAY;
  await pool.query(`INSERT INTO tenants (id, name) VALUES ($1, 'Bench fleet')`, [TENANT]);
  await pool.query(
    `INSERT INTO assets (id, tenant_id, name, identifier, customer_name)
     SELECT md5('bench-asset-' || d)::uuid, $1, 'Carrier ' || d, 'BC-' || d, 'Customer ' || (d % 5) FROM generate_series(0, $2 - 1) d`,
    [TENANT, DEVICES],
  );
  await pool.query(
    `INSERT INTO devices (id, tenant_id, device_id, asset_id)
     SELECT md5('bench-device-' || d)::uuid, $1, 'bench-' || d, md5('bench-asset-' || d)::uuid FROM generate_series(0, $2 - 1) d`,
    [TENANT, DEVICES],
  );

  const seedStarted = performance.now();
  const slotsPerDay = DAY / (INTERVAL_S * 1000);
  // Bulk load without the indexes (rebuilt after): incremental b-tree inserts of 30M rows
  // would take several times longer.
  await pool.query(`ALTER TABLE telemetry_readings DROP CONSTRAINT telemetry_readings_pkey`);
  await pool.query(`DROP INDEX telemetry_readings_positions_idx`);
  for (let day = 0; day < DAYS; day += 1) {
    const dayStart = performance.now();
    // Device-major within a day: each device's rows arrive in time order.
    await pool.query(
      `INSERT INTO telemetry_readings (tenant_id, device_id, asset_id, type, ts, received_at, ignition, latitude, longitude,
         speed_kmh, gps_valid, fix, hdop, adc_on, hourmeter)
       SELECT $1, md5('bench-device-' || d)::uuid, md5('bench-asset-' || d)::uuid, x.type, x.ts, x.ts, x.working,
              CASE WHEN x.type = 'gps' THEN 53.5 + (d % 25) * 0.01 + CASE WHEN x.moving THEN 0.002 * sin(x.angle) ELSE 0 END END,
              CASE WHEN x.type = 'gps' THEN 9.9 + (d / 25) * 0.01 + CASE WHEN x.moving THEN 0.0033 * cos(x.angle) ELSE 0 END END,
              CASE WHEN x.type = 'gps' THEN CASE WHEN x.moving THEN 10 ELSE 0 END END,
              CASE WHEN x.type = 'gps' THEN true END, CASE WHEN x.type = 'gps' THEN true END, CASE WHEN x.type = 'gps' THEN 0.9 END,
              CASE WHEN x.type = 'adcin' THEN (x.slot / 30) % 2 = 0 END,
              CASE WHEN x.type = 'hourmeter' THEN 36000000 + d * 1000 + x.running_before END
         FROM generate_series(0, $2 - 1) d
        CROSS JOIN generate_series($3::bigint, $4::bigint - 1) s
        CROSS JOIN LATERAL (
          SELECT s AS slot, to_timestamp(($5::bigint + s * $6) / 1000.0) AS ts,
                 CASE WHEN (s + d) % 6 = 0 THEN 'hourmeter' WHEN (s + d) % 30 = 3 THEN 'adcin'
                      WHEN (s + d) % 360 = 7 THEN 'heartbeat' ELSE 'gps' END AS type,
                 ((($5::bigint + s * $6) / 1000) % 86400) BETWEEN 21600 AND 64799 AS working,
                 ((($5::bigint + s * $6) / 1000) % 86400) BETWEEN 21600 AND 64799 AND ((s + d) / 60) % 3 <> 0 AS moving,
                 (s + d) * 2 * pi() / 46 AS angle,
                 ((($5::bigint + s * $6) / 1000) / 86400 - $5::bigint / 1000 / 86400) * 43200
                   + least(43200, greatest(0, (($5::bigint + s * $6) / 1000) % 86400 - 21600)) AS running_before
        ) x`,
      [TENANT, DEVICES, day * slotsPerDay, (day + 1) * slotsPerDay, start, INTERVAL_S * 1000],
    );
    log(
      `seeded day ${day + 1}/${DAYS}: ${(DEVICES * slotsPerDay).toLocaleString()} readings in ${((performance.now() - dayStart) / 1000).toFixed(1)} s`,
    );
  }
  const indexStarted = performance.now();
  await pool.query(`SET maintenance_work_mem = '512MB'`);
  // The indexes of db/migrations/0080_bronze_batches.sql.
  await pool.query(`ALTER TABLE telemetry_readings ADD PRIMARY KEY (device_id, ts, type)`);
  await pool.query(
    `CREATE INDEX telemetry_readings_positions_idx ON telemetry_readings (asset_id, ts) WHERE type = 'gps' AND gps_valid`,
  );
  await pool.query('ANALYZE telemetry_readings');
  log(`indexes rebuilt in ${((performance.now() - indexStarted) / 1000).toFixed(0)} s`);
  log(
    `seed: ${(DEVICES * slotsPerDay * DAYS).toLocaleString()} readings in ${((performance.now() - seedStarted) / 1000).toFixed(0)} s`,
  );
  // Positions and reading counts come from silver, which the benchmark does not change:
  // built once here; each run resets only what derivation produces.
  await refreshTimed(pool, mode, 'seed: gold from silver (positions, reading counts) built');
  await pool.query(
    `INSERT INTO gantry_meta (key, value) VALUES ('bench:derive', $1::jsonb)
     ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`,
    [JSON.stringify({ marker, start, end })],
  );
  return { pool, url, start, end };
}

/** Forgets everything derivation produced and queues every device from the start of history. */
async function resetDerived(pool: Pool, start: number): Promise<void> {
  await pool.query(
    `TRUNCATE telemetry_segments, usage_sessions, identifier_sessions, derivation_state, derivation_checkpoints,
              derivation_queue, gold_invalidations, geofence_memberships`,
  );
  await pool.query(
    `TRUNCATE utilization_hourly, utilization_daily, utilization_hourly_counts, utilization_daily_counts`,
  );
  await pool.query(
    `UPDATE gold_coverage SET status = 'rebuild', coverage_from = NULL, coverage_to = NULL, updated_at = NULL
      WHERE relation IN ('utilization_hourly', 'utilization_daily')`,
  );
  await pool.query(`DELETE FROM telemetry_readings WHERE tenant_id = $1 AND ts >= $2`, [
    TENANT,
    new Date(start + DAYS * DAY),
  ]);
  await pool.query(
    `INSERT INTO derivation_queue (device_id, tenant_id, dirty_from, marked_at)
     SELECT id, tenant_id, $2, now() FROM devices WHERE tenant_id = $1`,
    [TENANT, new Date(start)],
  );
}

function derivationDeps(pool: Pool, url: string): DerivationDeps {
  const config = loadConfig({ GANTRY_DATABASE_URL: url, GANTRY_LOG_LEVEL: 'silent' });
  return { pool, outbox: createOutbox({ maxAttempts: 3 }), logger: silentLogger(), config };
}

async function deriveBacklog(pool: Pool, url: string, start: number): Promise<void> {
  const deps = derivationDeps(pool, url);
  const started = performance.now();
  let consumed = 0;
  let lastReport = started;
  const worker = async () => {
    for (;;) {
      const run = await deriveDirtyDevices(deps);
      if (run.devices === 0) return;
      consumed += run.readings;
      if (performance.now() - lastReport > 15_000) {
        lastReport = performance.now();
        log(`  … ${consumed.toLocaleString()} readings consumed`);
      }
    }
  };
  await Promise.all(Array.from({ length: WORKERS }, worker));
  const seconds = (performance.now() - started) / 1000;
  const history = DEVICES * DAYS * (DAY / (INTERVAL_S * 1000));
  const segments = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM telemetry_segments`);
  const sessions = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM usage_sessions`);
  log(
    `derivation: ${history.toLocaleString()} readings of history in ${seconds.toFixed(1)} s = ${Math.round(history / seconds).toLocaleString()} readings/s ` +
      `(${WORKERS} workers; ${consumed.toLocaleString()} read incl. re-reads; ${segments.rows[0]!.n.toLocaleString()} segments, ${sessions.rows[0]!.n.toLocaleString()} usage sessions)`,
  );
  void start;
}

async function refreshTimed(pool: Pool, mode: StorageMode, label: string): Promise<void> {
  const started = performance.now();
  for (;;) {
    const result = await refreshGold({ pool, logger: silentLogger(), storageMode: mode });
    if (result.failed.length > 0) throw new Error(`gold refresh failed: ${result.failed.join(', ')}`);
    if (!result.more) break;
  }
  log(`${label}: ${((performance.now() - started) / 1000).toFixed(1)} s`);
}

/** Inserts live readings at RATE/s for every device while workers derive; returns lag samples. */
async function sustainedLoad(pool: Pool, url: string, mode: StorageMode): Promise<void> {
  const deps = derivationDeps(pool, url);
  const writer = createPool(url, { max: 2 });
  const lags: number[] = [];
  let stopping = false;
  let inserted = 0;

  const started = performance.now();
  const cpuBefore = machineCpuSeconds();
  const walBefore = (await pool.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn')).rows[0]!.lsn;
  let derivedDevices = 0;
  const deviceIds = (
    await pool.query<{ id: string; asset_id: string }>(
      `SELECT id, asset_id FROM devices WHERE tenant_id = $1 ORDER BY id`,
      [TENANT],
    )
  ).rows;
  // Each device's readings advance 1 ms per reading from now, so ts are unique and current.
  const cursor = new Map<string, number>();
  const writerLoop = async () => {
    let tick = 0;
    const began = performance.now();
    while (!stopping) {
      const due = began + tick * 200;
      const wait = due - performance.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      tick += 1;
      const now = Date.now();
      // Whatever is due by now: a slow commit makes the next batch bigger, not the rate lower.
      const perTick = Math.round((RATE * (performance.now() - began)) / 1000) - inserted;
      if (perTick <= 0) continue;
      const devices: string[] = [];
      const assets: string[] = [];
      const times: string[] = [];
      const lats: number[] = [];
      for (let i = 0; i < perTick; i += 1) {
        const device = deviceIds[(inserted + i) % deviceIds.length]!;
        const ts = Math.max(now, (cursor.get(device.id) ?? 0) + 1);
        cursor.set(device.id, ts);
        devices.push(device.id);
        assets.push(device.asset_id);
        times.push(new Date(ts).toISOString());
        lats.push(53.5 + ((ts / 1000) % 100) * 0.00005);
      }
      const client = await writer.connect();
      try {
        await client.query('BEGIN');
        await client.query(
          `INSERT INTO telemetry_readings (tenant_id, device_id, asset_id, type, ts, received_at, ignition, latitude, longitude, gps_valid, fix)
           SELECT $1, d, a, 'gps', t, now(), true, la, 9.95, true, true FROM unnest($2::uuid[], $3::uuid[], $4::timestamptz[], $5::float8[]) AS r(d, a, t, la)
           ON CONFLICT DO NOTHING`,
          [TENANT, devices, assets, times, lats],
        );
        // Marked as ingest marks them (markDirtySql: rows locked in device order, as the
        // worker's settling locks them; marking in another order deadlocks with it).
        const first = new Map<string, string>();
        devices.forEach((device, i) => {
          if (!first.has(device)) first.set(device, times[i]!);
        });
        await client.query(markDirtySql, [[...first.keys()], [...first.keys()].map(() => TENANT), [...first.values()]]);
        await client.query('COMMIT');
        inserted += perTick;
      } catch (error) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw error;
      } finally {
        client.release();
      }
    }
  };
  const workerLoop = async () => {
    while (!stopping) {
      const run = await deriveDirtyDevices(deps);
      derivedDevices += run.devices;
      // The first seconds catch up from where the previous phase left the devices.
      if (run.lagSeconds !== null && performance.now() - started > WARM_UP_MS) lags.push(run.lagSeconds);
      if (run.devices === 0) await new Promise((resolve) => setTimeout(resolve, 50));
    }
  };
  const goldLoop = async () => {
    while (!stopping) {
      await refreshGold({ pool, logger: silentLogger(), storageMode: mode });
      await new Promise((resolve) => setTimeout(resolve, 5_000));
    }
  };
  const tasks = [writerLoop(), goldLoop(), ...Array.from({ length: WORKERS }, workerLoop)];
  await new Promise((resolve) => setTimeout(resolve, LIVE_SECONDS * 1000));
  stopping = true;
  await Promise.all(tasks);
  await writer.end();
  const seconds = (performance.now() - started) / 1000;
  log(
    `lag under load: ${Math.round(inserted / seconds).toLocaleString()} readings/s inserted for ${seconds.toFixed(0)} s; ` +
      `derivation lag p50 ${percentile(lags, 50).toFixed(2)} s, p99 ${percentile(lags, 99).toFixed(2)} s, max ${Math.max(...lags).toFixed(2)} s ` +
      `(${lags.length} runs after a ${WARM_UP_MS / 1000} s warm-up; ${WORKERS} workers; target p99 < 5 s)`,
  );
  const cpu = machineCpuSeconds() - cpuBefore;
  const wal = (
    await pool.query<{ bytes: string }>('SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::bigint AS bytes', [
      walBefore,
    ])
  ).rows[0]!.bytes;
  log(
    `CPU under load: the whole machine ${cpu.toFixed(1)} s in ${seconds.toFixed(0)} s (${(cpu / seconds).toFixed(2)} cores: ` +
      `this process, its database backends and anything else running), ${derivedDevices.toLocaleString()} device derivations, ` +
      `${((1000 * cpu) / Math.max(1, derivedDevices)).toFixed(2)} ms of CPU per device derivation; ` +
      `WAL written ${(Number(wal) / 1048576).toFixed(0)} MiB (the inserted readings included)`,
  );
}

/** CPU time the whole machine has spent busy since boot, in seconds. */
function machineCpuSeconds(): number {
  const { idle, total } = cpuTimes();
  return (total - idle) / 100;
}

/** The session tables after the phase before: backends publish their counters within 10 s of going idle. */
async function settledSessionTables(pool: Pool): Promise<SessionTableStats[]> {
  await new Promise((resolve) => setTimeout(resolve, 11_000));
  return sessionTableStats(pool);
}

function logSessionTables(phase: string, before: SessionTableStats[], after: SessionTableStats[]): void {
  for (const line of describeSessionTables(before, after)) log(`session tables during the ${phase}, ${line}`);
}

/**
 * A database of its own for the query: 30 days × 500 assets of segments (four per asset
 * and hour: driving empty, stationary loaded, driving loaded, parked), seeded once.
 */
async function prepareQueryDatabase(mode: StorageMode): Promise<{ pool: Pool; from: number; to: number }> {
  const database = `gantry_bench_derive_query_${mode}`;
  const url = withDatabase(benchServerUrl(), database);
  const marker = `derive-query-bench-v1:${QUERY_ASSETS}x${QUERY_DAYS}`;
  const exists = await onServer(
    async (client) => (await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [database])).rowCount === 1,
  );
  if (exists && !args.has('--reseed')) {
    const pool = createPool(url, { max: 4 });
    const { rows } = await pool.query<{ value: { marker: string; from: number; to: number } }>(
      `SELECT value FROM gantry_meta WHERE key = 'bench:derive-query'`,
    );
    if (rows[0]?.value.marker === marker) {
      log(`reusing the seeded ${database} (${QUERY_ASSETS} assets × ${QUERY_DAYS} days of segments)`);
      return { pool, from: rows[0].value.from, to: rows[0].value.to };
    }
    await pool.end();
  }
  await onServer(async (client) => {
    await client.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    await client.query(`CREATE DATABASE ${database}`);
  });
  await migrateDatabase(url, { storageMode: mode, retention: { bronzeDays: 14, readingDays: 400 } });
  const pool = createPool(url, { max: 4 });
  if (mode === 'timescaledb')
    await pool.query(
      `SELECT alter_job(job_id, scheduled => false) FROM timescaledb_information.jobs WHERE job_id >= 1000`,
    );
  const to = Math.floor(Date.now() / DAY) * DAY;
  const from = to - QUERY_DAYS * DAY;
  await pool.query(`INSERT INTO tenants (id, name) VALUES ($1, 'Bench query fleet')`, [QUERY_TENANT]);
  await pool.query(
    `INSERT INTO assets (id, tenant_id, name, identifier) SELECT md5('bench-query-asset-' || d)::uuid, $1, 'Query ' || d, 'BQ-' || d
       FROM generate_series(0, $2 - 1) d`,
    [QUERY_TENANT, QUERY_ASSETS],
  );
  const started = performance.now();
  await pool.query(`ALTER TABLE telemetry_segments DROP CONSTRAINT telemetry_segments_pkey`);
  await pool.query(`DROP INDEX telemetry_segments_asset_idx, telemetry_segments_tenant_idx`);
  await pool.query(
    `INSERT INTO telemetry_segments (tenant_id, device_id, asset_id, start_ts, end_ts, has_data, running, moving, loaded, seconds,
       distance_m, hourmeter_delta, container_cycles, imu_anomalies, imu_samples, gps_points)
     SELECT $1, md5('bench-query-device-' || a)::uuid, md5('bench-query-asset-' || a)::uuid,
            h + p.offset_s * interval '1 second', h + (p.offset_s + p.len) * interval '1 second', true,
            p.running, p.moving, p.loaded, p.len, CASE WHEN p.moving THEN p.len * (2.5 + (a % 7) * 0.1) ELSE 0 END,
            CASE WHEN p.running THEN p.len ELSE 0 END, CASE WHEN p.loaded AND p.offset_s = 1200 THEN 1 ELSE 0 END, 0, 0, p.len / 10
       FROM generate_series(0, $2 - 1) a
      CROSS JOIN generate_series($3::timestamptz, $4::timestamptz - interval '1 hour', interval '1 hour') h
      CROSS JOIN (VALUES (0, 1200, true, true, false), (1200, 900, true, false, true), (2100, 900, true, true, true), (3000, 600, false, false, false))
            AS p(offset_s, len, running, moving, loaded)`,
    [QUERY_TENANT, QUERY_ASSETS, new Date(from), new Date(to)],
  );
  await pool.query(`ALTER TABLE telemetry_segments ADD PRIMARY KEY (device_id, start_ts)`);
  await pool.query(`CREATE INDEX telemetry_segments_asset_idx ON telemetry_segments (asset_id, start_ts)`);
  await pool.query(`CREATE INDEX telemetry_segments_tenant_idx ON telemetry_segments (tenant_id, start_ts)`);
  await pool.query('ANALYZE telemetry_segments');
  log(
    `query fleet: ${(QUERY_ASSETS * QUERY_DAYS * 24 * 4).toLocaleString()} segments seeded in ${((performance.now() - started) / 1000).toFixed(1)} s`,
  );
  await refreshTimed(pool, mode, 'query fleet: gold built from scratch');
  await pool.query('ANALYZE');
  await pool.query(
    `INSERT INTO gantry_meta (key, value) VALUES ('bench:derive-query', $1::jsonb) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`,
    [JSON.stringify({ marker, from, to })],
  );
  return { pool, from, to };
}

async function queryTimes(pool: Pool, range: { from: number; to: number }): Promise<void> {
  const assetIds = (
    await pool.query<{ id: string }>(`SELECT id FROM assets WHERE tenant_id = $1`, [QUERY_TENANT])
  ).rows.map((r) => r.id);
  const base = {
    tenantId: QUERY_TENANT,
    assetIds,
    from: new Date(range.from),
    to: new Date(range.to),
    bucket: 'hour' as const,
  };
  const measure = async (label: string, query: Parameters<typeof readUtilization>[1], runs: number) => {
    const times: number[] = [];
    let rows = 0;
    let source = '';
    for (let i = 0; i < runs; i += 1) {
      const started = performance.now();
      const result = await readUtilization(pool, query);
      times.push(performance.now() - started);
      rows = result.rows.length;
      source = result.source;
    }
    return { label, p50: percentile(times, 50), p95: percentile(times, 95), rows, source };
  };
  for (const [label, extra] of [
    ['fleet, first page of 100 buckets', { groupBy: 'fleet' as const, limit: 100 }],
    ['fleet, all 720 buckets', { groupBy: 'fleet' as const }],
    ['per asset, first page of 100', { groupBy: 'asset' as const, limit: 100 }],
  ] as const) {
    await measure('warm-up', { ...base, ...extra, forceSource: 'gold' }, 2);
    const gold = await measure(label, { ...base, ...extra }, 20);
    const live = await measure(label, { ...base, ...extra, forceSource: 'live' }, 5);
    log(
      `hourly utilization, ${QUERY_DAYS} days × ${assetIds.length} assets, ${label}: ` +
        `gold (${gold.source}) p50 ${gold.p50.toFixed(1)} ms p95 ${gold.p95.toFixed(1)} ms; ` +
        `live p50 ${live.p50.toFixed(1)} ms p95 ${live.p95.toFixed(1)} ms; gold is ${(live.p50 / gold.p50).toFixed(1)}× faster ` +
        `(targets: ≥ 20×, p95 < 50 ms; ${gold.rows} rows)`,
    );
  }
}

async function main(): Promise<void> {
  const mode = await chooseMode();
  log(
    `bench:derive — ${mode} mode, ${DEVICES} devices × ${DAYS} days at one reading every ${INTERVAL_S} s; the machine is shared, figures are indicative`,
  );
  const { pool, url, start } = await prepare(mode);
  try {
    if (args.has('--skip-backlog')) {
      log('--skip-backlog: keeping what the previous run derived');
    } else {
      await resetDerived(pool, start);
      const beforeBacklog = await settledSessionTables(pool);
      await deriveBacklog(pool, url, start);
      logSessionTables('backlog', beforeBacklog, await settledSessionTables(pool));
      await refreshTimed(pool, mode, 'first utilization gold refresh (hourly and daily, from scratch)');
    }
    const beforeLoad = await settledSessionTables(pool);
    await sustainedLoad(pool, url, mode);
    logSessionTables('load', beforeLoad, await settledSessionTables(pool));
    if (args.has('--skip-queries')) return;
    const query = await prepareQueryDatabase(mode);
    try {
      await queryTimes(query.pool, query);
    } finally {
      await query.pool.end();
    }
  } finally {
    await pool.end();
    if (args.has('--drop')) {
      await onServer(async (client) => {
        await client.query(`DROP DATABASE IF EXISTS gantry_bench_derive_${mode} WITH (FORCE)`);
        await client.query(`DROP DATABASE IF EXISTS gantry_bench_derive_query_${mode} WITH (FORCE)`);
      });
    }
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
