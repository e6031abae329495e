import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import {
  createOutbox,
  createPool,
  dbDirectory,
  goldDefinition,
  goldRelation,
  goldRelations,
  migrateDatabase,
  type Pool,
  type StorageMode,
} from '@gantry/db';
import { silentLogger } from '@gantry/logger';
import { destination, encodeMessage, MachineScript, type LatLon, type SimulatedMessage } from '@gantry/simulator';
import { deriveDirtyDevices } from '../../services/worker/src/features/derivation/service.ts';
import { refreshGold } from '../../services/worker/src/features/gold/refresh.ts';
import { json, startTestApi, testConfig, type TestApi } from '../support/api.ts';
import { availableStorageModes } from '../support/database.ts';
import { onServer, serverUrl, withDatabase } from '../support/database-url.ts';
import { parseRaw, writeParsed } from '../support/ingest.ts';
import { createFleet, createOperator, type Fleet } from '../telemetry-api/fixtures.ts';

// A database made by earlier code, with history in it (compressed chunks in TimescaleDB
// mode), migrated by the current code: the API answers as before, and new data still
// lands and derives. The earlier code's schema is a copy of its db/ folder
// (test/fixtures/schema-<commit>); whatever migrations were added since are what runs here.
// In TimescaleDB mode the earlier code also made utilization gold as continuous
// aggregates, which the upgrade turns into tables kept by differences (earlierUtilization).

const OLD_SCHEMA = fileURLToPath(new URL('../fixtures/schema-f113e23', import.meta.url));
const RETENTION = { bronzeDays: 14, readingDays: 400 };
const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const DAYS = 3;
const YARD: LatLon = { lat: 53.5409, lon: 9.9707 };
/** Four days ago at midnight UTC: the history's days are all over, so its sessions are closed. */
const FIRST_DAY = Math.floor(Date.now() / DAY) * DAY - 4 * DAY;
const MACHINES: Array<[string, string]> = [
  ['SC 01', 'Acme'],
  ['SC 02', 'Globex'],
  ['SC 03', 'Acme'],
];

const created: string[] = [];
afterAll(async () => {
  await onServer(async (admin) => {
    for (const name of created) await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  });
});

async function emptyDatabase(mode: StorageMode): Promise<string> {
  const name = `gantry_upgrade_${mode}_${randomBytes(3).toString('hex')}_test`;
  await onServer((admin) => admin.query(`CREATE DATABASE ${name}`));
  created.push(name);
  return withDatabase(serverUrl(), name);
}

/** TimescaleDB mode: no policy fires on its own (their jobs fail on this server's build), and no earlier run is on record. */
async function quietJobs(pool: Pool, mode: StorageMode): Promise<void> {
  if (mode !== 'timescaledb') return;
  await pool.query(
    `SELECT alter_job(job_id, scheduled => false) FROM timescaledb_information.jobs WHERE job_id >= 1000`,
  );
  await pool.query(`DO $$ BEGIN
    DELETE FROM _timescaledb_internal.bgw_job_stat;
    IF to_regclass('_timescaledb_internal.bgw_job_stat_history') IS NOT NULL THEN
      DELETE FROM _timescaledb_internal.bgw_job_stat_history;
    END IF;
  END $$`);
}

const UTILIZATION = ['utilization_hourly', 'utilization_daily'];

/**
 * The counts tables of utilization gold kept by differences in TimescaleDB mode, from
 * today's migration: the history is derived by today's code, which keeps gold by
 * differences, before earlierUtilization puts gold back as the earlier code had it.
 */
async function countsForTodaysDerivation(pool: Pool): Promise<void> {
  const sql = readFileSync(path.join(dbDirectory, 'timescaledb', '0490_utilization_deltas.sql'), 'utf8');
  await pool.query(sql.split('-- Down Migration')[0]!);
}

/** The definition hash the earlier code stored for a relation (packages/db/src/gold.ts of then). */
function earlierHash(mode: StorageMode, name: string): string {
  return createHash('sha256')
    .update(mode)
    .update(JSON.stringify({ ...goldRelation(name), keptByDeltas: undefined }))
    .update(goldDefinition(name, 'TRUE', OLD_SCHEMA))
    .digest('hex')
    .slice(0, 16);
}

