/**
 * `pnpm bench:present` — issue 14: the present at constant cost (utilization and
 * container work). In one run, on a fresh database gantry_present_<x>_test of the test
 * server (dropped at the end; PRESENT_KEEP_DATABASE=1 keeps it):
 *
 * 1. Fleet series: a tenant of PRESENT_FLEET_ASSETS (500) assets with PRESENT_FLEET_DAYS
 *    (30) days of derived segments (four per asset and hour), gold rebuilt; the hourly
 *    fleet series of all 720 buckets (and a page of 100) read through readUtilization
 *    from the fleet rollup and, side by side in the same loop, summed from per-asset gold
 *    (the path before the rollup). Target p95 < 50 ms.
 * 2. Idle, small hour: a second tenant of PRESENT_DEVICES (1000) devices whose open UTC
 *    hour holds PRESENT_LOW (300,000) readings (spread over its last 50 minutes at most;
 *    in the first 5 minutes of an hour the bench waits) (seeded into silver and marked dirty as ingest
 *    does, derived by the worker's code, which keeps gold as it derives); the API (a real process) answers
 *    utilization and container work, hour, fleet and asset, default range (reaching now),
 *    sequentially: p95 each. The live definition over the same hour (what a pending
 *    bucket costs to answer at query time) is timed beside it.
 * 3. Idle, big hour: PRESENT_HIGH − PRESENT_LOW more readings in the same hour (3,000,000
 *    in all), derived; the same figures and the ratio big / small (target
 *    ≤ 1.5).
 * 4. Under load: Mosquitto, ingest and the worker as real processes; the fleet publishes
 *    PRESENT_RATE (2,000) msg/s for PRESENT_LOAD_SECONDS (60) while two API clients go
 *    round the same questions, data quality (default range: the open hour plus 23 earlier
 *    hours counted beforehand) and the device and session lists; a probe device sends a heartbeat
 *    (ignition on) every second, and every few seconds the bench waits for one to be
 *    committed in silver, then for the API's open hour of the probe's asset to count it:
 *    the lag of the open hour behind the newest committed reading (target ≤ 5 s), and the
 *    CPU the worker took meanwhile (its process and its database backends).
 *
 * The load average is printed beside every figure: the machine is shared, figures are
 * indicative. Other env: PRESENT_REQUESTS (150 per question: a p95 of fewer moves with single slow requests), PRESENT_PHASES (fleet,idle,load),
 * GANTRY_TEST_DATABASE_URL.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { provisioning } from '@gantry/api';
import { loadConfig } from '@gantry/config';
import {
  createOutbox,
  createPool,
  migrateDatabase,
  readUtilization,
  rebuildCounterWindow,
  withTransaction,
  type Pool,
  type RequestedStorageMode,
  type StorageMode,
} from '@gantry/db';
import { silentLogger } from '@gantry/logger';
import { createPublisher, encodeMessage, publishMessages } from '@gantry/simulator';
import { deriveDirtyDevices } from '../../services/worker/src/features/derivation/service.ts';
import { refreshGold } from '../../services/worker/src/features/gold/refresh.ts';
import { startTestBroker } from '../support/broker.ts';
import { serverUrl, withDatabase } from '../support/database-url.ts';
import { provisionFleetBulk } from '../support/ingest.ts';
import { spawnService, type ServiceProcess } from '../support/processes.ts';
import { liveFleetTraffic } from './soak/live-traffic.ts';
import { countHistory } from './counter-history.ts';
import { serviceTuning } from './settings.ts';

function setting(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < 0) throw new Error(`${name} must be a non-negative number, got "${raw}"`);
  return value;
}

const FLEET_ASSETS = setting('PRESENT_FLEET_ASSETS', 500);
const FLEET_DAYS = setting('PRESENT_FLEET_DAYS', 30);
const DEVICES = setting('PRESENT_DEVICES', 1000);
const LOW = setting('PRESENT_LOW', 300_000);
const HIGH = setting('PRESENT_HIGH', 3_000_000);
const RATE = setting('PRESENT_RATE', 2000);
const LOAD_SECONDS = setting('PRESENT_LOAD_SECONDS', 60);
const REQUESTS = Math.max(5, setting('PRESENT_REQUESTS', 150));
/** API clients going round the questions while loaded. */
const API_CLIENTS = Math.round(setting('PRESENT_API_CLIENTS', 2));
/** Requests per second each of them starts (0: each as soon as the previous one ended). */
const API_RATE = setting('PRESENT_API_RATE', 5);
const KEEP = process.env.PRESENT_KEEP_DATABASE === '1';
/** Which parts run: fleet, idle, load (comma-separated; all by default). */
const PHASES = new Set((process.env.PRESENT_PHASES ?? 'fleet,idle,load').split(',').map((phase) => phase.trim()));
const HOUR = 3_600_000;
const DAY = 24 * HOUR;

