/**
 * `pnpm exec tsx test/bench/fresh-export.ts` — one machine's positions export right after a
 * month's upload, before and after the tables are analysed (issue 28).
 *
 * A fresh database gantry_bench_fresh_<x>_test on the test server (dropped at the end),
 * PostgreSQL mode, loaded as bench:exports loads a new user's month (FRESH_MACHINES=64
 * machines, FRESH_DAYS=31 days of GPS fixes, machine 0 every minute, the others every 5
 * minutes) with positions gold written from its definition and autovacuum off on the
 * loaded tables, so nothing analyses them: the state right after an upload, before
 * autovacuum comes. Then the CSV export of machine 0's 1-minute positions (44,640 rows at
 * 31 days) over HTTP from the API in a child process: FRESH_RUNS=5 runs after one warm-up,
 * on the never-analysed tables, then again after ANALYZE. Printed: each median, the plan's
 * index on positions_1min, and the load average beside every figure (FRESH_VERBOSE=1 adds
 * the statement's EXPLAIN ANALYZE in each state).
 * Env: GANTRY_BENCH_DATABASE_URL (default the test server).
 */
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { provisioning } from '@gantry/api';
import { createOutbox, createPool, goldDefinition, migrateDatabase, type Pool } from '@gantry/db';
import { positionStatement } from '../../services/api/src/features/telemetry/positions.repository.ts';
import { orderedSql } from '../../services/api/src/features/telemetry/sql.ts';
import { benchServerUrl, onServer, withDatabase } from '../support/database-url.ts';
import { startBenchApi } from './api-process.ts';

const MACHINES = Number(process.env.FRESH_MACHINES ?? 64);
const DAYS = Number(process.env.FRESH_DAYS ?? 31);
const RUNS = Number(process.env.FRESH_RUNS ?? 5);
const DAY = 86_400_000;
const LOADED = ['telemetry_readings', 'positions_1min', 'positions_15min'];

const load = () => os.loadavg()[0]!.toFixed(1);
const log = (message: string) => process.stdout.write(`${new Date().toISOString().slice(11, 19)} ${message}\n`);

async function seed(pool: Pool, from: Date, to: Date) {
  const deps = { pool, outbox: createOutbox({ maxAttempts: 3 }) };
  const tenant = await provisioning.createTenant(deps, { name: 'Fresh export terminal' });
  const key = (await provisioning.createApiKey(deps, tenant.id, { name: 'bench key' })).key;
  for (const table of LOADED) await pool.query(`ALTER TABLE ${table} SET (autovacuum_enabled = off)`);
  await pool.query(
    `WITH a AS (
       INSERT INTO assets (tenant_id, name, identifier)
       SELECT $1, 'Straddle ' || lpad(g::text, 2, '0'), 'M' || lpad(g::text, 2, '0') FROM generate_series(0, $2::int - 1) AS g
       RETURNING id, identifier)
     INSERT INTO devices (tenant_id, device_id, asset_id) SELECT $1, 'fresh-' || lower(a.identifier), a.id FROM a`,
    [tenant.id, MACHINES],
  );
  const started = performance.now();
  await pool.query(
    `INSERT INTO telemetry_readings (tenant_id, device_id, asset_id, type, ts, received_at, latitude, longitude, gps_valid, fix)
     SELECT m.tenant_id, m.id, m.asset_id, 'gps', ts, ts + interval '2 seconds',
            51.9 + 0.05 * sin(extract(epoch FROM ts) / 3600 + m.n), 4.0 + 0.05 * cos(extract(epoch FROM ts) / 3600 + m.n), true, true
       FROM (SELECT d.*, (row_number() OVER (ORDER BY a.identifier) - 1)::int AS n
               FROM devices d JOIN assets a ON a.id = d.asset_id WHERE d.tenant_id = $1) m,
            generate_series($2::timestamptz, $3::timestamptz - interval '1 minute',
                            CASE WHEN m.n = 0 THEN interval '1 minute' ELSE interval '5 minutes' END) AS ts`,
    [tenant.id, from, to],
  );
  // As ingest's differences keep it after an upload: written, never rebuilt (a rebuild analyses).
  for (const relation of ['positions_1min', 'positions_15min']) {
    await pool.query(`INSERT INTO ${relation} ${goldDefinition(relation)}`);
  }
  await pool.query(`UPDATE gold_coverage SET status = 'ok', updated_at = now() WHERE relation LIKE 'positions%'`);
  log(
    `loaded ${MACHINES} machines × ${DAYS} days in ${((performance.now() - started) / 1000).toFixed(1)} s (load ${load()})`,
  );
  const machine0 = (
    await pool.query<{ id: string }>(`SELECT id FROM assets WHERE tenant_id = $1 ORDER BY identifier LIMIT 1`, [
      tenant.id,
    ])
  ).rows[0]!.id;
  return { tenantId: tenant.id, key, machine0 };
}

