/**
 * pnpm bench:storage — what a reading costs on disk in each storage mode, and what
 * retention costs (docs/operations.md, "Storage").
 *
 * Per mode (postgres, and timescaledb where the server has it), on a database of its own:
 * 1. Fills GANTRY_BENCH_DEVICES (8) devices × GANTRY_BENCH_DAYS (6) days of simulated
 *    traffic (GANTRY_BENCH_TRAFFIC: `demo`, the demo fleet's machines working all along, or
 *    `random`, the simulator's bulk mix with random values, a message every
 *    GANTRY_BENCH_STEP_SECONDS, 30, per device) through ingest's own batch writer, in
 *    batches of 2,000 messages as an upload arrives, then the last 30 minutes a batch per
 *    10 s of device time as live traffic comes (each batch moves the open minute of every
 *    asset's positions). PostgreSQL mode first gets the day partitions a worker running
 *    all along would have made.
 * 2. Derives (segments, sessions, utilization gold, checkpoints) once the upload is stored
 *    and after each live batch, as the worker does, then thins the checkpoints as the
 *    worker does; TimescaleDB mode refreshes its continuous aggregates (positions).
 * 3. Policies: TimescaleDB compresses silver's chunks older than a day (its compression
 *    job, run with CALL run_job: the background scheduler fails on some builds with
 *    "cannot drop portal"); then retention keeps GANTRY_BENCH_KEEP_DAYS (DAYS − 3) of
 *    silver and 1 day of bronze: TimescaleDB's retention jobs (run_job), PostgreSQL mode's
 *    partition drop (maintainPartitions).
 * Prints bytes per reading of silver, bronze, gold, counters, segments and checkpoints
 * after the fill and after the policies, side by side, with the time each step took and
 * the load average; and how the gold tables' updates went (HOT share, dead rows: every gold
 * relation in PostgreSQL mode, utilization in TimescaleDB mode, where positions are
 * continuous aggregates). GANTRY_BENCH_GOLD_FILLFACTOR=100 resets the gold tables' fillfactor
 * first (the comparison).
 * The databases are dropped at the end unless --keep.
 */
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import type pg from 'pg';
import {
  checkTimescaleAvailability,
  createOutbox,
  createPool,
  maintainPartitions,
  migrateDatabase,
  type Pool,
  type StorageMode,
} from '@gantry/db';
import { parseMessage, type ParsedMessage } from '@gantry/ingest';
import { silentLogger } from '@gantry/logger';
import { demoHistory, encodeMessage, fleetTraffic, type SimulatedMessage } from '@gantry/simulator';
import { writeBatch } from '../../services/ingest/src/storage/write-batch.ts';
import { pruneCheckpoints } from '../../services/worker/src/features/derivation/repository.ts';
import { deriveDirtyDevices } from '../../services/worker/src/features/derivation/service.ts';
import { testConfig } from '../support/api.ts';
import { benchServerUrl, onServer as onTestServer, withDatabase } from '../support/database-url.ts';
import { provisionFleetBulk } from '../support/ingest.ts';

const DEVICES = Number(process.env.GANTRY_BENCH_DEVICES ?? 8);
const DAYS = Number(process.env.GANTRY_BENCH_DAYS ?? 6);
const TRAFFIC = process.env.GANTRY_BENCH_TRAFFIC === 'random' ? 'random' : 'demo';
const STEP_S = Number(process.env.GANTRY_BENCH_STEP_SECONDS ?? 30);
const KEEP_DAYS = Number(process.env.GANTRY_BENCH_KEEP_DAYS ?? Math.max(1, DAYS - 3));
const GOLD_FILLFACTOR = process.env.GANTRY_BENCH_GOLD_FILLFACTOR;
const UPLOAD_BATCH = 2000;
const LIVE_MINUTES = 30;
const DAY_MS = 86_400_000;
const args = new Set(process.argv.slice(2));

const onServer = <T>(fn: (client: pg.Client) => Promise<T>) => onTestServer(fn, benchServerUrl());

const load = () => os.loadavg()[0]!.toFixed(1);
function log(message: string): void {
  process.stdout.write(`${new Date().toISOString().slice(11, 19)} [load ${load()}] ${message}\n`);
}