/**
 * Utilization gold as the earlier code made it in TimescaleDB mode: continuous aggregates
 * (daily on hourly) with their index and refresh policy, no counts tables, refreshed whole
 * as its worker refreshed a new aggregate, the fleet rollup summed from them, and the
 * definition hashes it stored.
 */
async function earlierUtilization(pool: Pool): Promise<void> {
  await pool.query(
    `DROP TABLE utilization_daily, utilization_hourly, utilization_daily_counts, utilization_hourly_counts`,
  );
  for (const name of UTILIZATION) {
    const { policy } = goldRelation(name);
    await pool.query(
      `CREATE MATERIALIZED VIEW ${name} WITH (timescaledb.continuous, timescaledb.materialized_only = true) AS
         ${goldDefinition(name, 'TRUE', OLD_SCHEMA)}
       WITH NO DATA`,
    );
    await pool.query(`CREATE INDEX ${name}_tenant_bucket_idx ON ${name} (tenant_id, bucket)`);
    await pool.query(
      `SELECT add_continuous_aggregate_policy($1::regclass,
         start_offset => $2::interval, end_offset => $3::interval, schedule_interval => $4::interval)`,
      [name, policy.startOffset, policy.endOffset, policy.scheduleInterval],
    );
    await pool.query(`CALL refresh_continuous_aggregate($1::regclass, NULL, NULL)`, [name]);
    await pool.query(
      `UPDATE gold_coverage SET status = 'ok', updated_at = now(),
              coverage_from = (SELECT min(bucket) FROM ${name}),
              coverage_to = time_bucket($2::interval, now()) + $2::interval
        WHERE relation = $1`,
      [name, goldRelation(name).bucketWidth],
    );
    await pool.query(`UPDATE gantry_meta SET value = to_jsonb($2::text) WHERE key = $1`, [
      `gold:${name}`,
      earlierHash('timescaledb', name),
    ]);
  }
  await pool.query(`SELECT gantry_fleet_recompute(NULL, NULL, NULL)`);
}

/** What each gold relation is (relkind) and, for a continuous aggregate, its materialization hypertable. */
async function goldObjects(pool: Pool): Promise<Record<string, string>> {
  const { rows } = await pool.query<{ name: string; object: string }>(
    `SELECT c.relname AS name, c.relkind::text || coalesce(':' || ca.mat_hypertable_id, '') AS object
       FROM pg_class c
       LEFT JOIN _timescaledb_catalog.continuous_agg ca ON ca.user_view_name = c.relname AND ca.user_view_schema = 'public'
      WHERE c.relname = ANY ($1::text[]) AND c.relnamespace = 'public'::regnamespace`,
    [goldRelations.map((relation) => relation.name)],
  );
  return Object.fromEntries(rows.map((row) => [row.name, row.object]));
}

/** One shift of a machine on the day starting at `day`: an operator, three container moves, a stop. */
function shift(deviceId: string, day: number, machine: number): SimulatedMessage[] {
  const script = new MachineScript({
    deviceId,
    start: day + (6 + machine) * HOUR,
    position: YARD,
    gpsEveryS: 30,
    hourmeterEveryS: 300,
    heartbeatEveryS: 300,
  });
  const quay = destination(YARD, 500 + 150 * machine, 90);
  const stack = destination(quay, 300, 0);
  script
    .ignitionOn()
    .login(`OP-${machine + 1}`)
    .idle(300);
  for (let move = 0; move < 3; move += 1) {
    script.drive(quay, 12).lift().idle(60).drive(stack, 9).idle(30).drop().idle(120).drive(YARD, 12).idle(300);
  }
  script.logout().idle(30).ignitionOff().idle(900);
  return script.messages();
}

interface RawMessage {
  topic: string;
  payload: Buffer;
  receivedAt: number;
}

/** A simulated message as the broker hands it to ingest, two seconds after its device time. */
function received(message: SimulatedMessage): RawMessage {
  const { topic, payload } = encodeMessage(message);
  return { topic, payload: Buffer.from(payload), receivedAt: message.ts + 2_000 };
}

