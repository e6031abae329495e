/**
 * `pnpm bench:data-quality` — what `/telemetry/data-quality` costs as the open hour fills,
 * and what keeping the counters costs ingest, in one run on a fresh database:
 *
 *   1. a fleet of BENCH_DEVICES devices with 23 earlier hours already counted, then
 *      BENCH_SMALL messages (one reading each, 1 % rejected, 1 % duplicates) stored in
 *      the open hour: data-quality p95 over BENCH_REQUESTS sequential requests (default
 *      range, tenant key, API in this process), beside the old path's p95 — closed hours
 *      from the hourly counts, the open hour recounted from bronze and silver through the
 *      live definitions (db/counters/*.sql), as the API did before the counters;
 *   2. the open hour filled up to BENCH_LARGE messages: the same two figures;
 *   3. ingest's write path (parse + writeBatch, 2,000-message batches) with and without
 *      the counters, alternating, on the same kind of traffic.
 *
 * The bulk of the open hour is generated in SQL and counted with recountCounters (the
 * same rows ingest would have upserted, much faster than parsing millions of messages);
 * phase 3 measures the real write path. Load average is printed beside each figure.
 *
 * Env: GANTRY_BENCH_DATABASE_URL, BENCH_DEVICES (1000), BENCH_SMALL (300000),
 * BENCH_LARGE (3000000), BENCH_REQUESTS (200: a p95 of fewer moves with single slow requests), BENCH_BASELINE_REQUESTS (5),
 * BENCH_INGEST_MESSAGES (60000 per mode and round, 3 rounds), BENCH_KEEP=1 keeps the database.
 */
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import pg from 'pg';
import { provisioning, startApiServer, type ApiServer } from '@gantry/api';
import { silentLogger } from '@gantry/logger';
import { createOutbox, createPool, migrateDatabase, withTransaction, type Pool } from '@gantry/db';
import { parseMessage } from '@gantry/ingest';
import { encodeMessage, fleetTraffic } from '@gantry/simulator';
import {
  countingForBenchmarks,
  counterDrift,
  recountCounters,
  recountDefinition,
} from '../../services/ingest/src/storage/counters.ts';
import { writeBatch } from '../../services/ingest/src/storage/write-batch.ts';
import { readDeviceCounts, wholeHours } from '../../services/api/src/features/telemetry/counts.repository.ts';
import { testConfig } from '../support/api.ts';
import { countHistory } from './counter-history.ts';

const HOUR = 3_600_000;
const DEVICES = Number(process.env.BENCH_DEVICES ?? 1000);
const SMALL = Number(process.env.BENCH_SMALL ?? 300_000);
const LARGE = Number(process.env.BENCH_LARGE ?? 3_000_000);
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 200);
const BASELINE_REQUESTS = Number(process.env.BENCH_BASELINE_REQUESTS ?? 5);
const INGEST_MESSAGES = Number(process.env.BENCH_INGEST_MESSAGES ?? 60_000);
const serverUrl =
  process.env.GANTRY_BENCH_DATABASE_URL ??
  process.env.GANTRY_TEST_DATABASE_URL ??
  'postgresql://postgres@127.0.0.1:5432/postgres';

const load = () => `load ${os.loadavg()[0]!.toFixed(2)}`;
const fmt = (value: number) => Math.round(value).toLocaleString('en-US');
const ms = (value: number) => `${value.toFixed(1)} ms`;

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}

interface Fleet {
  tenantId: string;
  deviceIds: string[];
  deviceKeys: string[];
  key: string;
}

async function provisionFleet(pool: Pool, name: string, devices: number): Promise<Fleet> {
  const deps = { pool, outbox: createOutbox({ maxAttempts: 3 }) };
  const tenant = await provisioning.createTenant(deps, { name });
  const keys = Array.from({ length: devices }, (_, index) => `${name.toLowerCase()}-${String(index).padStart(5, '0')}`);
  const { rows: assets } = await pool.query<{ id: string; identifier: string }>(
    `INSERT INTO assets (tenant_id, name, identifier) SELECT $1, id, id FROM unnest($2::text[]) AS id RETURNING id, identifier`,
    [tenant.id, keys],
  );
  const { rows } = await pool.query<{ id: string; device_id: string }>(
    `INSERT INTO devices (tenant_id, device_id, asset_id) SELECT $1, d, a FROM unnest($2::text[], $3::uuid[]) AS u(d, a)
     RETURNING id, device_id`,
    [tenant.id, assets.map((asset) => asset.identifier), assets.map((asset) => asset.id)],
  );
  rows.sort((a, b) => (a.device_id < b.device_id ? -1 : 1));
  const apiKey = await provisioning.createApiKey(deps, tenant.id, { name: 'bench' });
  return {
    tenantId: tenant.id,
    deviceIds: rows.map((row) => row.id),
    deviceKeys: rows.map((row) => row.device_id),
    key: apiKey.key,
  };
}