async function planIndex(pool: Pool, tenantId: string, assetId: string, from: Date, to: Date): Promise<string> {
  const statement = positionStatement({ tenantId, customerName: null }, { assetId, from, to, resolution: '1min' });
  const { text, values } = orderedSql(statement);
  const { rows } = await pool.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${text}`, values);
  if (process.env.FRESH_VERBOSE === '1') {
    const analysed = await pool.query<{ 'QUERY PLAN': string }>(`EXPLAIN (ANALYZE, BUFFERS) ${text}`, values);
    log(analysed.rows.map((row) => row['QUERY PLAN']).join('\n'));
  }
  const scan =
    /Seq Scan on positions_1min|Index (Only )?Scan (Backward )?using \S+ on positions_1min|Bitmap Index Scan on \S+/;
  const line = rows.map((row) => row['QUERY PLAN']).find((plan) => scan.test(plan)) ?? '?';
  return scan.exec(line)?.[0] ?? line.trim();
}

async function main(): Promise<void> {
  const name = `gantry_bench_fresh_${randomBytes(3).toString('hex')}_test`;
  const url = withDatabase(benchServerUrl(), name);
  await onServer((client) => client.query(`CREATE DATABASE ${name}`), benchServerUrl());
  const pool = createPool(url, { max: 2 });
  const api = { process: null as Awaited<ReturnType<typeof startBenchApi>> | null };
  try {
    await migrateDatabase(url, { storageMode: 'postgres', retention: { bronzeDays: 400, readingDays: 400 } });
    const to = new Date(Math.floor(Date.now() / DAY) * DAY);
    const from = new Date(to.getTime() - DAYS * DAY);
    const seeded = await seed(pool, from, to);
    api.process = await startBenchApi(url);
    const path = `/telemetry/positions/export.csv?assetId=${seeded.machine0}&from=${from.toISOString()}&to=${to.toISOString()}&resolution=1min`;
    const exportOnce = async () => {
      const started = performance.now();
      const response = await fetch(`${api.process!.url}/api/external/v1${path}`, {
        headers: { 'x-api-key': seeded.key },
      });
      const rows = (await response.text()).split('\n').filter(Boolean).length - 1;
      if (response.status !== 200) throw new Error(`export answered ${response.status}`);
      return { seconds: (performance.now() - started) / 1000, rows };
    };
    const measure = async (label: string) => {
      await exportOnce();
      const times: number[] = [];
      let rows = 0;
      for (let run = 0; run < RUNS; run += 1) {
        const result = await exportOnce();
        times.push(result.seconds);
        rows = result.rows;
      }
      times.sort((a, b) => a - b);
      log(
        `${label}: ${rows} rows, median ${times[Math.floor(times.length / 2)]!.toFixed(3)} s ` +
          `(min ${times[0]!.toFixed(3)}, max ${times.at(-1)!.toFixed(3)}; load ${load()}); ` +
          `plan: ${await planIndex(pool, seeded.tenantId, seeded.machine0, from, to)}`,
      );
    };
    await measure('never analysed');
    await pool.query(`ANALYZE ${LOADED.join(', ')}`);
    await measure('after ANALYZE');
  } finally {
    api.process?.child.kill();
    await pool.end();
    await onServer((client) => client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`), benchServerUrl());
  }
}

await main();
