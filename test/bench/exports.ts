/**
 * pnpm bench:exports — every CSV/XLSX export at its 50,000-row page, over real HTTP, next
 * to psql running the same COPY, with the API process's memory.
 *
 * Seeds gantry_bench_exports as a new user's month would look (GANTRY_BENCH_MACHINES=64
 * machines, GANTRY_BENCH_DAYS=31 days; one GPS fix every 5 minutes, machine 0 every
 * minute; three segments per machine and hour; a usage session every 50 minutes; one
 * service request per machine and hour; 50,000 inspections with a report each), refreshes
 * gold with the worker's refreshGold and ANALYZEs. The seed is kept between runs
 * (--reseed rebuilds it, --drop removes it at the end).
 *
 * The API runs alone in a child process (test/bench/api-server.ts) whose RSS is sampled
 * every 10 ms. For each export: the CSV's time to the last byte (median of
 * GANTRY_BENCH_RUNS=3, after one warm-up), the same statement as psql runs it
 * (`COPY (…) TO STDOUT`, which is what psql's \copy sends; psql's own \timing, so its
 * start-up and connection are not counted), the ratio, the XLSX time, and each one's RSS
 * growth (peak during the export minus the RSS before it) and the CPU seconds the API
 * process used for it (all threads; unlike the time, it leaves out the waits for a CPU on
 * a busy machine). Then 4 exports at once, CSV and XLSX. The load average (1 min) is printed beside every figure: the machine is
 * shared, so figures taken under load are indicative.
 * Targets: CSV ≤ 2 × psql and ≤ 0.5 s (quiet machine), XLSX ≤ 3 s, RSS growth ≤ 50 MB for
 * one export and ≤ 150 MB for four.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { promisify } from 'node:util';
import type pg from 'pg';
import { provisioning } from '@gantry/api';
import { loadConfig } from '@gantry/config';
import { createOutbox, createPool, migrateDatabase, type Pool } from '@gantry/db';
import { silentLogger } from '@gantry/logger';
import { copyStatement, type ExportColumn } from '../../services/api/src/http/export.ts';
import {
  exportColumns as reportingColumns,
  exportStatement,
} from '../../services/api/src/features/reporting/repository.ts';
import { listExports } from '../../services/api/src/features/telemetry/exports.routes.ts';
import { exportColumns, orderedSql, type TelemetryScope } from '../../services/api/src/features/telemetry/sql.ts';
import { metricQuery, metricRange } from '../../services/api/src/features/telemetry/buckets.ts';
import { metricExportStatement } from '../../services/api/src/features/telemetry/metric-export.ts';
import { refreshGold } from '../../services/worker/src/features/gold/refresh.ts';
import { startBenchApi, type ApiProcess } from './api-process.ts';
import { benchServerUrl, onServer as onTestServer, withDatabase } from '../support/database-url.ts';

const run = promisify(execFile);
const onServer = <T>(fn: (client: pg.Client) => Promise<T>) => onTestServer(fn, benchServerUrl());

const DATABASE = 'gantry_bench_exports';
const MACHINES = Number(process.env.GANTRY_BENCH_MACHINES ?? 64);
const DAYS = Number(process.env.GANTRY_BENCH_DAYS ?? 31);
const RUNS = Number(process.env.GANTRY_BENCH_RUNS ?? 3);
const INSPECTIONS = 50_000;
const SEED_VERSION = `exports-bench-v1:${MACHINES}x${DAYS}`;
const args = new Set(process.argv.slice(2));
const HOUR = 3_600_000;
const DAY = 24 * HOUR;

const load = () => os.loadavg()[0]!.toFixed(1);

function log(message: string): void {
  process.stdout.write(`${new Date().toISOString().slice(11, 19)} ${message}\n`);
}

async function timed<T>(label: string, fn: () => Promise<T>): Promise<T> {
  const started = performance.now();
  const result = await fn();
  log(`${label}: ${((performance.now() - started) / 1000).toFixed(1)} s (load ${load()})`);
  return result;
}

interface Seed {
  version: string;
  tenantId: string;
  tenantKey: string;
  machine0: string;
  from: string;
  to: string;
}

async function seed(pool: Pool): Promise<Seed> {
  const deps = { pool, outbox: createOutbox({ maxAttempts: 3 }) };
  const tenant = await provisioning.createTenant(deps, { name: 'Export bench terminal' });
  const t = tenant.id;
  const tenantKey = (await provisioning.createApiKey(deps, t, { name: 'bench tenant key' })).key;
  const type = await provisioning.createAssetType(deps, t, { name: 'Straddle carrier' });
  const template = await provisioning.createTemplate(deps, t, { name: 'Pre-shift', assetTypeIds: [type.id] });
  const to = new Date(Math.floor(Date.now() / DAY) * DAY);
  const from = new Date(to.getTime() - DAYS * DAY);
  const sql = (label: string, text: string, params: unknown[] = [t, from, to]) =>
    timed(label, () => pool.query(text, params));

  await sql(
    `${MACHINES} machines`,
    `WITH a AS (
       INSERT INTO assets (tenant_id, asset_type_id, name, identifier, display_code, location, customer_name)
       SELECT $1, $2::uuid, 'Straddle ' || lpad(g::text, 2, '0'), 'M' || lpad(g::text, 2, '0'), 'SC' || lpad(g::text, 2, '0'),
              'Yard ' || (g % 5 + 1), 'Customer ' || (g % 4 + 1)
         FROM generate_series(0, $3::int - 1) AS g
       RETURNING id, identifier, name)
     INSERT INTO devices (tenant_id, device_id, asset_id, display_name)
     SELECT $1, 'bench-' || lower(a.identifier), a.id, a.name || ' tracker' FROM a`,
    [t, type.id, MACHINES],
  );
  const machines = `(SELECT d.tenant_id, d.id AS device_id, d.asset_id, a.customer_name,
                            (row_number() OVER (ORDER BY a.identifier) - 1)::int AS n
                       FROM devices d JOIN assets a ON a.id = d.asset_id WHERE d.tenant_id = $1)`;
  await sql(
    'GPS fixes (every 5 minutes, machine 0 every minute)',
    `INSERT INTO telemetry_readings (tenant_id, device_id, asset_id, type, ts, received_at, latitude, longitude, gps_valid, fix)
     SELECT m.tenant_id, m.device_id, m.asset_id, 'gps', ts, ts + interval '2 seconds',
            51.9 + 0.05 * sin(extract(epoch FROM ts) / 3600 + m.n), 4.0 + 0.05 * cos(extract(epoch FROM ts) / 3600 + m.n), true, true
       FROM ${machines} m,
            generate_series($2::timestamptz, $3::timestamptz - interval '1 minute',
                            CASE WHEN m.n = 0 THEN interval '1 minute' ELSE interval '5 minutes' END) AS ts`,
  );
  await sql(
    'segments (3 per machine and hour)',
    `INSERT INTO telemetry_segments (tenant_id, device_id, asset_id, start_ts, end_ts, has_data, running, moving, loaded, seconds,
       distance_m, hourmeter_delta, container_cycles, imu_anomalies, imu_samples, gps_points)
     SELECT m.tenant_id, m.device_id, m.asset_id, h + s.off, h + s.off + interval '20 minutes', true, s.running, s.moving, s.loaded, 1200,
            s.dist * (0.5 + random()), CASE WHEN s.running THEN 1200 ELSE 0 END, s.cycles, 0, 10, 4
       FROM ${machines} m,
            generate_series($2::timestamptz, $3::timestamptz - interval '1 hour', interval '1 hour') AS h,
            (VALUES (interval '0 minutes', true, true, true, 1500.0, 2),
                    (interval '20 minutes', true, false, false, 0.0, 0),
                    (interval '40 minutes', false, false, false, 0.0, 0)) AS s(off, running, moving, loaded, dist, cycles)`,
  );
  await sql(
    'usage sessions (every 50 minutes per machine)',
    `INSERT INTO usage_sessions (id, tenant_id, device_id, asset_id, start_ts, end_ts, is_open, start_reason, end_reason, confidence,
       identifier, distance_m, duration_seconds, moving_seconds, stationary_running_seconds, stop_count, trip_count,
       imu_anomaly_count, imu_sample_count, hourmeter_delta, container_cycle_count, loaded_seconds, empty_seconds,
       loaded_distance_m, empty_distance_m)
     SELECT gen_random_uuid(), m.tenant_id, m.device_id, m.asset_id, s, s + interval '40 minutes', false, 'ignition_on', 'ignition_off', 1,
            'OP-' || lpad((m.n % 40 + 1)::text, 3, '0'), 3000, 2400, 1200, 1200, 4, 5, 1, 300, 2400, 6, 800, 1600, 1000, 2000
       FROM ${machines} m, generate_series($2::timestamptz, $3::timestamptz - interval '50 minutes', interval '50 minutes') AS s`,
  );
  // Reporting rollups are kept by row triggers, which are slow for a bulk load (every row
  // updates the same few rollup rows): load without them, then rebuild the rollups once.
  const client = await pool.connect();
  const inTransaction = (label: string, text: string, params: unknown[] = [t, from, to]) =>
    timed(label, () => client.query(text, params));
  try {
    await client.query('BEGIN');
    await client.query('SET LOCAL session_replication_role = replica');
    await inTransaction(
      'service requests (one per machine and hour)',
      `INSERT INTO service_requests (tenant_id, seq, display_code, title, status, priority, customer_name, asset_id, created_at, updated_at)
       SELECT $1, k, 'SR-' || k, 'Bench request ' || k,
              (ARRAY['new', 'triaged', 'in_progress', 'resolved', 'closed', 'cancelled'])[k % 6 + 1],
              (ARRAY['low', 'normal', 'high', 'urgent'])[k % 4 + 1], customer_name, asset_id, at, at
         FROM (SELECT row_number() OVER (ORDER BY h, m.n)::int AS k, m.customer_name, m.asset_id, h + (m.n % 60) * interval '1 minute' AS at
                 FROM ${machines} m, generate_series($2::timestamptz, $3::timestamptz - interval '1 hour', interval '1 hour') AS h) r`,
    );
    await client.query(
      `INSERT INTO service_request_counters (tenant_id, last_seq) SELECT $1, count(*) FROM service_requests WHERE tenant_id = $1`,
      [t],
    );
    await inTransaction(
      `${INSPECTIONS.toLocaleString('en')} inspections with a report each`,
      `WITH i AS (
         INSERT INTO inspections (tenant_id, asset_id, template_id, template_version, status, started_at, completed_at,
                                  inspector_name, operator_identifier, external_ref, created_at, updated_at, customer_name)
         SELECT $1, m.asset_id, $4::uuid, 1, 'completed', at - interval '20 minutes', at, 'Inspector ' || (k % 50),
                'OP-' || lpad((k % 40 + 1)::text, 3, '0'), 'INS-' || k, at, at, m.customer_name
           FROM generate_series(1, $5::int) AS k
           CROSS JOIN LATERAL (SELECT $2::timestamptz + (k::float8 / $5::int) * ($3::timestamptz - $2::timestamptz) AS at) s
           JOIN ${machines} m ON m.n = k % $6::int
         RETURNING id, asset_id, template_id, completed_at, external_ref, customer_name)
       INSERT INTO reports (tenant_id, inspection_id, asset_id, template_id, impact, outcome, summary, external_ref, created_at, updated_at, customer_name)
       SELECT $1, i.id, i.asset_id, i.template_id, 'none', 'completed', 'All checks passed', 'REP-' || i.external_ref,
              i.completed_at + interval '5 minutes', i.completed_at + interval '5 minutes', i.customer_name
         FROM i`,
      [t, from, to, template.id, INSPECTIONS, MACHINES],
    );
    await inTransaction('reporting rollups (reporting_rebuild)', 'SELECT reporting_rebuild($1)', [t]);
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK');
    throw error;
  } finally {
    client.release();
  }
  const machine0 = (
    await pool.query<{ id: string }>(`SELECT id FROM assets WHERE tenant_id = $1 ORDER BY identifier LIMIT 1`, [t])
  ).rows[0]!.id;
  return { version: SEED_VERSION, tenantId: t, tenantKey, machine0, from: from.toISOString(), to: to.toISOString() };
}

async function refreshAllGold(pool: Pool): Promise<void> {
  for (let step = 0; step < 1000; step += 1) {
    const result = await refreshGold({ pool, logger: silentLogger(), storageMode: 'postgres' });
    if (result.failed.length > 0) throw new Error(`gold refresh failed for ${result.failed.join(', ')}`);
    if (!result.more && result.applied === 0) return;
  }
}

async function prepare(url: string): Promise<Seed> {
  if (args.has('--reseed'))
    await onServer((client) => client.query(`DROP DATABASE IF EXISTS ${DATABASE} WITH (FORCE)`));
  const exists = await onServer(
    async (client) => (await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [DATABASE])).rowCount === 1,
  );
  if (exists) {
    const pool = createPool(url, { max: 1 });
    try {
      const marker = await pool
        .query<{ value: Seed }>(`SELECT value FROM gantry_meta WHERE key = 'bench:exports'`)
        .then((result) => result.rows[0]?.value)
        .catch(() => undefined);
      if (marker?.version === SEED_VERSION) {
        log(`reusing the seed of ${marker.to} (--reseed to rebuild)`);
        return marker;
      }
    } finally {
      await pool.end();
    }
    await onServer((client) => client.query(`DROP DATABASE IF EXISTS ${DATABASE} WITH (FORCE)`));
  }
  await onServer((client) => client.query(`CREATE DATABASE ${DATABASE}`));
  await timed('migrate', () =>
    migrateDatabase(url, { storageMode: 'postgres', retention: { bronzeDays: 400, readingDays: 400 } }),
  );
  const pool = createPool(url, { max: 2 });
  try {
    const seeded = await seed(pool);
    await timed('gold refresh (the worker’s refreshGold)', () => refreshAllGold(pool));
    await timed('analyze', () => pool.query('ANALYZE'));
    await pool.query(`INSERT INTO gantry_meta (key, value) VALUES ('bench:exports', $1)`, [JSON.stringify(seeded)]);
    return seeded;
  } finally {
    await pool.end();
  }
}

/**
 * Samples the API's RSS while fn runs: growth = peak during fn − RSS before it (MB); and
 * the CPU seconds the API used meanwhile (without the waits for a CPU that a busy
 * machine adds to the time to the last byte).
 */