/** Relations by layer; a name the mode lacks is skipped. */
const LAYERS = {
  silver: ['telemetry_readings'],
  bronze: ['device_message_batches', 'device_message_rows'],
  gold: [
    'positions_1min',
    'positions_15min',
    'utilization_hourly',
    'utilization_daily',
    'utilization_hourly_counts',
    'utilization_daily_counts',
    'utilization_fleet_hourly',
    'utilization_fleet_daily',
  ],
  counters: ['device_counts_hourly', 'message_errors_hourly'],
  segments: ['telemetry_segments'],
  checkpoints: ['derivation_checkpoints'],
} satisfies Record<string, string[]>;

/**
 * Bytes of a relation with its indexes and TOAST: a hypertable's chunks (compressed ones
 * included), a continuous aggregate's materialization, a partitioned table's partitions.
 */
async function relationBytes(pool: Pool, mode: StorageMode, name: string): Promise<number> {
  if (mode === 'timescaledb') {
    const { rows } = await pool.query<{ bytes: string | null }>(
      `SELECT coalesce(
         (SELECT hypertable_size(format('%I.%I', hypertable_schema, hypertable_name))
            FROM timescaledb_information.hypertables WHERE hypertable_name = $1),
         (SELECT hypertable_size(format('%I.%I', materialization_hypertable_schema, materialization_hypertable_name))
            FROM timescaledb_information.continuous_aggregates WHERE view_name = $1)) AS bytes`,
      [name],
    );
    if (rows[0]?.bytes !== null && rows[0]?.bytes !== undefined) return Number(rows[0].bytes);
  }
  const { rows } = await pool.query<{ bytes: string | null }>(
    `SELECT CASE WHEN c.relkind = 'p'
                 THEN (SELECT coalesce(sum(pg_total_relation_size(i.inhrelid)), 0) FROM pg_inherits i WHERE i.inhparent = c.oid)
                 ELSE pg_total_relation_size(c.oid) END AS bytes
       FROM pg_class c WHERE c.oid = to_regclass($1)`,
    [name],
  );
  return Number(rows[0]?.bytes ?? 0);
}

async function layerBytes(pool: Pool, mode: StorageMode): Promise<Record<string, number>> {
  const result: Record<string, number> = {};
  for (const [layer, names] of Object.entries(LAYERS)) {
    result[layer] = 0;
    for (const name of names) result[layer] += await relationBytes(pool, mode, name);
  }
  return result;
}

async function count(pool: Pool, sql: string): Promise<number> {
  const { rows } = await pool.query<{ count: string }>(sql);
  return Number(rows[0]?.count ?? 0);
}

interface ModeFigures {
  mode: StorageMode;
  readings: number;
  fillSeconds: number;
  deriveSeconds: number;
  afterFill: Record<string, number>;
  afterPolicies: Record<string, number>;
  readingsAfter: number;
  compressSeconds: number | null;
  /** Silver bytes per reading in compressed chunks (TimescaleDB). */
  compressedSilverPerReading: number | null;
  retentionSeconds: number;
  retentionNote: string;
  checkpoints: { beforeThinning: number; after: number };
  gold: Array<{ relname: string; live: number; dead: number; updates: number; hot: number; bytes: number }>;
  load: string;
}

function parsed(messages: Iterable<ReturnType<typeof encodeMessage> & { ts: number }>): ParsedMessage[] {
  return [...messages].map(({ topic, payload, ts }) => {
    const receivedAt = ts + 2_000;
    return parseMessage(
      { topic, payload: Buffer.from(payload), receivedAt },
      { maxPayloadBytes: 65536, bounds: { maxFutureMs: 300_000, maxAgeMs: 400 * DAY_MS, now: receivedAt } },
    );
  });
}

async function write(pool: Pool, messages: ParsedMessage[]): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await writeBatch(client, messages, { method: 'copy', oversizedPayloadBytes: 4096 });
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}

/**
 * The fleet's history in device-time order: the demo fleet's machines working all along
 * (GPS every 10 s while running, hourmeter and heartbeat every minute, container moves,
 * breaks: smooth tracks, as devices send), or the simulator's bulk traffic (random values,
 * a message every STEP_S per device: the worst case for compression).
 */