/**
 * Messages [first, last) of the open hour's traffic, written in SQL: device i % N, its
 * k-th message (k = i / N) of type k % 6 at device time hour + k ms, received 200 ms
 * later; every 100th rejected (invalid JSON, nothing in silver), every 100th (offset 50)
 * a duplicate of the message before it.
 */
async function fillOpenHour(pool: Pool, fleet: Fleet, openHour: number, first: number, last: number): Promise<void> {
  const step = 250_000;
  for (let from = first; from < last; from += step) {
    const to = Math.min(last, from + step);
    await pool.query(
      `WITH d AS (SELECT row_number() OVER (ORDER BY device_id) - 1 AS n, id, tenant_id, asset_id, device_id FROM devices WHERE tenant_id = $1),
            g AS (SELECT i, i % $5 AS n, i / $5 AS k FROM generate_series($3::bigint, $4::bigint - 1) i),
            m AS (SELECT g.*, d.id, d.tenant_id, d.asset_id, d.device_id AS device_key,
                         (ARRAY['gps','adcin','heartbeat','hourmeter','imu','identifier'])[(g.k % 6) + 1] AS type,
                         $2::timestamptz + (g.k - CASE WHEN g.i % 100 = 50 THEN 1 ELSE 0 END) * interval '1 millisecond' AS ts,
                         CASE WHEN g.i % 100 = 0 THEN 'rejected' WHEN g.i % 100 = 50 THEN 'duplicate' ELSE 'accepted' END AS status
                    FROM g JOIN d ON d.n = g.n),
            bronze AS (
              INSERT INTO device_messages (received_at, topic, device_key, device_id, tenant_id, asset_id, message_type, status, error,
                                           device_ts, reading_count, payload_size, payload)
              SELECT ts + interval '200 milliseconds', 'gantry/v1/devices/' || device_key || '/' || type, device_key, id, tenant_id, asset_id,
                     type, status, CASE WHEN status = 'rejected' THEN 'invalid_json' END, CASE WHEN status <> 'rejected' THEN ts END,
                     CASE WHEN status = 'accepted' THEN 1 ELSE 0 END, 40, convert_to('{"ts":"' || ts || '","lat":51.9,"lon":4.0}', 'UTF8')
                FROM m)
       INSERT INTO telemetry_readings (tenant_id, device_id, asset_id, type, ts, received_at, latitude, longitude, gps_valid, fix)
       SELECT tenant_id, id, asset_id, type, ts, ts + interval '200 milliseconds',
              CASE WHEN type = 'gps' THEN 51.9 END, CASE WHEN type = 'gps' THEN 4.0 END,
              CASE WHEN type = 'gps' THEN k % 20 <> 0 END, CASE WHEN type = 'gps' THEN true END
         FROM m WHERE status = 'accepted'`,
      [fleet.tenantId, new Date(openHour), from, to, fleet.deviceIds.length],
    );
  }
  // As autovacuum would have by then: plans for a fleet of new devices need its statistics.
  await pool.query('ANALYZE');
}

/** The data-quality answer's counts the way the API computed them before the counters. */
async function oldPath(pool: Pool, fleet: Fleet, openHour: number): Promise<void> {
  const from = new Date(Math.floor((Date.now() - 24 * HOUR) / HOUR) * HOUR);
  const now = new Date();
  const closed = pool.query(
    `SELECT device_id, count(*) FROM device_counts_hourly WHERE tenant_id = $1 AND device_id = ANY ($2::uuid[])
       AND bucket >= $3 AND bucket < $4 GROUP BY device_id`,
    [fleet.tenantId, fleet.deviceIds, from, new Date(openHour)],
  );
  const live = pool.query(
    `SELECT device_id, sum(gps_messages), sum(gps_readings) FROM (${recountDefinition(
      'device_counts_hourly',
      (alias, time) =>
        `${alias}.tenant_id = $1 AND ${alias}.device_id = ANY ($2::uuid[]) AND ${alias}.${time} >= $3 AND ${alias}.${time} <= $4`,
    )}) r GROUP BY device_id`,
    [fleet.tenantId, fleet.deviceIds, new Date(openHour), now],
  );
  await Promise.all([closed, live]);
}