/** A message ingest rejects (kept in bronze's row table, counted in data quality). */
function malformed(deviceId: string, receivedAt: number): RawMessage {
  return { topic: `gantry/v1/devices/${deviceId}/gps`, payload: Buffer.from('{"ts": "soon"'), receivedAt };
}

/** Stores messages through ingest's own parse and batch write, in the order they were received. */
async function ingest(pool: Pool, databaseUrl: string, messages: RawMessage[]): Promise<void> {
  const config = testConfig(databaseUrl);
  const raws = [...messages].sort((a, b) => a.receivedAt - b.receivedAt);
  for (let start = 0; start < raws.length; start += 500) {
    await writeParsed(
      pool,
      raws.slice(start, start + 500).map((raw) => parseRaw(config, raw)),
      'unnest',
    );
  }
}

/**
 * The old database's history is written, and its answers read, by today's code, which
 * writes and reads what the old code did and besides keeps data quality's counter window,
 * which the old schema lacks. The window's tables (migration 0480, empty: every range is
 * answered from the hourly counters, as before it) stand in for it until the upgrade
 * begins, and are dropped then, so the upgrade starts from the old schema with the old
 * code's rows.
 */
const counterWindowMigration = () =>
  readFileSync(new URL('../../db/migrations/0480_counter_window.sql', import.meta.url), 'utf8').split(
    '-- Down Migration',
  ) as [string, string];

/** Derives every dirty device and brings gold up to date, as the worker does. */
async function deriveAndRefresh(pool: Pool, databaseUrl: string, mode: StorageMode): Promise<void> {
  const logger = silentLogger();
  const derivation = { pool, outbox: createOutbox({ maxAttempts: 3 }), logger, config: testConfig(databaseUrl) };
  for (let guard = 0; guard < 1000 && (await deriveDirtyDevices(derivation)).devices > 0; guard += 1);
  for (let guard = 0; guard < 1000; guard += 1) {
    const result = await refreshGold({ pool, logger, storageMode: mode });
    if (result.failed.length > 0) throw new Error(`gold refresh failed: ${result.failed.join(', ')}`);
    if (!result.more && result.busy.length === 0) return;
  }
  throw new Error('gold refresh did not settle');
}

/** Compresses every chunk of every hypertable with compression (bronze, silver, segments); chunks compressed per table. */
async function compressAllChunks(pool: Pool): Promise<Record<string, number>> {
  await pool.query(
    `SELECT compress_chunk(c.chunk, if_not_compressed => true)
       FROM timescaledb_information.hypertables h
      CROSS JOIN LATERAL show_chunks(format('%I.%I', h.hypertable_schema, h.hypertable_name)::regclass) AS c(chunk)
      WHERE h.hypertable_schema = 'public' AND h.compression_enabled`,
  );
  const { rows } = await pool.query<{ hypertable_name: string; compressed: number }>(
    `SELECT hypertable_name, count(*) FILTER (WHERE is_compressed)::int AS compressed
       FROM timescaledb_information.chunks WHERE hypertable_schema = 'public' GROUP BY 1`,
  );
  return Object.fromEntries(rows.map((row) => [row.hypertable_name, row.compressed]));
}

const day = (ms: number) => new Date(ms).toISOString().slice(0, 10);
const iso = (ms: number) => new Date(ms).toISOString();

/** Fields that tell when an answer was made or refreshed, not what it says. */
const MOMENT_FIELDS = new Set(['generatedAt', 'updatedAt', 'analyticsUpdatedAt', 'coverageTo']);

function withoutMoments(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutMoments);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.entries(value)
      .filter(([key]) => !MOMENT_FIELDS.has(key))
      .map(([key, inner]) => [key, withoutMoments(inner)]),
  );
}