function history(deviceIds: string[], start: number, end: number): SimulatedMessage[] {
  if (TRAFFIC === 'random')
    return [
      ...fleetTraffic({
        deviceIds,
        count: Math.floor((end - start) / (STEP_S * 1000)) * deviceIds.length,
        start,
        stepMs: STEP_S * 1000,
        seed: 7,
      }),
    ];
  const { messages } = demoHistory({
    deviceIds,
    end,
    hours: (end - start) / 3_600_000,
    operators: deviceIds.map((_, index) => `OP-${String(index + 1).padStart(3, '0')}`),
    seed: 7,
  });
  return messages.sort((a, b) => a.ts - b.ts);
}

/**
 * Uploads in batches of 2,000, then the last 30 minutes a batch per 10 s of device time,
 * as live traffic comes; `derive` runs once the upload is stored and after each live batch.
 */
async function fill(
  pool: Pool,
  deviceIds: string[],
  range: { start: number; end: number },
  derive: () => Promise<void>,
): Promise<void> {
  const liveFrom = range.end - LIVE_MINUTES * 60_000;
  let batch: Array<ReturnType<typeof encodeMessage> & { ts: number }> = [];
  let batchEnd = 0;
  for (const message of history(deviceIds, range.start, range.end)) {
    const live = message.ts >= liveFrom;
    if (batch.length > 0 && (live ? message.ts >= batchEnd : batch.length >= UPLOAD_BATCH)) {
      await write(pool, parsed(batch));
      if (live) await derive();
      batch = [];
    }
    if (batch.length === 0) batchEnd = Math.max(message.ts, liveFrom) + 10_000;
    batch.push({ ...encodeMessage(message), ts: message.ts });
  }
  if (batch.length > 0) await write(pool, parsed(batch));
  await derive();
}

/** The gold relations that are tables (not continuous aggregates). */
async function goldTables(pool: Pool): Promise<string[]> {
  const { rows } = await pool.query<{ relname: string }>(
    `SELECT relname FROM pg_class WHERE relname = ANY ($1::text[]) AND relkind = 'r' ORDER BY relname`,
    [LAYERS.gold],
  );
  return rows.map((row) => row.relname);
}

async function goldUpdates(pool: Pool): Promise<ModeFigures['gold']> {
  // The counters reach pg_stat_* within a second or so of each commit.
  await new Promise((resolve) => setTimeout(resolve, 1500));
  const { rows } = await pool.query<ModeFigures['gold'][number]>(
    `SELECT relname, n_live_tup::int AS live, n_dead_tup::int AS dead, n_tup_upd::int AS updates, n_tup_hot_upd::int AS hot,
            pg_total_relation_size(relid)::float8 AS bytes
       FROM pg_stat_user_tables WHERE relname = ANY ($1::text[]) ORDER BY relname`,
    [LAYERS.gold],
  );
  return rows;
}

async function runJobs(pool: Pool, proc: string, hypertable?: string): Promise<number> {
  const { rows } = await pool.query<{ job_id: number }>(
    `SELECT job_id FROM timescaledb_information.jobs WHERE proc_name = $1 AND ($2::text IS NULL OR hypertable_name = $2)`,
    [proc, hypertable ?? null],
  );
  const started = performance.now();
  for (const row of rows) await pool.query(`CALL run_job($1)`, [row.job_id]);
  return (performance.now() - started) / 1000;
}