async function withRss<T>(
  api: ApiProcess,
  fn: () => Promise<T>,
): Promise<{ result: T; growthMb: number; cpuSeconds: number }> {
  const before = api.rssKb();
  const cpuBefore = api.cpuSeconds();
  let peak = before;
  const sampler = setInterval(() => {
    peak = Math.max(peak, api.rssKb());
  }, 10);
  try {
    const result = await fn();
    peak = Math.max(peak, api.rssKb());
    return { result, growthMb: (peak - before) / 1024, cpuSeconds: api.cpuSeconds() - cpuBefore };
  } finally {
    clearInterval(sampler);
  }
}

/** One export to the last byte: seconds, bytes and lines (rows + header for CSV). */
async function download(api: ApiProcess, pathAndQuery: string, key: string) {
  const started = performance.now();
  const response = await fetch(`${api.url}/api/external/v1${pathAndQuery}`, { headers: { 'x-api-key': key } });
  let bytes = 0;
  let lines = 0;
  const reader = response.body!.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    bytes += value.byteLength;
    for (let index = value.indexOf(10); index !== -1; index = value.indexOf(10, index + 1)) lines += 1;
  }
  const seconds = (performance.now() - started) / 1000;
  if (response.status !== 200) throw new Error(`${pathAndQuery} answered ${response.status}`);
  return { seconds, bytes, lines, truncated: response.headers.get('x-export-truncated') };
}