/** The same counts from the counters: the database part of the new answer, comparable with oldPath. */
async function counterPath(pool: Pool, fleet: Fleet): Promise<void> {
  const query = {
    tenantId: fleet.tenantId,
    devices: fleet.deviceIds,
    ...wholeHours({ from: new Date(Date.now() - 24 * HOUR), to: new Date() }),
  };
  await readDeviceCounts(pool, query);
}

async function timed(
  runs: number,
  warmup: number,
  fn: () => Promise<void>,
): Promise<{ p50: number; p95: number; load: string }> {
  for (let index = 0; index < warmup; index += 1) await fn();
  const times: number[] = [];
  for (let index = 0; index < runs; index += 1) {
    const started = performance.now();
    await fn();
    times.push(performance.now() - started);
  }
  return { p50: percentile(times, 50), p95: percentile(times, 95), load: load() };
}

/** Messages per second through parse + writeBatch, counters on or off, alternating rounds. */
async function ingestRates(pool: Pool, fleet: Fleet): Promise<{ with: number; without: number; loads: string[] }> {
  const rates = { with: [] as number[], without: [] as number[] };
  const loads: string[] = [];
  let start = Date.now() - 6 * HOUR;
  for (let round = 0; round < 3; round += 1) {
    for (const counting of [true, false]) {
      const receivedAt = Date.now();
      const traffic = [
        ...fleetTraffic({ deviceIds: fleet.deviceKeys, count: INGEST_MESSAGES, start, seed: round + 1 }),
      ];
      start += Math.ceil(INGEST_MESSAGES / fleet.deviceKeys.length) * 1000 + 1000;
      const began = performance.now();
      countingForBenchmarks.enabled = counting;
      try {
        for (let index = 0; index < traffic.length; index += 2000) {
          const messages = traffic.slice(index, index + 2000).map((message) => {
            const { topic, payload } = encodeMessage(message);
            return parseMessage(
              { topic, payload: Buffer.from(payload), receivedAt },
              { maxPayloadBytes: 65536, bounds: { maxFutureMs: 300_000, maxAgeMs: 14 * 86_400_000, now: receivedAt } },
            );
          });
          await withTransaction(pool, (client) =>
            writeBatch(client, messages, { method: 'unnest', oversizedPayloadBytes: 4096 }),
          );
        }
      } finally {
        countingForBenchmarks.enabled = true;
      }
      rates[counting ? 'with' : 'without'].push(traffic.length / ((performance.now() - began) / 1000));
      loads.push(load());
    }
  }
  const best = (values: number[]) => Math.max(...values);
  return { with: best(rates.with), without: best(rates.without), loads };
}