async function benchMode(mode: StorageMode): Promise<ModeFigures> {
  const database = `gantry_bench_storage_${mode}`;
  const url = withDatabase(benchServerUrl(), database);
  await onServer(async (client) => {
    await client.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    await client.query(`CREATE DATABASE ${database}`);
  });
  const retention = { bronzeDays: 14, readingDays: 400 };
  await migrateDatabase(url, { storageMode: mode, retention });
  const pool = createPool(url, { max: 4, applicationName: 'gantry-bench-storage' });
  try {
    await pool.query(`ALTER DATABASE ${database} SET synchronous_commit = off`);
    const now = Date.now();
    const end = Math.floor(now / 60_000) * 60_000;
    const start = end - DAYS * DAY_MS;
    if (mode === 'timescaledb') {
      // Policies run here, when the benchmark says so.
      await pool.query(
        `SELECT alter_job(job_id, scheduled => false) FROM timescaledb_information.jobs WHERE job_id >= 1000`,
      );
    } else {
      const client = await pool.connect();
      try {
        await maintainPartitions(client, { now: start, behindDays: 1, aheadDays: DAYS + 1 });
      } finally {
        client.release();
      }
    }
    if (GOLD_FILLFACTOR)
      for (const name of await goldTables(pool))
        await pool.query(`ALTER TABLE ${name} SET (fillfactor = ${Number(GOLD_FILLFACTOR)})`);
    const fleet = await provisionFleetBulk(
      pool,
      Array.from({ length: DEVICES }, (_, index) => `storage-sc-${String(index + 1).padStart(4, '0')}`),
    );
    log(`${mode}: filling ${DEVICES} devices × ${DAYS} days (${TRAFFIC} traffic), deriving as it comes`);
    const config = testConfig(url, { GANTRY_DERIVATION_MAX_READINGS: '200000' });
    const deps = { pool, outbox: createOutbox({ maxAttempts: 3 }), logger: silentLogger(), config };
    let deriveMs = 0;
    const derive = async () => {
      const started = performance.now();
      while ((await deriveDirtyDevices(deps)).devices > 0);
      deriveMs += performance.now() - started;
    };
    let started = performance.now();
    await fill(
      pool,
      fleet.devices.map((device) => device.deviceId),
      { start, end },
      derive,
    );
    const deriveSeconds = deriveMs / 1000;
    const fillSeconds = (performance.now() - started) / 1000 - deriveSeconds;
    const readings = await count(pool, 'SELECT count(*) FROM telemetry_readings');
    log(
      `${mode}: ${readings} readings stored in ${fillSeconds.toFixed(1)} s, derived in ${deriveSeconds.toFixed(1)} s`,
    );
    const beforeThinning = await count(pool, 'SELECT count(*) FROM derivation_checkpoints');
    await pruneCheckpoints(pool, { hourlyDays: 3, dailyDays: 31, readingDays: 400 });
    const checkpoints = { beforeThinning, after: await count(pool, 'SELECT count(*) FROM derivation_checkpoints') };
    if (mode === 'timescaledb') {
      for (const name of ['positions_1min', 'positions_15min'])
        await pool.query(`CALL refresh_continuous_aggregate($1, NULL, NULL)`, [name]);
    }
    const gold = await goldUpdates(pool);
    const afterFill = await layerBytes(pool, mode);
    log(`${mode}: checkpoints ${beforeThinning} → ${checkpoints.after}`);

    let compressSeconds: number | null = null;
    let compressedSilverPerReading: number | null = null;
    let retentionSeconds: number;
    let retentionNote: string;
    if (mode === 'timescaledb') {
      await pool.query(
        `SELECT alter_job(job_id, config => jsonb_set(config, '{compress_after}', '"1 day"'))
           FROM timescaledb_information.jobs WHERE proc_name = 'policy_compression' AND hypertable_name = 'telemetry_readings'`,
      );
      compressSeconds = await runJobs(pool, 'policy_compression', 'telemetry_readings');
      const { rows } = await pool.query<{ bytes: string; until: Date | null }>(
        `SELECT coalesce(sum(s.after_compression_total_bytes), 0) AS bytes, max(c.range_end) AS until
           FROM chunk_compression_stats('telemetry_readings') s
           JOIN timescaledb_information.chunks c ON c.chunk_schema = s.chunk_schema AND c.chunk_name = s.chunk_name
          WHERE s.compression_status = 'Compressed'`,
      );
      const until = rows[0]?.until;
      if (until) {
        const inCompressed = await count(
          pool,
          `SELECT count(*) FROM telemetry_readings WHERE ts < '${until.toISOString()}'`,
        );
        compressedSilverPerReading = Number(rows[0]!.bytes) / inCompressed;
      }
      log(`${mode}: compressed silver in ${compressSeconds.toFixed(1)} s`);
      const chunksBefore = await count(pool, `SELECT count(*) FROM timescaledb_information.chunks`);
      // The configured retention, applied as at every start: the policies follow it.
      await migrateDatabase(url, { storageMode: mode, retention: { bronzeDays: 1, readingDays: KEEP_DAYS } });
      await pool.query(
        `SELECT alter_job(job_id, scheduled => false) FROM timescaledb_information.jobs WHERE job_id >= 1000`,
      );
      retentionSeconds = await runJobs(pool, 'policy_retention');
      const chunksAfter = await count(pool, `SELECT count(*) FROM timescaledb_information.chunks`);
      retentionNote = `chunks ${chunksBefore} → ${chunksAfter}`;
    } else {
      const partitions = () =>
        count(
          pool,
          `SELECT count(*) FROM pg_inherits WHERE inhparent IN ('telemetry_readings'::regclass,
             'device_message_batches'::regclass, 'device_message_rows'::regclass)`,
        );
      const before = await partitions();
      const client = await pool.connect();
      started = performance.now();
      try {
        const report = await maintainPartitions(client, { retention: { bronzeDays: 1, readingDays: KEEP_DAYS } });
        retentionSeconds = (performance.now() - started) / 1000;
        retentionNote = `partitions ${before} → ${await partitions()} (${report.dropped.length} dropped, ${report.expiredInDefault} rows deleted)`;
      } finally {
        client.release();
      }
    }
    log(`${mode}: retention in ${retentionSeconds.toFixed(2)} s, ${retentionNote}`);
    return {
      mode,
      readings,
      fillSeconds,
      deriveSeconds,
      afterFill,
      afterPolicies: await layerBytes(pool, mode),
      readingsAfter: await count(pool, 'SELECT count(*) FROM telemetry_readings'),
      compressSeconds,
      compressedSilverPerReading,
      retentionSeconds,
      retentionNote,
      checkpoints,
      gold,
      load: load(),
    };
  } finally {
    await pool.end();
    if (!args.has('--keep'))
      await onServer((client) => client.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`));
  }
}

function report(results: ModeFigures[]): void {
  const pad = (value: string, width = 22) => value.padStart(width);
  const row = (label: string, values: string[]) =>
    console.log(`${label.padEnd(34)}${values.map((v) => pad(v)).join('')}`);
  console.log(
    `\nbench:storage — ${DEVICES} devices × ${DAYS} days, ${TRAFFIC} traffic; retention kept ${KEEP_DAYS} days of silver, 1 of bronze`,
  );
  row(
    'mode',
    results.map((r) => r.mode),
  );
  row(
    'readings (after retention)',
    results.map((r) => `${r.readings} (${r.readingsAfter})`),
  );
  row(
    'fill, derive (s)',
    results.map((r) => `${r.fillSeconds.toFixed(1)}, ${r.deriveSeconds.toFixed(1)}`),
  );
  console.log('bytes per reading after the fill (after the policies):');
  for (const layer of Object.keys(LAYERS) as Array<keyof typeof LAYERS>)
    row(
      `  ${layer}`,
      results.map(
        (r) =>
          `${(r.afterFill[layer]! / r.readings).toFixed(1)} (${(r.afterPolicies[layer]! / Math.max(1, r.readingsAfter)).toFixed(1)})`,
      ),
    );
  row(
    'silver in compressed chunks (B/reading)',
    results.map((r) => (r.compressedSilverPerReading === null ? '—' : r.compressedSilverPerReading.toFixed(1))),
  );
  row(
    'compression (s)',
    results.map((r) => (r.compressSeconds === null ? '—' : r.compressSeconds.toFixed(1))),
  );
  row(
    'retention (s)',
    results.map((r) => r.retentionSeconds.toFixed(2)),
  );
  for (const r of results) console.log(`  ${r.mode} retention: ${r.retentionNote}`);
  row(
    'checkpoints before → after thinning',
    results.map((r) => `${r.checkpoints.beforeThinning} → ${r.checkpoints.after}`),
  );
  row(
    'load average at the end',
    results.map((r) => r.load),
  );
  for (const r of results.filter((result) => result.gold.length > 0)) {
    console.log(`${r.mode} gold updates${GOLD_FILLFACTOR ? ` (fillfactor ${GOLD_FILLFACTOR})` : ''}:`);
    for (const g of r.gold)
      console.log(
        `  ${g.relname.padEnd(28)} live ${String(g.live).padStart(8)}  dead ${String(g.dead).padStart(7)}  updates ${String(g.updates).padStart(8)}  HOT ${g.updates === 0 ? '—' : `${Math.round((100 * g.hot) / g.updates)} %`}  ${(g.bytes / 1024).toFixed(0)} kB`,
      );
  }
}

async function main(): Promise<void> {
  const modes: StorageMode[] = ['postgres'];
  const requested = process.env.GANTRY_BENCH_MODE;
  if (requested === 'timescaledb') modes.splice(0, 1);
  if (requested !== 'postgres' && (await onServer((client) => checkTimescaleAvailability(client))).available)
    modes.push('timescaledb');
  const results: ModeFigures[] = [];
  for (const mode of modes) results.push(await benchMode(mode));
  report(results);
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
