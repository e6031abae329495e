/**
 * pnpm bench:api — the Telemetry API on a 500-asset history, over real HTTP.
 *
 * Seeds a dedicated database (gantry_bench_api) with 14 days of derived history for 500
 * assets (segments every 20 minutes, usage and identifier sessions, alerts, service
 * requests) and the last 24 hours of silver readings and bronze messages, then runs the
 * worker's own gold refresh (refreshGold) until gold is complete, and ANALYZEs. A seed
 * younger than 12 hours is reused; --reseed rebuilds it, --drop removes the database at
 * the end.
 *
 * The API runs in a child process (test/bench/api-server.ts) so its memory can be
 * sampled alone. Each endpoint gets GANTRY_BENCH_REQUESTS requests (default 300) from
 * autocannon at concurrency GANTRY_BENCH_CONCURRENCY (default 8) after a short warm-up;
 * p50/p95 are computed from every response time. Then 50,000-row CSV and XLSX exports
 * are timed (median of 3, to the last byte) with the API process's peak RSS.
 * Targets (the baseline each figure is printed next to): p95 < 50 ms for lists and gold
 * metrics, CSV < 1 s, XLSX < 5 s. On a shared machine the figures are indicative.
 * GANTRY_BENCH_STORAGE_MODE: auto (default), postgres or timescaledb; --exports-only skips
 * the endpoint runs.
 */
import { performance } from 'node:perf_hooks';
import autocannon from 'autocannon';
import type pg from 'pg';
import { provisioning } from '@gantry/api';
import { createOutbox, createPool, migrateDatabase, type Pool, type StorageMode } from '@gantry/db';
import { silentLogger } from '@gantry/logger';
import { recountCounters } from '../../services/ingest/src/storage/counters.ts';
import { refreshGold } from '../../services/worker/src/features/gold/refresh.ts';
import { benchServerUrl, onServer as onTestServer, withDatabase } from '../support/database-url.ts';
import { startBenchApi, type ApiProcess } from './api-process.ts';

const onServer = <T>(fn: (client: pg.Client) => Promise<T>) => onTestServer(fn, benchServerUrl());

const SEED_VERSION = 'api-bench-v2'; // v2: traffic counters recounted after the seed
const DATABASE = 'gantry_bench_api';
const ASSETS = 500;
const HISTORY_DAYS = 14;
const CONCURRENCY = Number(process.env.GANTRY_BENCH_CONCURRENCY ?? 8);
const REQUESTS = Number(process.env.GANTRY_BENCH_REQUESTS ?? 300);
const STORAGE_MODE = (process.env.GANTRY_BENCH_STORAGE_MODE ?? 'auto') as 'auto' | StorageMode;
const args = new Set(process.argv.slice(2));
const HOUR = 3_600_000;
const DAY = 24 * HOUR;

function log(message: string): void {
  process.stdout.write(`${new Date().toISOString().slice(11, 19)} ${message}\n`);
}

async function timed<T>(label: string, fn: () => Promise<T>): Promise<T> {
  const started = performance.now();
  const result = await fn();
  log(`${label}: ${((performance.now() - started) / 1000).toFixed(1)} s`);
  return result;
}

interface Seed {
  version: string;
  tenantId: string;
  tenantKey: string;
  customerKey: string;
  /** The hour the history ends at (exclusive); ranges are anchored to it. */
  anchor: string;
  assetId: string;
  exportFrom: string;
}