const out = (line = '') => process.stdout.write(`${line}\n`);
const log = (message: string) => process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${message}\n`);
const load = () => `load ${os.loadavg()[0]!.toFixed(1)}`;
const ms = (value: number) => `${value.toFixed(1)} ms`;

function percentile(values: number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

async function timed<T>(fn: () => Promise<T>): Promise<[number, T]> {
  const started = performance.now();
  const value = await fn();
  return [performance.now() - started, value];
}

/** Runs every worker step until nothing is dirty and the gold log is applied. */
async function settle(pool: Pool, url: string, mode: StorageMode): Promise<void> {
  const config = loadConfig({ GANTRY_DATABASE_URL: url, GANTRY_LOG_LEVEL: 'silent' });
  const deps = { pool, outbox: createOutbox({ maxAttempts: 3 }), logger: silentLogger(), config };
  const worker = async () => {
    while ((await deriveDirtyDevices(deps)).devices > 0);
  };
  await Promise.all([worker(), worker()]);
  // Positions of the seeded hour (TimescaleDB mode logs them) are not what this bench
  // measures: their refresh would cost minutes here and load the phases after.
  await pool.query(`DELETE FROM gold_invalidations`);
  for (;;) {
    const result = await refreshGold(
      { pool, logger: silentLogger(), storageMode: mode },
      { only: ['utilization_hourly'] },
    );
    if (result.failed.length > 0) throw new Error(`gold refresh failed: ${result.failed.join(', ')}`);
    if (!result.more && result.busy.length === 0) return;
  }
}

// 1. Fleet series ------------------------------------------------------------------------

async function fleetSeries(pool: Pool, url: string, mode: StorageMode): Promise<void> {
  const ids = Array.from({ length: FLEET_ASSETS }, (_, i) => `present-fleet-${String(i).padStart(4, '0')}`);
  const fleet = await provisionFleetBulk(pool, ids, 'Present fleet series');
  // A fifth of the fleet for one customer: the customer's rollup is kept beside the tenant's.
  await pool.query(
    `UPDATE assets SET customer_name = 'Customer A' WHERE tenant_id = $1 AND right(identifier, 1) IN ('0', '5')`,
    [fleet.tenantId],
  );
  const to = Math.floor(Date.now() / DAY) * DAY;
  const from = to - FLEET_DAYS * DAY;
  log(`fleet series: seeding ${FLEET_ASSETS} assets × ${FLEET_DAYS} days of segments…`);
  await pool.query(
    `INSERT INTO telemetry_segments (tenant_id, device_id, asset_id, start_ts, end_ts, has_data, running, moving, loaded, seconds,
       distance_m, hourmeter_delta, container_cycles, imu_anomalies, imu_samples, gps_points)
     SELECT $1, d.id, d.asset_id, h + p.offset_s * interval '1 second', h + (p.offset_s + p.len) * interval '1 second', true,
            p.running, p.moving, p.loaded, p.len, CASE WHEN p.moving THEN p.len * 2.7 ELSE 0 END,
            CASE WHEN p.running THEN p.len ELSE 0 END, CASE WHEN p.loaded AND p.offset_s = 1200 THEN 1 ELSE 0 END, 0, 0, p.len / 10
       FROM devices d
      CROSS JOIN generate_series($2::timestamptz, $3::timestamptz - interval '1 hour', interval '1 hour') h
      CROSS JOIN (VALUES (0, 1200, true, true, false), (1200, 900, true, false, true), (2100, 900, true, true, true), (3000, 600, false, false, false))
            AS p(offset_s, len, running, moving, loaded)
      WHERE d.tenant_id = $1`,
    [fleet.tenantId, new Date(from), new Date(to)],
  );
  await pool.query('ANALYZE telemetry_segments');
  await pool.query(
    `UPDATE gold_coverage SET status = 'rebuild' WHERE relation IN ('utilization_hourly', 'utilization_daily')`,
  );
  const [rebuildMs] = await timed(() => settle(pool, url, mode));
  log(`fleet series: gold and the fleet rollup rebuilt in ${(rebuildMs / 1000).toFixed(1)} s`);
  await pool.query('ANALYZE');

  const assetIds = fleet.devices.map((device) => device.assetId);
  const base = {
    tenantId: fleet.tenantId,
    assetIds,
    from: new Date(from),
    to: new Date(to),
    bucket: 'hour' as const,
    groupBy: 'fleet' as const,
  };
  out('');
  out(`== fleet series: ${FLEET_ASSETS} assets × ${FLEET_DAYS * 24} hourly buckets (readUtilization, ${mode} mode) ==`);
  for (const [label, extra] of [
    [`all ${FLEET_DAYS * 24} buckets`, {}],
    ['page of 100 buckets', { limit: 100 }],
  ] as const) {
    const rollup: number[] = [];
    const perAsset: number[] = [];
    let rows = 0;
    for (let run = 0; run < REQUESTS + 3; run += 1) {
      // Interleaved, so both see the same machine.
      const [a, answer] = await timed(() =>
        readUtilization(pool, { ...base, ...extra, fleetScope: { customerName: null } }),
      );
      const [b, old] = await timed(() => readUtilization(pool, { ...base, ...extra }));
      if (JSON.stringify(answer.rows) !== JSON.stringify(old.rows))
        throw new Error('the rollup and the per-asset sum differ');
      rows = answer.rows.length;
      if (run < 3) continue;
      rollup.push(a);
      perAsset.push(b);
    }
    out(
      `  ${label.padEnd(20)} rollup p50 ${ms(percentile(rollup, 50))} p95 ${ms(percentile(rollup, 95))} | ` +
        `per-asset sum p50 ${ms(percentile(perAsset, 50))} p95 ${ms(percentile(perAsset, 95))} | ` +
        `${(percentile(perAsset, 95) / percentile(rollup, 95)).toFixed(1)}× (p95), ${rows} rows, target p95 < 50 ms | ${load()}`,
    );
  }
}

// 2–3. Idle hour of traffic ----------------------------------------------------------------

interface Tenant {
  tenantId: string;
  key: string;
  deviceIds: string[];
  probe: { id: string; deviceId: string; assetId: string };
}

async function provisionTraffic(pool: Pool, label: string): Promise<Tenant> {
  const run = randomBytes(2).toString('hex');
  const deviceIds = Array.from({ length: DEVICES }, (_, i) => `present-${run}-${String(i).padStart(5, '0')}`);
  const probeId = `present-${run}-probe`;
  const fleet = await provisionFleetBulk(pool, [...deviceIds, probeId], `Present traffic (${label} hour)`);
  const deps = { pool, outbox: createOutbox({ maxAttempts: 3 }) };
  const key = (await provisioning.createApiKey(deps, fleet.tenantId, { name: 'bench:present' })).key;
  const probe = fleet.byDeviceId.get(probeId)!;
  return { tenantId: fleet.tenantId, key, deviceIds, probe };
}

/**
 * `count` readings spread over [start, end) for every device except the probe, stored
 * as ingest stores them (silver rows and the derivation queue mark in one transaction,
 * per slice of devices). `phase` shifts the timestamps so a second call adds new rows.
 */
async function seedHour(
  pool: Pool,
  tenant: Tenant,
  count: number,
  start: number,
  end: number,
  phase: number,
): Promise<void> {
  const perDevice = Math.max(1, Math.round(count / DEVICES));
  const stepMs = (end - start) / perDevice;
  const slice = 100;
  for (let first = 0; first < DEVICES; first += slice) {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      // gps most of the time (moving in some minutes, parked in others), the spreader
      // switching every 12 readings, ignition on: many state changes, many segments.
      await client.query(
        `INSERT INTO telemetry_readings (tenant_id, device_id, asset_id, type, ts, received_at, ignition, latitude, longitude,
           speed_kmh, gps_valid, fix, hdop, adc_on)
         SELECT $1, d.id, d.asset_id, x.type, x.ts, now(), true,
                CASE WHEN x.type = 'gps' THEN 53.5 + (x.n % 37) * 0.0001 * x.moving END,
                CASE WHEN x.type = 'gps' THEN 9.9 + (x.n % 41) * 0.0001 * x.moving END,
                CASE WHEN x.type = 'gps' THEN 9 * x.moving END,
                CASE WHEN x.type = 'gps' THEN true END, CASE WHEN x.type = 'gps' THEN true END, CASE WHEN x.type = 'gps' THEN 0.9 END,
                CASE WHEN x.type = 'adcin' THEN (x.n / 12) % 2 = 0 END
           FROM devices d
          CROSS JOIN generate_series(0, $4::int - 1) AS s(n)
          CROSS JOIN LATERAL (
            SELECT s.n AS n, to_timestamp(($5::float8 + s.n * $6::float8 + $7::float8) / 1000.0) AS ts,
                   CASE WHEN s.n % 6 = 5 THEN 'adcin' ELSE 'gps' END AS type,
                   CASE WHEN (s.n / 30) % 3 = 0 THEN 0 ELSE 1 END AS moving
          ) x
          WHERE d.tenant_id = $1 AND d.device_id = ANY ($2::text[]) AND d.device_id <> $3
         ON CONFLICT DO NOTHING`,
        [
          tenant.tenantId,
          tenant.deviceIds.slice(first, first + slice),
          tenant.probe.deviceId,
          perDevice,
          start,
          stepMs,
          phase,
        ],
      );
      await client.query(
        `INSERT INTO derivation_queue AS q (device_id, tenant_id, dirty_from)
         SELECT id, tenant_id, $3 FROM devices WHERE tenant_id = $1 AND device_id = ANY ($2::text[]) ORDER BY id
         ON CONFLICT (device_id) DO UPDATE SET dirty_from = least(q.dirty_from, EXCLUDED.dirty_from),
           new_from = least(q.new_from, EXCLUDED.dirty_from)`,
        [tenant.tenantId, tenant.deviceIds.slice(first, first + slice), new Date(start)],
      );
      await client.query('COMMIT');
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    } finally {
      client.release();
    }
  }
}

/** Utilization and container work over the default range (the last 24 hours): the fleet series, and assets a page of 100 at a time. */
/**
 * The seeded readings of [start, end) counted as ingest would have counted them, each as a
 * message of its own received at its device time (data quality's counters), then the
 * counter window rebuilt: both were written around ingest.
 */
async function countSeeded(pool: Pool, tenant: Tenant, start: number, end: number): Promise<void> {
  const types = ['gps', 'adcin', 'hourmeter', 'imu', 'identifier', 'heartbeat'];
  await pool.query(
    `INSERT INTO device_counts_hourly AS c (tenant_id, device_id, asset_id, bucket,
       ${types.map((t) => `${t}_messages, ${t}_readings`).join(', ')}, readings_added, timed_messages, valid_gps_fixes)
     SELECT r.tenant_id, r.device_id, r.asset_id, date_bin(INTERVAL '1 hour', r.ts, TIMESTAMPTZ '2000-01-01 00:00:00+00'),
            ${types.map((t) => `count(*) FILTER (WHERE r.type = '${t}'), count(*) FILTER (WHERE r.type = '${t}')`).join(', ')},
            count(*), count(*), count(*) FILTER (WHERE r.gps_valid)
       FROM telemetry_readings r
      WHERE r.tenant_id = $1 AND r.ts >= $2 AND r.ts < $3
      GROUP BY 1, 2, 3, 4
     ON CONFLICT ON CONSTRAINT device_counts_hourly_key DO UPDATE SET
       ${types.map((t) => `${t}_messages = c.${t}_messages + excluded.${t}_messages, ${t}_readings = c.${t}_readings + excluded.${t}_readings`).join(', ')},
       readings_added = c.readings_added + excluded.readings_added, timed_messages = c.timed_messages + excluded.timed_messages,
       valid_gps_fixes = c.valid_gps_fixes + excluded.valid_gps_fixes`,
    [tenant.tenantId, new Date(start), new Date(end)],
  );
  await withTransaction(pool, (client) => rebuildCounterWindow(client));
}

const QUESTIONS = [
  { name: 'utilization hour/fleet', path: '/telemetry/utilization?bucket=hour&groupBy=fleet' },
  { name: 'utilization hour/asset (page)', path: '/telemetry/utilization?bucket=hour&groupBy=asset&limit=100' },
  { name: 'container work hour/fleet', path: '/telemetry/container-work?bucket=hour&groupBy=fleet' },
  { name: 'container work hour/asset (page)', path: '/telemetry/container-work?bucket=hour&groupBy=asset&limit=100' },
];

interface MetricBody {
  source: string;
  items: Array<{ bucketStart: string; runningSeconds: number }>;
}

async function ask(apiUrl: string, key: string, path: string): Promise<{ ms: number; body: MetricBody }> {
  const started = performance.now();
  const response = await fetch(`${apiUrl}/api/external/v1${path}`, { headers: { 'X-API-Key': key } });
  const body = (await response.json()) as MetricBody;
  if (response.status !== 200) throw new Error(`${path}: ${response.status} ${JSON.stringify(body)}`);
  return { ms: performance.now() - started, body };
}

/**
 * p95 of each question for the small-hour and the big-hour tenant, asked alternately by
 * one client, so both see the same machine (it is shared: its load moves by the minute).
 */
async function idleFigures(apiUrl: string, small: Tenant, big: Tenant): Promise<void> {
  for (const question of QUESTIONS) {
    const times = { small: [] as number[], big: [] as number[] };
    const sources = new Set<string>();
    for (let run = 0; run < REQUESTS + 3; run += 1) {
      const a = await ask(apiUrl, small.key, question.path);
      const b = await ask(apiUrl, big.key, question.path);
      sources.add(a.body.source).add(b.body.source);
      if (run < 3) continue;
      times.small.push(a.ms);
      times.big.push(b.ms);
    }
    const ratio = percentile(times.big, 95) / percentile(times.small, 95);
    out(
      `  ${question.name.padEnd(26)} small hour p50 ${ms(percentile(times.small, 50))} p95 ${ms(percentile(times.small, 95))} | ` +
        `big hour p50 ${ms(percentile(times.big, 50))} p95 ${ms(percentile(times.big, 95))} | ratio (p95) ${ratio.toFixed(2)}, target ≤ 1.5 ` +
        `(source ${[...sources].join('/')}) | ${load()}`,
    );
  }
}

/** The open hour computed from segments at query time, as a pending bucket used to be answered. */
async function liveHourFigure(pool: Pool, tenant: Tenant, label: string): Promise<void> {
  const { rows } = await pool.query<{ id: string }>(`SELECT id FROM assets WHERE tenant_id = $1`, [tenant.tenantId]);
  const now = Date.now();
  const times: number[] = [];
  // One run: on the big hour it takes seconds.
  for (let run = 0; run < 1; run += 1) {
    const [took] = await timed(() =>
      readUtilization(pool, {
        tenantId: tenant.tenantId,
        assetIds: rows.map((row) => row.id),
        from: new Date(now - HOUR),
        to: new Date(now),
        bucket: 'hour',
        groupBy: 'fleet',
        forceSource: 'live',
      }),
    );
    times.push(took);
  }
  const segments = await pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM telemetry_segments WHERE tenant_id = $1 AND start_ts >= $2`,
    [tenant.tenantId, new Date(now - 2 * HOUR)],
  );
  out(
    `  (for comparison) ${label}: the last hour computed live from its ${segments.rows[0]!.n.toLocaleString()} segments (fleet, one run) ${ms(times[0]!)} | ${load()}`,
  );
}