/** The answers compared across the upgrade: every telemetry read a client of the history makes. */
async function readAnswers(api: TestApi, fleet: Fleet, range: { from: number; to: number }) {
  const [first, last] = [day(range.from), day(range.to - 1)];
  const paths = (customerName: string | null) => [
    `/telemetry/utilization?from=${first}&to=${last}&bucket=day&groupBy=asset`,
    `/telemetry/utilization?from=${first}&to=${last}&bucket=hour&groupBy=fleet&limit=500`,
    `/telemetry/container-work?from=${first}&to=${last}&bucket=day`,
    `/telemetry/devices`,
    `/telemetry/data-quality?from=${iso(range.from)}&to=${iso(range.to)}`,
    `/telemetry/usage-sessions?from=${first}&to=${last}`,
    `/telemetry/identifier-sessions?from=${first}&to=${last}`,
    ...fleet.assets
      .filter((asset) => customerName === null || asset.customerName === customerName)
      .flatMap((asset) => [
        `/telemetry/assets/${asset.id}/positions?from=${iso(range.from)}&to=${iso(range.to)}&resolution=15min&limit=500`,
        `/telemetry/assets/${asset.id}/positions?from=${iso(range.from)}&to=${iso(range.from + DAY)}&resolution=1min&limit=500`,
      ]),
  ];
  const answers: Record<string, unknown> = {};
  for (const [key, label, customerName] of [
    [fleet.tenantKey, 'tenant', null],
    [fleet.acmeKey, 'acme', 'Acme'],
  ] as const) {
    for (const path of paths(customerName)) {
      const response = await api.external(path, key);
      const body = await response.json();
      expect(response.status, `${label} ${path}: ${JSON.stringify(body).slice(0, 300)}`).toBe(200);
      answers[`${label} ${path}`] = withoutMoments(body);
    }
  }
  const csv = await api.external(
    `/telemetry/positions/export.csv?assetId=${fleet.assets[0]!.id}&from=${iso(range.from)}&to=${iso(range.to)}&resolution=1min`,
    fleet.tenantKey,
  );
  expect(csv.status).toBe(200);
  answers['positions export'] = await csv.text();
  return answers;
}