async function seed(pool: Pool): Promise<Seed> {
  const deps = { pool, outbox: createOutbox({ maxAttempts: 3 }) };
  const tenant = await provisioning.createTenant(deps, { name: 'Bench terminal' });
  const t = tenant.id;
  const tenantKey = (await provisioning.createApiKey(deps, t, { name: 'bench tenant key' })).key;
  const customerKey = (
    await provisioning.createApiKey(deps, t, { name: 'bench customer key', customerName: 'Customer 03' })
  ).key;
  const type = await provisioning.createAssetType(deps, t, { name: 'Straddle carrier' });
  const anchor = new Date(Math.floor(Date.now() / HOUR) * HOUR);
  const start = new Date(anchor.getTime() - HISTORY_DAYS * DAY);
  const run = (label: string, sql: string, params: unknown[] = [t, start, anchor]) =>
    timed(label, () => pool.query(sql, params));

  await run(
    'assets and devices',
    `WITH a AS (
       INSERT INTO assets (tenant_id, asset_type_id, name, identifier, display_code, location, customer_name)
       SELECT $1, $2::uuid, 'Straddle ' || lpad(g::text, 3, '0'), 'SC-' || lpad(g::text, 3, '0'), 'SC' || lpad(g::text, 3, '0'),
              'Yard ' || (g % 5 + 1), 'Customer ' || lpad((g % 10 + 1)::text, 2, '0')
         FROM generate_series(1, ${ASSETS}) AS g
       RETURNING id, identifier, name)
     INSERT INTO devices (tenant_id, device_id, asset_id, display_name)
     SELECT $1, 'bench-' || lower(a.identifier), a.id, a.name || ' tracker' FROM a`,
    [t, type.id],
  );
  await run(
    'operators and device state',
    `WITH o AS (
       INSERT INTO operators (tenant_id, identifier, operator_name)
       SELECT $1, 'OP-' || lpad(g::text, 3, '0'), 'Operator ' || g FROM generate_series(1, 100) AS g RETURNING 1)
     INSERT INTO device_state (device_id, tenant_id, asset_id, first_seen_at, last_seen_at, last_message_at, last_message_type,
       latitude, longitude, position_ts, gps_valid, adc_on, adc_ts, hourmeter, hourmeter_ts, identifier, identifier_ts,
       ignition, ignition_ts, heartbeat_ts, battery_v)
     SELECT d.id, d.tenant_id, d.asset_id, $2::timestamptz, $3::timestamptz - random() * interval '30 minutes', $3::timestamptz - interval '1 minute', 'gps',
            51.9 + random() * 0.1, 4.0 + random() * 0.1, $3::timestamptz - interval '1 minute', true, random() < 0.5, $3::timestamptz - interval '5 minutes',
            3600 * 24 * 300, $3::timestamptz - interval '1 minute', 'OP-' || lpad((floor(random() * 100) + 1)::int::text, 3, '0'), $3::timestamptz - interval '2 hours',
            true, $3::timestamptz - interval '3 hours', $3::timestamptz - interval '1 minute', 12.6
       FROM devices d WHERE d.tenant_id = $1`,
  );
  await run(
    'segments (3 per asset and hour)',
    `INSERT INTO telemetry_segments (tenant_id, device_id, asset_id, start_ts, end_ts, has_data, running, moving, loaded, seconds,
       distance_m, hourmeter_delta, container_cycles, imu_anomalies, imu_samples, gps_points)
     SELECT d.tenant_id, d.id, d.asset_id, h + s.off, h + s.off + interval '20 minutes', true, s.running, s.moving, s.loaded, 1200,
            s.dist * (0.5 + random()), CASE WHEN s.running THEN 1200 ELSE 0 END, s.cycles, 0, 10, 20
       FROM devices d,
            generate_series($2::timestamptz, $3::timestamptz - interval '1 hour', interval '1 hour') AS h,
            (VALUES (interval '0 minutes', true, true, true, 1500.0, 2),
                    (interval '20 minutes', true, false, false, 0.0, 0),
                    (interval '40 minutes', false, false, false, 0.0, 0)) AS s(off, running, moving, loaded, dist, cycles)
      WHERE d.tenant_id = $1`,
  );
  for (const [table, extra] of [
    ['usage_sessions', ''],
    ['identifier_sessions', ''],
  ] as const) {
    const usage = table === 'usage_sessions';
    await run(
      `${table} (every 160 minutes per asset)${extra}`,
      usage
        ? `INSERT INTO usage_sessions (id, tenant_id, device_id, asset_id, start_ts, end_ts, is_open, start_reason, end_reason, confidence,
             identifier, distance_m, duration_seconds, moving_seconds, stationary_running_seconds, stop_count, trip_count,
             imu_anomaly_count, imu_sample_count, hourmeter_delta, container_cycle_count, loaded_seconds, empty_seconds,
             loaded_distance_m, empty_distance_m)
           SELECT gen_random_uuid(), d.tenant_id, d.id, d.asset_id, s, s + interval '2 hours', false, 'ignition_on', 'ignition_off', 1,
                  'OP-' || lpad(((abs(hashtext(d.device_id)) + extract(hour FROM s)::int) % 100 + 1)::text, 3, '0'),
                  9000, 7200, 3600, 3600, 4, 5, 1, 300, 7200, 12, 2400, 4800, 3000, 6000
             FROM devices d, generate_series($2::timestamptz, $3::timestamptz - interval '160 minutes', interval '160 minutes') AS s
            WHERE d.tenant_id = $1`
        : `INSERT INTO identifier_sessions (id, tenant_id, device_id, asset_id, identifier, start_ts, end_ts, is_open, end_reason, confidence,
             distance_m, duration_seconds, event_count, gps_point_count, stop_count, trip_count, container_cycle_count,
             loaded_seconds, empty_seconds, loaded_distance_m, empty_distance_m)
           SELECT gen_random_uuid(), d.tenant_id, d.id, d.asset_id,
                  'OP-' || lpad(((abs(hashtext(d.device_id)) + extract(hour FROM s)::int) % 100 + 1)::text, 3, '0'),
                  s, s + interval '2 hours', false, 'logout', 1, 9000, 7200, 400, 360, 4, 5, 12, 2400, 4800, 3000, 6000
             FROM devices d, generate_series($2::timestamptz, $3::timestamptz - interval '160 minutes', interval '160 minutes') AS s
            WHERE d.tenant_id = $1`,
    );
  }
  await run(
    'silver GPS readings and bronze messages (last 24 h, every 2 minutes)',
    `WITH grid AS (
       SELECT d.tenant_id, d.id AS device_id, d.asset_id, d.device_id AS device_key, g AS ts, random() > 0.05 AS valid, random() < 0.01 AS rejected
         FROM devices d, generate_series($2::timestamptz - interval '24 hours', $2::timestamptz - interval '2 minutes', interval '2 minutes') AS g
        WHERE d.tenant_id = $1),
     silver AS (
       INSERT INTO telemetry_readings (tenant_id, device_id, asset_id, type, ts, received_at, latitude, longitude, gps_valid, fix)
       SELECT tenant_id, device_id, asset_id, 'gps', ts, ts + interval '2 seconds', 51.9 + random() * 0.1, 4.0 + random() * 0.1, valid, true
         FROM grid WHERE NOT rejected RETURNING 1)
     INSERT INTO device_messages (received_at, topic, device_key, device_id, tenant_id, asset_id, message_type, status, error, error_detail,
       device_ts, reading_count, payload_size, payload)
     SELECT ts + interval '2 seconds', 'gantry/v1/devices/' || device_key || '/gps', device_key, device_id, tenant_id, asset_id, 'gps',
            CASE WHEN rejected THEN 'rejected' ELSE 'accepted' END, CASE WHEN rejected THEN 'out_of_range' END,
            CASE WHEN rejected THEN 'lat must be between -90 and 90' END, ts, CASE WHEN rejected THEN 0 ELSE 1 END, 64,
            convert_to('{"ts":"' || ts || '","lat":' || CASE WHEN rejected THEN '95' ELSE '51.9' END || ',"lon":4.0}', 'UTF8')
       FROM grid`,
    [t, anchor],
  );
  await run(
    'geofences, memberships, alerts, service requests',
    `WITH zones AS (
       INSERT INTO geofences (tenant_id, name, type, geometry, bbox)
       SELECT $1, 'Zone ' || g, CASE WHEN g <= 5 THEN 'forbidden' ELSE 'allowed' END,
              jsonb_build_object('type', 'Polygon', 'coordinates', jsonb_build_array(jsonb_build_array(
                jsonb_build_array(4.0 + g * 0.01, 51.9), jsonb_build_array(4.01 + g * 0.01, 51.9), jsonb_build_array(4.01 + g * 0.01, 51.91),
                jsonb_build_array(4.0 + g * 0.01, 51.91), jsonb_build_array(4.0 + g * 0.01, 51.9)))),
              ARRAY[4.0 + g * 0.01, 51.9, 4.01 + g * 0.01, 51.91]
         FROM generate_series(1, 10) AS g RETURNING id, name),
     inside AS (
       INSERT INTO geofence_memberships (tenant_id, geofence_id, asset_id, device_id, inside, changed_at)
       SELECT $1, z.id, d.asset_id, d.id, true, $3::timestamptz
         FROM devices d JOIN zones z ON z.name = 'Zone ' || (abs(hashtext(d.device_id)) % 10 + 1)
        WHERE d.tenant_id = $1 RETURNING 1),
     alerts AS (
       INSERT INTO geofence_alerts (tenant_id, geofence_id, asset_id, device_id, alert_type, status, is_active, created_at, acknowledged_at, resolved_at)
       SELECT $1, z.id, d.asset_id, d.id, 'forbidden_enter', CASE WHEN k % 3 = 0 THEN 'acknowledged' ELSE 'open' END, false,
              $2::timestamptz + k * interval '16 hours' + (abs(hashtext(d.device_id)) % 600) * interval '1 minute',
              CASE WHEN k % 3 = 0 THEN $2::timestamptz + k * interval '16 hours' + (abs(hashtext(d.device_id)) % 600 + 5) * interval '1 minute' END,
              $2::timestamptz + k * interval '16 hours' + (abs(hashtext(d.device_id)) % 600 + 10) * interval '1 minute'
         FROM devices d, generate_series(0, 19) AS k, zones z
        WHERE d.tenant_id = $1 AND z.name = 'Zone 1' RETURNING 1),
     numbered AS (SELECT id, customer_name, row_number() OVER (ORDER BY identifier) - 1 AS n FROM assets WHERE tenant_id = $1)
     INSERT INTO service_requests (tenant_id, seq, display_code, title, status, priority, customer_name, asset_id, created_at, updated_at)
     SELECT $1, g, 'SR-' || g, 'Bench request ' || g,
            (ARRAY['new', 'triaged', 'in_progress', 'resolved', 'closed', 'cancelled'])[g % 6 + 1],
            (ARRAY['low', 'normal', 'high', 'urgent'])[g % 4 + 1], a.customer_name, a.id,
            $2::timestamptz + g * interval '4 minutes', $2::timestamptz + g * interval '4 minutes'
       FROM generate_series(1, 5000) AS g JOIN numbered a ON a.n = g % ${ASSETS}`,
  );
  await pool.query(`INSERT INTO service_request_counters (tenant_id, last_seq) VALUES ($1, 5000)`, [t]);

  const assetId = (
    await pool.query<{ id: string }>(`SELECT id FROM assets WHERE tenant_id = $1 ORDER BY identifier LIMIT 1`, [t])
  ).rows[0]!.id;
  return {
    version: SEED_VERSION,
    tenantId: t,
    tenantKey,
    customerKey,
    anchor: anchor.toISOString(),
    assetId,
    exportFrom: start.toISOString(),
  };
}