// 4. Under load -----------------------------------------------------------------------------

const WORKER_APPLICATION = 'bench-present-worker';
const CLOCK_TICKS = 100;

/** utime + stime of a process, seconds; null once it is gone. */
function processCpuSeconds(pid: number): number | null {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
  } catch {
    return null;
  }
}

/**
 * CPU used by the worker process and by its database backends (found by application_name,
 * sampled every second: a backend's CPU counts from its first sample to its last) from now
 * until stop().
 */
function cpuMeter(pool: Pool, pid: number) {
  const started = performance.now();
  const processStart = processCpuSeconds(pid) ?? 0;
  const backends = new Map<number, { first: number; last: number }>();
  const sample = async () => {
    const { rows } = await pool.query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE application_name = $1`, [
      WORKER_APPLICATION,
    ]);
    for (const row of rows) {
      const seconds = processCpuSeconds(row.pid);
      if (seconds === null) continue;
      const entry = backends.get(row.pid);
      if (entry) entry.last = seconds;
      else backends.set(row.pid, { first: seconds, last: seconds });
    }
  };
  let running = true;
  const sampling = (async () => {
    while (running) {
      await sample().catch(() => undefined);
      await sleep(1000);
    }
  })();
  return {
    async stop() {
      running = false;
      await sampling;
      await sample().catch(() => undefined);
      return {
        seconds: (performance.now() - started) / 1000,
        process: (processCpuSeconds(pid) ?? processStart) - processStart,
        backends: [...backends.values()].reduce((sum, b) => sum + b.last - b.first, 0),
      };
    },
  };
}

async function underLoad(pool: Pool, databaseUrl: string, api: ServiceProcess, tenant: Tenant): Promise<void> {
  // Data quality's default range is the last 24 hours: count the 23 before the open one,
  // as a fleet running all day would have them, so it reads a day's counter rows.
  const openHour = Math.floor(Date.now() / HOUR) * HOUR;
  await countHistory(pool, tenant.tenantId, openHour);
  // Written around ingest, so the counter window is built again from them.
  await withTransaction(pool, (client) => rebuildCounterWindow(client));
  const broker = await startTestBroker();
  const services: ServiceProcess[] = [];
  try {
    const run = randomBytes(3).toString('hex');
    const common = { ...serviceTuning(), GANTRY_DATABASE_URL: databaseUrl, GANTRY_MQTT_URL: broker.url };
    services.push(
      await spawnService('ingest', {
        env: { ...common, GANTRY_INGEST_CLIENT_ID: `present-${run}`, GANTRY_INGEST_SHARED_GROUP: `present-${run}` },
      }),
    );
    // The worker's connections carry their own application_name, so the CPU of its
    // database backends can be told apart from ingest's and the API's.
    const workerUrl = new URL(databaseUrl);
    workerUrl.searchParams.set('application_name', WORKER_APPLICATION);
    const worker = await spawnService('worker', { env: { ...common, GANTRY_DATABASE_URL: workerUrl.toString() } });
    services.push(worker);
    const workerCpu = cpuMeter(pool, worker.pid);
    const publisher = await createPublisher({ mqttUrl: broker.url, connections: 2, window: 2000 });
    const probePublisher = await createPublisher({ mqttUrl: broker.url, connections: 1, window: 100 });
    const stop = new AbortController();
    log(`under load: ${RATE} msg/s from ${DEVICES} devices for ${LOAD_SECONDS} s…`);
    const publishing = publishMessages(
      publisher,
      liveFleetTraffic({ deviceIds: tenant.deviceIds, rate: RATE, seconds: LOAD_SECONDS }),
      { rate: RATE, signal: stop.signal },
    );

    // The probe: a heartbeat with ignition on every second.
    let probeLast = 0;
    let probeFirst = 0;
    const probing = (async () => {
      while (!stop.signal.aborted) {
        const ts = Date.now();
        const { topic, payload } = encodeMessage({
          deviceId: tenant.probe.deviceId,
          type: 'heartbeat',
          ts,
          payload: { ts: new Date(ts).toISOString(), ignition: true },
        });
        await probePublisher.publish(topic, payload, 1);
        probeFirst ||= ts;
        probeLast = ts;
        await sleep(1000);
      }
    })();

    // API_CLIENTS clients going round what an operations console and integrators ask of a
    // fleet — each p95 target < 100 ms: data quality's summary with a page of 100 (all,
    // and the machines needing attention), utilization and container work, device pages
    // (every page in turn), and the session list for reference — and one more asking for
    // the full data-quality answer every 5 s (target p95 < 500 ms), as a console refreshing
    // the whole list would.
    const pages = Math.max(1, Math.ceil((tenant.deviceIds.length + 1) / 100));
    const rotation: Array<{ name: string; path: (round: number) => string }> = [
      { name: 'data quality (summary + page of 100)', path: () => '/telemetry/data-quality?limit=100' },
      {
        name: 'data quality (needing attention, page)',
        path: () => '/telemetry/data-quality?limit=100&status=offline,silent,errors,poor_gps,delayed',
      },
      ...QUESTIONS.map((question) => ({ name: question.name, path: () => question.path })),
      {
        name: 'devices (pages of 100, in turn)',
        path: (round) => `/telemetry/devices?limit=100&offset=${(round % pages) * 100}`,
      },
      { name: 'usage sessions (page of 100)', path: () => '/telemetry/usage-sessions?limit=100' },
    ];
    const FULL = 'data quality (full answer, every 5 s)';
    const latencies = new Map<string, number[]>([
      ...rotation.map((q) => [q.name, []] as [string, number[]]),
      [FULL, []],
    ]);
    let failures = 0;
    const record = async (name: string, path: string) => {
      try {
        const answer = await ask(api.url, tenant.key, path);
        latencies.get(name)!.push(answer.ms);
      } catch (error) {
        // Counted and reported; a reused keep-alive socket the server just closed, for one.
        failures += 1;
        log(`API request failed: ${error instanceof Error ? error.message : String(error)}`);
      }
    };
    const clients = Array.from({ length: API_CLIENTS }, (_, offset) => offset).map(async (offset) => {
      for (let i = offset; !stop.signal.aborted; i += 1) {
        const question = rotation[i % rotation.length]!;
        // Paced (a request begins every 1 / API_RATE s, or when the previous one ends if
        // later): latency at a stated load, not the throughput of a saturated machine.
        await Promise.all([
          record(question.name, question.path(Math.floor(i / rotation.length))),
          API_RATE > 0 ? sleep(1000 / API_RATE) : undefined,
        ]);
      }
    });
    if (API_CLIENTS > 0)
      clients.push(
        (async () => {
          while (!stop.signal.aborted) {
            await Promise.all([record(FULL, '/telemetry/data-quality'), sleep(5000)]);
          }
        })(),
      );

    const lags: number[] = [];
    const refreshLags: number[] = [];
    const started = performance.now();
    await sleep(10_000);
    while ((performance.now() - started) / 1000 < LOAD_SECONDS - 3) {
      const ts = probeLast;
      const hourStart = Math.floor(ts / HOUR) * HOUR;
      const expected = (ts - Math.max(hourStart, probeFirst)) / 1000;
      for (;;) {
        const { rows } = await pool.query(
          `SELECT 1 FROM telemetry_readings WHERE device_id = $1 AND type = 'heartbeat' AND ts = $2`,
          [tenant.probe.id, new Date(ts)],
        );
        if (rows.length > 0) break;
        await sleep(20);
      }
      const committed = performance.now();
      // Derived (the worker's derivation) and then in the API's open hour (in gold at the
      // derivation's commit).
      let derived = Number.NaN;
      for (let guard = 0; guard < 3000 && Number.isNaN(derived); guard += 1) {
        const { rows } = await pool.query<{ until: Date | null }>(
          `SELECT derived_until AS until FROM derivation_state WHERE device_id = $1`,
          [tenant.probe.id],
        );
        if (rows[0]?.until && rows[0].until.getTime() >= ts) derived = performance.now();
        else await sleep(20);
      }
      for (let guard = 0; guard < 600; guard += 1) {
        const answer = await ask(
          api.url,
          tenant.key,
          `/telemetry/utilization?bucket=hour&groupBy=asset&assetId=${tenant.probe.assetId}`,
        ).catch(() => null);
        if (answer === null) continue;
        const item = answer.body.items.find((row) => row.bucketStart === new Date(hourStart).toISOString());
        if (item && item.runningSeconds >= expected - 0.001) {
          lags.push((performance.now() - committed) / 1000);
          refreshLags.push((performance.now() - derived) / 1000);
          break;
        }
        await sleep(50);
      }
      await sleep(2000);
    }
    stop.abort();
    const cpu = await workerCpu.stop();
    await Promise.all([publishing.catch(() => 0), probing, ...clients]);
    await publisher.close();
    await probePublisher.close();

    const volume = await pool.query<{ n: number; messages: number }>(
      `SELECT (SELECT count(*)::int FROM telemetry_readings WHERE tenant_id = $1 AND ts >= date_trunc('hour', now())) AS n,
              (SELECT coalesce(sum(gps_messages + adcin_messages + hourmeter_messages + imu_messages + identifier_messages
                                   + heartbeat_messages + batch_messages + other_messages), 0)::bigint
                 FROM device_counts_hourly WHERE tenant_id = $1 AND bucket = date_trunc('hour', now())) AS messages`,
      [tenant.tenantId],
    );
    out('');
    out(
      `== under load: ${RATE} msg/s from ${DEVICES} devices for ${LOAD_SECONDS} s (ingest and worker as processes; the open hour holds ` +
        `${volume.rows[0]!.n.toLocaleString()} readings, ${Number(volume.rows[0]!.messages).toLocaleString()} messages counted) ==`,
    );
    for (const [name, times] of latencies) {
      out(
        `  ${name.padEnd(40)} ${String(times.length).padStart(5)} requests  p50 ${ms(percentile(times, 50))} p95 ${ms(percentile(times, 95))} (target p95 < ${name === FULL ? 500 : 100} ms) | ${load()}`,
      );
    }
    out(
      `  open hour behind the newest committed reading: ${lags.length} probes, p50 ${percentile(lags, 50).toFixed(2)} s, ` +
        `p95 ${percentile(lags, 95).toFixed(2)} s, max ${Math.max(...lags).toFixed(2)} s (target ≤ 5 s) | ${load()}`,
    );
    out(
      `  worker CPU while loaded (${cpu.seconds.toFixed(0)} s): its process ${cpu.process.toFixed(1)} s, its database backends ` +
        `${cpu.backends.toFixed(1)} s — ${(((cpu.process + cpu.backends) / cpu.seconds) * 100).toFixed(0)} % of one core | ${load()}`,
    );
    if (failures > 0) out(`  ${failures} API requests failed (see the log lines above)`);
    out(
      `    of which after the reading was derived (gold upkeep after the commit, if any, and the API): p50 ${percentile(refreshLags, 50).toFixed(2)} s, ` +
        `p95 ${percentile(refreshLags, 95).toFixed(2)} s, max ${Math.max(...refreshLags).toFixed(2)} s | ${load()}`,
    );
  } finally {
    for (const service of services.reverse()) await service.stop().catch(() => undefined);
    await broker.stop();
  }
}

async function main(): Promise<void> {
  const admin = new pg.Client({ connectionString: serverUrl() });
  await admin.connect();
  const database = `gantry_present_${randomBytes(3).toString('hex')}_test`;
  await admin.query(`CREATE DATABASE ${database}`);
  const databaseUrl = withDatabase(serverUrl(), database);
  let pool: Pool | null = null;
  let api: ServiceProcess | null = null;
  try {
    log(`migrating ${database}…`);
    const { storageMode } = await migrateDatabase(databaseUrl, {
      storageMode: (process.env.PRESENT_STORAGE_MODE ?? 'auto') as RequestedStorageMode,
      retention: { bronzeDays: 14, readingDays: 400 },
    });
    pool = createPool(databaseUrl, { max: 6, applicationName: 'gantry-bench-present' });
    // Every relation materialized once while the database is empty (nothing left to rebuild later).
    await refreshGold({ pool, logger: silentLogger(), storageMode });
    out(
      `bench:present — ${storageMode} mode, ${os.cpus().length} cores, ${load()} at start; the machine is shared, figures are indicative`,
    );

    if (PHASES.has('fleet')) await fleetSeries(pool, databaseUrl, storageMode);
    if (!PHASES.has('idle') && !PHASES.has('load')) return;

    const small = await provisionTraffic(pool, 'small');
    const big = await provisionTraffic(pool, 'big');
    api = await spawnService('api', {
      env: {
        GANTRY_DATABASE_URL: databaseUrl,
        GANTRY_RATE_LIMIT_PER_SECOND: '1000000',
        GANTRY_RATE_LIMIT_BURST: '1000000',
      },
    });
    if (PHASES.has('idle')) {
      // Inside the open UTC hour (the load phase measures the open hour holding them), over
      // its last 50 minutes at most; a hour younger than 5 minutes is waited out.
      const intoHour = Date.now() % HOUR;
      if (intoHour < 5 * 60_000 + 10_000) {
        log(
          `idle: waiting ${((5 * 60_000 + 10_000 - intoHour) / 1000).toFixed(0)} s for the open hour to be 5 minutes old…`,
        );
        await sleep(5 * 60_000 + 10_000 - intoHour);
      }
      const end = Date.now() - 10_000;
      const start = Math.max(end - 50 * 60_000, Math.floor(end / HOUR) * HOUR);
      log(`idle: seeding ${LOW.toLocaleString()} and ${HIGH.toLocaleString()} readings into two tenants' last hour…`);
      await seedHour(pool, small, LOW, start, end, 0);
      await seedHour(pool, big, HIGH, start, end, 0);
      await countSeeded(pool, small, start, end);
      await countSeeded(pool, big, start, end);
      log('idle: deriving and refreshing utilization gold…');
      const [settleMs] = await timed(() => settle(pool!, databaseUrl, storageMode));
      await pool.query('ANALYZE');
      const volume = async (tenant: Tenant) =>
        (
          await pool!.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM telemetry_readings WHERE tenant_id = $1 AND ts >= $2`,
            [tenant.tenantId, new Date(start)],
          )
        ).rows[0]!.n.toLocaleString();
      out('');
      out(
        `== idle: ${DEVICES} devices each, the open hour holding ${await volume(small)} readings (small) and ${await volume(big)} (big); ` +
          `derived and refreshed in ${(settleMs / 1000).toFixed(0)} s; API, one client, default range (reaching now) ==`,
      );
      await idleFigures(api.url, small, big);
      await liveHourFigure(pool, small, 'small');
      await liveHourFigure(pool, big, 'big');
    }

    if (PHASES.has('load') && LOAD_SECONDS > 0) await underLoad(pool, databaseUrl, api, big);
  } finally {
    await api?.stop().catch(() => undefined);
    await pool?.end().catch(() => undefined);
    if (KEEP) log(`kept ${database} (PRESENT_KEEP_DATABASE=1)`);
    else await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`).catch(() => undefined);
    await admin.end();
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