describe.each(availableStorageModes())('upgrading a %s database made by the code of f113e23', (mode) => {
  it('keeps every answer about its (compressed) history, and new data lands and derives', async () => {
    const url = await emptyDatabase(mode);
    await migrateDatabase(url, { storageMode: mode, retention: RETENTION, directory: OLD_SCHEMA });
    let pool = createPool(url, { max: 5, applicationName: 'gantry-test' });
    await quietJobs(pool, mode);
    if (mode === 'timescaledb') await countsForTodaysDerivation(pool);

    const fleet = await createFleet(pool, MACHINES, 'Upgrade terminal');
    for (const [index] of MACHINES.entries())
      await createOperator(pool, fleet.tenantId, `OP-${index + 1}`, `Op ${index}`);
    const history: RawMessage[] = [];
    for (let d = 0; d < DAYS; d += 1) {
      for (const [index, asset] of fleet.assets.entries()) {
        history.push(...shift(asset.deviceId, FIRST_DAY + d * DAY, index).map(received));
        history.push(malformed(asset.deviceId, FIRST_DAY + d * DAY + 9 * HOUR));
      }
    }
    await pool.query(counterWindowMigration()[0]);
    await ingest(pool, url, history);
    await deriveAndRefresh(pool, url, mode);
    // Today's code stores the relations made as before under the hashes the earlier code
    // computed (every one in PostgreSQL mode, positions in TimescaleDB mode): the upgrade
    // leaves them as they are.
    const unchanged = goldRelations
      .filter((relation) => mode === 'postgres' || !relation.keptByDeltas)
      .map((relation) => relation.name);
    const { rows: hashes } = await pool.query<{ key: string; value: string }>(
      `SELECT key, value #>> '{}' AS value FROM gantry_meta WHERE key = ANY ($1::text[])`,
      [unchanged.map((name) => `gold:${name}`)],
    );
    expect(Object.fromEntries(hashes.map((row) => [row.key, row.value]))).toEqual(
      Object.fromEntries(unchanged.map((name) => [`gold:${name}`, earlierHash(mode, name)])),
    );
    let earlierGold: Record<string, string> = {};
    if (mode === 'timescaledb') {
      await earlierUtilization(pool);
      await quietJobs(pool, mode);
      earlierGold = await goldObjects(pool);
      const compressed = await compressAllChunks(pool);
      expect(compressed.telemetry_readings, JSON.stringify(compressed)).toBeGreaterThanOrEqual(DAYS);
      expect(compressed.telemetry_segments, JSON.stringify(compressed)).toBeGreaterThan(0);
      expect(compressed.device_message_rows, JSON.stringify(compressed)).toBeGreaterThan(0);
    }

    const range = { from: FIRST_DAY, to: FIRST_DAY + DAYS * DAY };
    let api = await startTestApi(pool, url);
    const before = await readAnswers(api, fleet, range);
    await api.close();
    await pool.end();
    // The history is really there: sessions of every machine and day, positions of each.
    const sessions = before[`tenant /telemetry/usage-sessions?from=${day(range.from)}&to=${day(range.to - 1)}`];
    expect((sessions as { items: unknown[] }).items).toHaveLength(DAYS * MACHINES.length);
    for (const asset of fleet.assets) {
      const positions = Object.entries(before).find(([path]) =>
        path.startsWith(`tenant /telemetry/assets/${asset.id}/`),
      );
      expect((positions![1] as { items: unknown[] }).items.length).toBeGreaterThanOrEqual(DAYS * 2);
    }

    // The upgrade, and the worker's first round after it (a relation the upgrade
    // recreated is rebuilt from the history here).
    await onServer((client) => client.query(counterWindowMigration()[1]), url);
    await migrateDatabase(url, { storageMode: 'auto', retention: RETENTION });
    pool = createPool(url, { max: 5, applicationName: 'gantry-test' });
    await quietJobs(pool, mode);
    if (mode === 'timescaledb') {
      // Utilization's aggregates became tables, to be rebuilt by the worker; the positions
      // aggregates are the very ones the earlier code made.
      const gold = await goldObjects(pool);
      expect(gold).toEqual({
        ...earlierGold,
        utilization_hourly: 'r',
        utilization_daily: 'r',
      });
      for (const name of UTILIZATION) expect(earlierGold[name]).toMatch(/^v:\d+$/);
      const { rows: statuses } = await pool.query(
        `SELECT relation, status FROM gold_coverage WHERE relation = ANY ($1::text[]) ORDER BY relation`,
        [UTILIZATION],
      );
      expect(statuses).toEqual([
        { relation: 'utilization_daily', status: 'rebuild' },
        { relation: 'utilization_hourly', status: 'rebuild' },
      ]);
    }
    await deriveAndRefresh(pool, url, mode);
    api = await startTestApi(pool, url);
    try {
      const after = await readAnswers(api, fleet, range);
      for (const key of Object.keys(before)) expect(after[key], key).toEqual(before[key]);

      // New data after the upgrade: yesterday's shifts land, derive and are answered.
      const yesterday = FIRST_DAY + DAYS * DAY;
      await ingest(
        pool,
        url,
        fleet.assets.flatMap((asset, index) => shift(asset.deviceId, yesterday, index).map(received)),
      );
      await deriveAndRefresh(pool, url, mode);
      const newDay = day(yesterday);
      const newSessions = await json(
        await api.external(`/telemetry/usage-sessions?from=${newDay}&to=${newDay}`, fleet.tenantKey),
      );
      expect(newSessions.items).toHaveLength(MACHINES.length);
      const utilization = await json(
        await api.external(
          `/telemetry/utilization?from=${newDay}&to=${newDay}&bucket=day&groupBy=asset`,
          fleet.tenantKey,
        ),
      );
      expect(utilization.source).toBe('gold');
      expect(utilization.items).toHaveLength(MACHINES.length);
      for (const item of utilization.items) expect(item.runningSeconds).toBeGreaterThan(0);
      const positions = await json(
        await api.external(
          `/telemetry/assets/${fleet.assets[0]!.id}/positions?from=${iso(yesterday)}&to=${iso(yesterday + DAY)}&limit=500`,
          fleet.tenantKey,
        ),
      );
      expect(positions.source).toBe('gold');
      expect(positions.items.length).toBeGreaterThan(10);
      // The history still answers as before the new day came (devices and data quality
      // also show each device's latest state, which the new day moved).
      const again = await readAnswers(api, fleet, range);
      const latestState = /\/telemetry\/(devices|data-quality)\b/;
      for (const key of Object.keys(before).filter((path) => !latestState.test(path)))
        expect(again[key], key).toEqual(before[key]);
    } finally {
      await api.close();
      await pool.end();
    }
  }, 600_000);
});