async function refreshAllGold(pool: Pool, storageMode: StorageMode): Promise<void> {
  for (let step = 0; step < 1000; step += 1) {
    const result = await refreshGold({ pool, logger: silentLogger(), storageMode });
    if (result.failed.length > 0) throw new Error(`gold refresh failed for ${result.failed.join(', ')}`);
    if (!result.more && result.applied === 0) return;
  }
}

async function prepare(): Promise<{ url: string; seed: Seed; storageMode: StorageMode }> {
  const url = withDatabase(benchServerUrl(), DATABASE);
  if (args.has('--reseed'))
    await onServer((client) => client.query(`DROP DATABASE IF EXISTS ${DATABASE} WITH (FORCE)`));
  const exists = await onServer(
    async (client) => (await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [DATABASE])).rowCount === 1,
  );
  if (exists) {
    const pool = createPool(url, { max: 2 });
    try {
      const marker = await pool
        .query<{ value: Seed }>(`SELECT value FROM gantry_meta WHERE key = 'bench:api'`)
        .then((result) => result.rows[0]?.value)
        .catch(() => undefined);
      const mode = await pool
        .query<{ value: StorageMode }>(`SELECT value #>> '{}' AS value FROM gantry_meta WHERE key = 'storage_mode'`)
        .catch(() => null);
      const recorded = mode?.rows[0]?.value;
      const sameMode = recorded !== undefined && (STORAGE_MODE === 'auto' || STORAGE_MODE === recorded);
      if (marker?.version === SEED_VERSION && Date.now() - Date.parse(marker.anchor) < 12 * HOUR && sameMode) {
        log(`reusing the seed of ${marker.anchor} (--reseed to rebuild)`);
        return { url, seed: marker, storageMode: recorded };
      }
    } finally {
      await pool.end();
    }
    await onServer((client) => client.query(`DROP DATABASE IF EXISTS ${DATABASE} WITH (FORCE)`));
  }
  await onServer((client) => client.query(`CREATE DATABASE ${DATABASE}`));
  const { storageMode } = await timed('migrate', () =>
    migrateDatabase(url, { storageMode: STORAGE_MODE, retention: { bronzeDays: 14, readingDays: 400 } }),
  );
  log(`storage mode: ${storageMode}`);
  const pool = createPool(url, { max: 4 });
  try {
    const seeded = await seed(pool);
    await timed('gold refresh (the worker’s refreshGold)', () => refreshAllGold(pool, storageMode));
    // The seed writes bronze and silver directly: count them as ingest would have.
    await timed('traffic counters (recountCounters)', () => recountCounters(pool));
    await timed('analyze', () => pool.query('ANALYZE'));
    await pool.query(`INSERT INTO gantry_meta (key, value) VALUES ('bench:api', $1)`, [JSON.stringify(seeded)]);
    return { url, seed: seeded, storageMode };
  } finally {
    await pool.end();
  }
}