/** psql running the COPY (its \timing: the statement alone, not psql's start-up). */
async function psqlCopy(databaseUrl: string, copy: string, directory: string, output = '/dev/null'): Promise<number> {
  const script = path.join(directory, 'copy.sql');
  writeFileSync(script, `\\timing on\n${copy};\n`);
  const { stdout } = await run('psql', [
    '-X',
    '-q',
    '-v',
    'ON_ERROR_STOP=1',
    '-d',
    databaseUrl,
    '-o',
    output,
    '-f',
    script,
  ]);
  const match = /Time: ([\d.]+) ms/.exec(stdout);
  if (!match) throw new Error(`psql printed no timing: ${stdout}`);
  return Number(match[1]) / 1000;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const fmt = (value: number, digits = 2) => value.toFixed(digits);

interface Scenario {
  name: string;
  /** Path without the extension, and its query string. */
  path: string;
  query: string;
  /** The statement the API runs for the CSV, for psql. */
  statement: () => Promise<{ columns: ExportColumn[]; query: { text: string; values: unknown[] } }>;
}

function scenarios(seedData: Seed, pool: Pool): Scenario[] {
  const scope: TelemetryScope = { tenantId: seedData.tenantId, customerName: null };
  const range = `from=${seedData.from}&to=${seedData.to}`;
  const rules = loadConfig({ GANTRY_DATABASE_URL: 'postgresql://unused' }).telemetryStatus;
  const lists = listExports(rules);
  const list =
    (name: string, query: string): Scenario['statement'] =>
    async () => {
      const definition = lists.find((entry) => entry.name === name)!;
      const statement = await definition.statement(
        scope,
        definition.query.parse(Object.fromEntries(new URLSearchParams(query))),
      );
      return { columns: exportColumns(statement.columns), query: orderedSql(statement) };
    };
  const metric =
    (name: 'utilization' | 'container-work', query: string): Scenario['statement'] =>
    async () => {
      const parsed = metricQuery.parse(Object.fromEntries(new URLSearchParams(query)));
      const input = { range: metricRange(parsed), bucket: parsed.bucket, groupBy: parsed.groupBy };
      return metricExportStatement(pool, scope, name, input);
    };
  const positions = `assetId=${seedData.machine0}&resolution=1min&${range}`;
  const perAsset = `${range}&groupBy=asset&bucket=hour`;
  return [
    {
      name: 'positions 1min, machine 0',
      path: '/telemetry/positions/export',
      query: positions,
      statement: list('positions', positions),
    },
    {
      name: 'usage sessions',
      path: '/telemetry/usage-sessions/export',
      query: range,
      statement: list('usage-sessions', range),
    },
    {
      name: 'utilization asset/hour',
      path: '/telemetry/utilization/export',
      query: perAsset,
      statement: metric('utilization', perAsset),
    },
    {
      name: 'container work asset/hour',
      path: '/telemetry/container-work/export',
      query: perAsset,
      statement: metric('container-work', perAsset),
    },
    {
      name: 'service-request metrics asset/hour',
      path: '/telemetry/service-request-metrics/export',
      query: perAsset,
      statement: list('service-request-metrics', perAsset),
    },
    {
      name: 'reporting inspections',
      path: '/reporting/export',
      query: range,
      statement: async () => ({
        columns: reportingColumns as unknown as ExportColumn[],
        query: exportStatement(scope, { from: new Date(seedData.from), to: new Date(seedData.to) }, false),
      }),
    },
  ];
}

async function main(): Promise<void> {
  const databaseUrl = withDatabase(benchServerUrl(), DATABASE);
  const seedData = await prepare(databaseUrl);
  const api = await startBenchApi(databaseUrl);
  const pool = createPool(databaseUrl, { max: 2 });
  const directory = mkdtempSync(path.join(os.tmpdir(), 'gantry-bench-exports-'));
  const lines: string[] = [];
  const print = (line: string) => {
    lines.push(line);
    log(line);
  };
  let over = 0;
  try {
    log(`API at ${api.url}; ${MACHINES} machines, ${DAYS} days; ${RUNS} runs per figure (median)`);
    const all = scenarios(seedData, pool);
    for (const scenario of all) {
      const { columns, query } = await scenario.statement();
      const copy = copyStatement({ columns, query, offset: 0 });
      const csvPath = `${scenario.path}.csv?${scenario.query}`;
      const xlsxPath = `${scenario.path}.xlsx?${scenario.query}`;
      // Warm-up: plans, pool connections, JIT — and the row count to check psql against.
      const warm = await download(api, csvPath, seedData.tenantKey);
      const psqlFile = path.join(directory, 'copy.csv');
      await psqlCopy(databaseUrl, copy, directory, psqlFile);
      const psqlBytes = readFileSync(psqlFile).length;
      await download(api, xlsxPath, seedData.tenantKey);
      const csv: number[] = [];
      const psql: number[] = [];
      const xlsx: number[] = [];
      const csvCpu: number[] = [];
      const xlsxCpu: number[] = [];
      let csvRss = 0;
      let xlsxRss = 0;
      const loads: string[] = [];
      for (let attempt = 0; attempt < RUNS; attempt += 1) {
        loads.push(load());
        const api1 = await withRss(api, () => download(api, csvPath, seedData.tenantKey));
        csv.push(api1.result.seconds);
        csvCpu.push(api1.cpuSeconds);
        csvRss = Math.max(csvRss, api1.growthMb);
        psql.push(await psqlCopy(databaseUrl, copy, directory));
        const api2 = await withRss(api, () => download(api, xlsxPath, seedData.tenantKey));
        xlsx.push(api2.result.seconds);
        xlsxCpu.push(api2.cpuSeconds);
        xlsxRss = Math.max(xlsxRss, api2.growthMb);
      }
      const ratio = median(csv) / median(psql);
      const csvOk = ratio <= 2 && csvRss <= 50;
      const xlsxOk = median(xlsx) <= 3 && xlsxRss <= 50;
      if (!csvOk) over += 1;
      if (!xlsxOk) over += 1;
      const same = psqlBytes === warm.bytes ? 'same bytes as psql' : `psql ${psqlBytes} bytes vs API ${warm.bytes}`;
      print(
        `${scenario.name.padEnd(36)} ${String(warm.lines - 1).padStart(6)} rows (truncated ${warm.truncated}, ${same}) load ${loads.join('/')}`,
      );
      print(
        `  CSV  ${fmt(median(csv))} s  psql COPY ${fmt(median(psql))} s  ratio ${fmt(ratio)} (≤ 2)  RSS +${fmt(csvRss, 0)} MB (≤ 50)  API CPU ${fmt(median(csvCpu))} s  ${csvOk ? 'ok' : 'OVER'}  load ${load()}`,
      );
      print(
        `  XLSX ${fmt(median(xlsx))} s (≤ 3)  RSS +${fmt(xlsxRss, 0)} MB (≤ 50)  API CPU ${fmt(median(xlsxCpu))} s  ${xlsxOk ? 'ok' : 'OVER'}  load ${load()}`,
      );
    }
    // Four at once: the first four kinds, each to the last byte.
    for (const format of ['csv', 'xlsx'] as const) {
      const four = all.slice(0, 4);
      const loadBefore = load();
      const started = performance.now();
      const { growthMb, cpuSeconds: cpu } = await withRss(api, () =>
        Promise.all(
          four.map((scenario) => download(api, `${scenario.path}.${format}?${scenario.query}`, seedData.tenantKey)),
        ),
      );
      const seconds = (performance.now() - started) / 1000;
      const ok = growthMb <= 150;
      if (!ok) over += 1;
      print(
        `4 concurrent ${format.toUpperCase()} exports (${four.map((scenario) => scenario.name.split(' ')[0]).join(', ')}): ${fmt(seconds)} s, RSS +${fmt(growthMb, 0)} MB (≤ 150)  API CPU ${fmt(cpu)} s  ${ok ? 'ok' : 'OVER'}  load ${loadBefore} → ${load()}`,
      );
    }
  } finally {
    api.child.kill('SIGTERM');
    await pool.end();
    rmSync(directory, { recursive: true, force: true });
  }
  process.stdout.write(
    `\n== pnpm bench:exports (${MACHINES} machines, ${DAYS} days; ${os.cpus().length} cores; shared machine: figures under load are indicative) ==\n`,
  );
  for (const line of lines) process.stdout.write(`${line}\n`);
  process.stdout.write(`${over} figure(s) over target\n`);
  if (args.has('--drop')) await onServer((client) => client.query(`DROP DATABASE IF EXISTS ${DATABASE} WITH (FORCE)`));
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