async function main(): Promise<void> {
  const name = `gantry_bench_dq_${randomBytes(3).toString('hex')}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  const url = withDatabase(serverUrl, name);
  const pool = createPool(url, { max: 8, applicationName: 'gantry-bench-dq' });
  let server: ApiServer | undefined;
  try {
    const migrated = await migrateDatabase(url, { storageMode: 'auto' });
    const startLoad = os.loadavg();
    const fleet = await provisionFleet(pool, 'Bench', DEVICES);
    const costFleet = await provisionFleet(pool, 'Cost', 200);
    const openHour = Math.floor(Date.now() / HOUR) * HOUR;
    const openScope = { deviceIds: fleet.deviceIds, from: new Date(openHour), to: new Date(openHour + HOUR) };
    await countHistory(pool, fleet.tenantId, openHour);
    // As deployed: no response validation (the tests check the schema).
    const config = testConfig(url);
    const api = await startApiServer(
      {
        config,
        pool,
        logger: silentLogger(),
        outbox: createOutbox({ maxAttempts: 3 }),
        readiness: {},
        validateResponses: false,
      },
      { host: '127.0.0.1', port: 0 },
    );
    server = api;
    const dataQuality = async () => {
      const response = await fetch(`${api.url}/api/external/v1/telemetry/data-quality`, {
        headers: { 'X-API-Key': fleet.key },
      });
      if (response.status !== 200)
        throw new Error(`data-quality answered ${response.status}: ${await response.text()}`);
      await response.arrayBuffer();
    };

    const phases: Array<{
      messages: number;
      dq: Awaited<ReturnType<typeof timed>>;
      counts: Awaited<ReturnType<typeof timed>>;
      old: Awaited<ReturnType<typeof timed>>;
      fillSeconds: number;
    }> = [];
    let loaded = 0;
    for (const target of [SMALL, LARGE]) {
      const began = performance.now();
      await fillOpenHour(pool, fleet, openHour, loaded, target);
      // Only the open hour: the earlier ones were counted above without raw rows behind them.
      await recountCounters(pool, openScope);
      await pool.query('VACUUM ANALYZE device_counts_hourly, message_errors_hourly');
      const fillSeconds = (performance.now() - began) / 1000;
      loaded = target;
      const dq = await timed(REQUESTS, 5, dataQuality);
      const counts = await timed(REQUESTS, 5, () => counterPath(pool, fleet));
      const old = await timed(BASELINE_REQUESTS, 1, () => oldPath(pool, fleet, openHour));
      phases.push({ messages: target, dq, counts, old, fillSeconds });
      console.log(
        `open hour ${fmt(target)} messages (filled in ${fillSeconds.toFixed(0)} s): data quality p50 ${ms(dq.p50)} p95 ${ms(dq.p95)} [${dq.load}]; counts from counters p95 ${ms(counts.p95)}; old path p95 ${ms(old.p95)} [${old.load}]`,
      );
    }
    const drift =
      (await counterDrift(pool, 'device_counts_hourly', openScope)) +
      (await counterDrift(pool, 'message_errors_hourly', openScope));

    const rates = await ingestRates(pool, costFleet);
    const costDrift = await counterDrift(pool, 'device_counts_hourly', { deviceIds: costFleet.deviceIds });

    const [small, large] = phases as [(typeof phases)[0], (typeof phases)[0]];
    const lines = [
      '',
      `Data-quality benchmark — ${fmt(DEVICES)} devices, default range (last 24 h: 23 counted hours + the open hour), ${migrated.storageMode} mode`,
      `machine: ${os.cpus().length} cores, load average ${startLoad.map((value) => value.toFixed(2)).join(' / ')} at start (shared machine: figures are indicative)`,
      '',
      `                         open hour ${fmt(small.messages).padStart(9)} msgs   open hour ${fmt(large.messages).padStart(9)} msgs   ratio`,
      `data quality p95 (new)  ${ms(small.dq.p95).padStart(12)} [${small.dq.load}]   ${ms(large.dq.p95).padStart(12)} [${large.dq.load}]   ${(large.dq.p95 / small.dq.p95).toFixed(2)}  (target ≤ 1.5)`,
      `data quality p50 (new)  ${ms(small.dq.p50).padStart(12)}               ${ms(large.dq.p50).padStart(12)}               ${(large.dq.p50 / small.dq.p50).toFixed(2)}`,
      '',
      'the counts alone, in the database (the part of the answer that depended on traffic):',
      `counters p95            ${ms(small.counts.p95).padStart(12)} [${small.counts.load}]   ${ms(large.counts.p95).padStart(12)} [${large.counts.load}]   ${(large.counts.p95 / small.counts.p95).toFixed(2)}`,
      `old path p95 (recount)  ${ms(small.old.p95).padStart(12)} [${small.old.load}]   ${ms(large.old.p95).padStart(12)} [${large.old.load}]   ${(large.old.p95 / small.old.p95).toFixed(2)}`,
      `old / counters at p95   ${(small.old.p95 / small.counts.p95).toFixed(1).padStart(12)}                ${(large.old.p95 / large.counts.p95).toFixed(1).padStart(12)}`,
      `counters versus recount (open hour): ${drift} rows differ`,
      '',
      `ingest write path (parse + writeBatch, 2,000-message batches, best of 3 alternating rounds of ${fmt(INGEST_MESSAGES)}):`,
      `  with counters ${fmt(rates.with)} msg/s, without ${fmt(rates.without)} msg/s: counting costs ${((1 - rates.with / rates.without) * 100).toFixed(1)} % of the rate   [${rates.loads.join(', ')}]`,
      `  (the rounds without counters leave the cost tenant's counters ${costDrift} rows off the recount, as expected)`,
      '',
      `requests: ${REQUESTS} data-quality (after 5 warm-up), ${BASELINE_REQUESTS} old-path (after 1), sequential, API in this process`,
    ];
    console.log(lines.join('\n'));
  } finally {
    await server?.close().catch(() => undefined);
    await pool.end();
    if (process.env.BENCH_KEEP !== '1') await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    else console.log(`kept database ${name}`);
    await admin.end();
  }
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