interface Scenario {
  name: string;
  path: string;
  key: string;
  /** p95 target in ms; null for endpoints the targets do not name (shown for information). */
  target: number | null;
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

async function load(url: string, scenario: Scenario, amount: number, record: boolean) {
  const latencies: number[] = [];
  const statuses = new Map<number, number>();
  let instance!: autocannon.Instance;
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    instance = autocannon(
      {
        url: `${url}/api/external/v1${scenario.path}`,
        headers: { 'x-api-key': scenario.key },
        connections: CONCURRENCY,
        amount,
        timeout: 30,
      },
      (error, finished) => (error ? reject(error) : resolve(finished)),
    );
    instance.on('response', (_client, statusCode, _bytes, responseTime) => {
      if (!record) return;
      latencies.push(responseTime);
      statuses.set(statusCode, (statuses.get(statusCode) ?? 0) + 1);
    });
  });
  latencies.sort((a, b) => a - b);
  return { latencies, statuses, result };
}

async function timeExport(api: ApiProcess, path: string, key: string) {
  const baseline = api.rssKb();
  let peak = baseline;
  const sampler = setInterval(() => {
    peak = Math.max(peak, api.rssKb());
  }, 10);
  const started = performance.now();
  const response = await fetch(`${api.url}/api/external/v1${path}`, { headers: { 'x-api-key': key } });
  let bytes = 0;
  let newlines = 0;
  const reader = response.body!.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    bytes += value.byteLength;
    for (const byte of value) if (byte === 10) newlines += 1;
  }
  const seconds = (performance.now() - started) / 1000;
  clearInterval(sampler);
  peak = Math.max(peak, api.rssKb());
  if (response.status !== 200) throw new Error(`${path} answered ${response.status}`);
  return {
    seconds,
    bytes,
    newlines,
    baselineMb: baseline / 1024,
    peakMb: peak / 1024,
    truncated: response.headers.get('x-export-truncated'),
  };
}

const fmt = (value: number, digits = 1) => (Number.isFinite(value) ? value.toFixed(digits) : '—');
const pad = (text: string, width: number) => text.padEnd(width);

async function main(): Promise<void> {
  const { url: databaseUrl, seed, storageMode } = await prepare();
  const api = await startBenchApi(databaseUrl, { GANTRY_DB_POOL_SIZE: '16' });
  const anchor = Date.parse(seed.anchor);
  const iso = (ms: number) => new Date(ms).toISOString();
  const lastDay = `from=${iso(anchor - DAY)}&to=${iso(anchor)}`;
  const lastWeek = `from=${iso(anchor - 7 * DAY)}&to=${iso(anchor)}`;
  const history = `from=${seed.exportFrom}&to=${seed.anchor}`;
  const t = seed.tenantKey;
  const c = seed.customerKey;
  const scenarios: Scenario[] = [
    { name: 'capabilities', path: '/telemetry/capabilities', key: t, target: 50 },
    { name: 'devices, first page of 100', path: '/telemetry/devices', key: t, target: 50 },
    { name: 'devices, search', path: '/telemetry/devices?q=sc-04', key: t, target: 50 },
    { name: 'devices, status filter', path: '/telemetry/devices?status=online', key: t, target: 50 },
    { name: 'asset state', path: `/telemetry/assets/${seed.assetId}/state`, key: t, target: 50 },
    {
      name: 'positions, 24 h at 1min, 500',
      path: `/telemetry/assets/${seed.assetId}/positions?${lastDay}&limit=500`,
      key: t,
      target: 50,
    },
    { name: 'usage sessions, 7 days', path: `/telemetry/usage-sessions?${lastWeek}`, key: t, target: 50 },
    { name: 'usage sessions, page 50', path: `/telemetry/usage-sessions?${lastWeek}&offset=5000`, key: t, target: 50 },
    { name: 'usage sessions, customer key', path: `/telemetry/usage-sessions?${lastWeek}`, key: c, target: 50 },
    {
      name: 'usage sessions, one asset',
      path: `/telemetry/usage-sessions?${history}&assetId=${seed.assetId}`,
      key: t,
      target: 50,
    },
    {
      name: 'identifier sessions, OP-042',
      path: `/telemetry/identifier-sessions?${lastWeek}&identifier=OP-042`,
      key: t,
      target: 50,
    },
    { name: 'operators, 7 days', path: `/telemetry/operators?${lastWeek}`, key: t, target: 50 },
    { name: 'geofences', path: '/telemetry/geofences', key: t, target: 50 },
    { name: 'geofence alerts, 7 days', path: `/telemetry/geofence-alerts?${lastWeek}`, key: t, target: 50 },
    { name: 'utilization fleet/hour 24 h (gold)', path: `/telemetry/utilization?${lastDay}`, key: t, target: 50 },
    {
      name: 'utilization asset/hour 24 h (gold)',
      path: `/telemetry/utilization?${lastDay}&groupBy=asset`,
      key: t,
      target: 50,
    },
    {
      name: 'utilization fleet/day 14 d (gold)',
      path: `/telemetry/utilization?${history}&bucket=day`,
      key: t,
      target: 50,
    },
    { name: 'utilization customer/hour (gold)', path: `/telemetry/utilization?${lastDay}`, key: c, target: 50 },
    {
      name: 'container work fleet/day (gold)',
      path: `/telemetry/container-work?${history}&bucket=day`,
      key: t,
      target: 50,
    },
    {
      name: 'utilization fleet/hour 24 h (live)',
      path: `/telemetry/utilization?from=${iso(anchor - DAY + HOUR)}&to=${iso(anchor + HOUR)}`,
      key: t,
      target: null,
    },
    {
      name: 'service-request metrics, day',
      path: `/telemetry/service-request-metrics?${history}&bucket=day`,
      key: t,
      target: 50,
    },
    { name: 'data quality, 24 h', path: `/telemetry/data-quality?${lastDay}`, key: t, target: null },
  ];

  log(`API at ${api.url}, ${storageMode} mode, ${REQUESTS} requests per endpoint at concurrency ${CONCURRENCY}`);
  const rows: string[] = [];
  let over = 0;
  for (const scenario of args.has('--exports-only') ? [] : scenarios) {
    await load(api.url, scenario, CONCURRENCY * 2, false);
    const { latencies, statuses } = await load(api.url, scenario, REQUESTS, true);
    const p50 = percentile(latencies, 50);
    const p95 = percentile(latencies, 95);
    const bad = [...statuses.entries()].filter(([status]) => status !== 200);
    const verdict = scenario.target === null ? 'info' : p95 < scenario.target ? 'ok' : 'OVER';
    if (verdict === 'OVER') over += 1;
    const line = `${pad(scenario.name, 40)} p50 ${fmt(p50).padStart(7)} ms  p95 ${fmt(p95).padStart(7)} ms  target ${
      scenario.target === null ? '   —  ' : `< ${scenario.target} ms`
    }  ${verdict}${bad.length > 0 ? `  non-200: ${bad.map(([status, count]) => `${status}×${count}`).join(' ')}` : ''}`;
    rows.push(line);
    log(line);
  }

  const exports = [
    { name: 'usage sessions CSV, 50,000 rows', path: `/telemetry/usage-sessions/export.csv?${history}`, target: 1 },
    { name: 'usage sessions XLSX, 50,000 rows', path: `/telemetry/usage-sessions/export.xlsx?${history}`, target: 5 },
    {
      name: 'utilization asset/hour CSV, 50,000',
      path: `/telemetry/utilization/export.csv?${history}&groupBy=asset`,
      target: 1,
    },
    {
      name: 'utilization asset/hour XLSX, 50,000',
      path: `/telemetry/utilization/export.xlsx?${history}&groupBy=asset`,
      target: 5,
    },
  ];
  const exportRows: string[] = [];
  for (const item of exports) {
    const runs = [];
    for (let attempt = 0; attempt < 3; attempt += 1) runs.push(await timeExport(api, item.path, t));
    const sorted = [...runs].sort((a, b) => a.seconds - b.seconds);
    const median = sorted[1]!;
    const peak = Math.max(...runs.map((run) => run.peakMb));
    const verdict = median.seconds < item.target ? 'ok' : 'OVER';
    if (verdict === 'OVER') over += 1;
    const rowsOut = item.path.includes('.csv')
      ? `${median.newlines - 1} rows`
      : `${(median.bytes / 1e6).toFixed(1)} MB`;
    const line = `${pad(item.name, 40)} ${fmt(median.seconds, 2).padStart(6)} s (median of 3, ${rowsOut}, truncated ${median.truncated})  target < ${item.target} s  ${verdict}  API RSS ${fmt(median.baselineMb, 0)} → peak ${fmt(peak, 0)} MB`;
    exportRows.push(line);
    log(line);
  }
  const hwm = api.peakKb() / 1024;

  api.child.kill('SIGTERM');
  process.stdout.write(
    `\n== pnpm bench:api (${storageMode} mode, ${ASSETS} assets, ${HISTORY_DAYS} days; concurrency ${CONCURRENCY}; shared machine: indicative) ==\n`,
  );
  for (const line of [...rows, '', ...exportRows]) process.stdout.write(`${line}\n`);
  process.stdout.write(`API process peak RSS over the whole run: ${fmt(hwm, 0)} MB; ${over} figure(s) over target\n`);
  if (args.has('--drop')) await onServer((client) => client.query(`DROP DATABASE IF EXISTS ${DATABASE} WITH (FORCE)`));
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
