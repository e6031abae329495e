import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { utilizationStatement, type StorageMode } from '@gantry/db';
import { copyStatement } from '../../services/api/src/http/export.ts';
import { wholeHours } from '../../services/api/src/features/telemetry/counts.repository.ts';
import { dataQualityStatement } from '../../services/api/src/features/telemetry/data-quality.service.ts';
import { positionStatement } from '../../services/api/src/features/telemetry/positions.repository.ts';
import {
  identifierSessionStatement,
  usageSessionStatement,
} from '../../services/api/src/features/telemetry/sessions.repository.ts';
import {
  exportColumns,
  orderedSql,
  pageSql,
  type TelemetryScope,
} from '../../services/api/src/features/telemetry/sql.ts';
import { testConfig } from '../support/api.ts';
import { availableStorageModes, createTestDatabase, type TestDatabase } from '../support/database.ts';
import { provisionFleetBulk, uniqueDeviceIds } from '../support/ingest.ts';
import { materializeGold } from './gold.ts';

// Per-asset (and per-device) statements must use their key whatever the statistics say:
// right after a month's upload, before autovacuum has analysed anything, the planner
// knows only the tables' sizes. Each statement is planned on such a database — loaded,
// never analysed, autovacuum off — and must read its big table through the index that
// leads with the asset (or device) and time, never by a sequential scan.

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const DAYS = 3;
const DEVICES_PER_TENANT = 20;
/** The loaded days end at the last midnight (UTC). */
const TO = Math.floor(Date.now() / DAY) * DAY;
const FROM = TO - DAYS * DAY;

/** The tables the statements read (in TimescaleDB mode their chunks and materializations too). */
const BIG_TABLES = [
  'telemetry_readings',
  'telemetry_segments',
  'positions_1min',
  'positions_15min',
  'utilization_hourly',
  'utilization_daily',
  'usage_sessions',
  'identifier_sessions',
  'device_counts_hourly',
  'message_errors_hourly',
];

interface Scan {
  node: string;
  relation: string | null;
  index: string | null;
}

/** Every scan node of a JSON plan, InitPlans and subplans included. */
function scansOf(plan: Record<string, unknown>): Scan[] {
  const node = plan['Node Type'] as string;
  const own: Scan[] = /Scan/.test(node)
    ? [{ node, relation: (plan['Relation Name'] as string) ?? null, index: (plan['Index Name'] as string) ?? null }]
    : [];
  const children = (plan.Plans as Array<Record<string, unknown>> | undefined) ?? [];
  return [...own, ...children.flatMap(scansOf)];
}

async function explain(db: TestDatabase, text: string, values: unknown[] = []): Promise<Scan[]> {
  const { rows } = await db.pool.query<{ 'QUERY PLAN': Array<{ Plan: Record<string, unknown> }> }>(
    `EXPLAIN (FORMAT JSON) ${text}`,
    values,
  );
  return scansOf(rows[0]!['QUERY PLAN'][0]!.Plan);
}

async function load(db: TestDatabase): Promise<{ tenantId: string; assetId: string; deviceId: string }> {
  const tenants = [
    await provisionFleetBulk(db.pool, uniqueDeviceIds(DEVICES_PER_TENANT, 'plan-a'), 'Plans terminal A'),
    await provisionFleetBulk(db.pool, uniqueDeviceIds(DEVICES_PER_TENANT, 'plan-b'), 'Plans terminal B'),
  ];
  const devices = tenants.flatMap((tenant) =>
    tenant.devices.map((device) => ({ tenantId: tenant.tenantId, ...device })),
  );
  const unnestDevices = `unnest($1::uuid[], $2::uuid[], $3::uuid[]) AS m(tenant_id, device_id, asset_id)`;
  const params = [devices.map((d) => d.tenantId), devices.map((d) => d.id), devices.map((d) => d.assetId)];
  const range = [new Date(FROM), new Date(TO)];
  // Nothing may analyse the loaded tables while the test runs (chunks take their
  // hypertable's setting; a continuous aggregate's rows live in its materialization).
  const tables =
    db.mode === 'timescaledb'
      ? [
          ...BIG_TABLES.filter((table) => !/^positions_/.test(table)),
          ...(
            await db.pool.query<{ name: string }>(
              `SELECT format('%I.%I', materialization_hypertable_schema, materialization_hypertable_name) AS name
                 FROM timescaledb_information.continuous_aggregates`,
            )
          ).rows.map((row) => row.name),
        ]
      : BIG_TABLES;
  // A partitioned table (PostgreSQL mode's silver and bronze) has no storage of its own:
  // the setting goes on each of its partitions.
  const { rows: leaves } = await db.pool.query<{ name: string }>(
    `SELECT t.relid::regclass::text AS name
       FROM unnest($1::text[]) AS listed(name), pg_partition_tree(listed.name::regclass) AS t
      WHERE t.isleaf`,
    [tables],
  );
  for (const { name } of leaves) await db.pool.query(`ALTER TABLE ${name} SET (autovacuum_enabled = off)`);
  // A GPS fix every minute of every device.
  await db.pool.query(
    `INSERT INTO telemetry_readings (tenant_id, device_id, asset_id, type, ts, received_at, latitude, longitude, gps_valid, fix)
     SELECT m.tenant_id, m.device_id, m.asset_id, 'gps', ts, ts + interval '2 seconds',
            51.9 + 0.01 * sin(extract(epoch FROM ts) / 3600), 4.0 + 0.01 * cos(extract(epoch FROM ts) / 3600), true, true
       FROM ${unnestDevices}, generate_series($4::timestamptz, $5::timestamptz - interval '1 minute', interval '1 minute') AS ts`,
    [...params, ...range],
  );
  await db.pool.query(
    `INSERT INTO telemetry_segments (tenant_id, device_id, asset_id, start_ts, end_ts, has_data, running, moving, loaded, seconds,
       distance_m, hourmeter_delta, container_cycles, imu_anomalies, imu_samples, gps_points)
     SELECT m.tenant_id, m.device_id, m.asset_id, s, s + interval '20 minutes', true, true, true, false, 1200, 100, 1200, 1, 0, 0, 20
       FROM ${unnestDevices}, generate_series($4::timestamptz, $5::timestamptz - interval '20 minutes', interval '20 minutes') AS s`,
    [...params, ...range],
  );
  for (const table of ['usage_sessions', 'identifier_sessions']) {
    const usage = table === 'usage_sessions';
    await db.pool.query(
      `INSERT INTO ${table} (id, tenant_id, device_id, asset_id, start_ts, end_ts, is_open, ${usage ? 'start_reason, ' : ''}end_reason,
         confidence, identifier, distance_m, duration_seconds)
       SELECT gen_random_uuid(), m.tenant_id, m.device_id, m.asset_id, s, s + interval '8 minutes', false,
              ${usage ? `'ignition_on', 'ignition_off'` : `'logout'`}, 1, 'OP-1', 100, 480
         FROM ${unnestDevices}, generate_series($4::timestamptz, $5::timestamptz - interval '10 minutes', interval '10 minutes') AS s`,
      [...params, ...range],
    );
  }
  await db.pool.query(
    `INSERT INTO device_counts_hourly (tenant_id, device_id, asset_id, bucket, gps_messages, gps_readings, valid_gps_fixes)
     SELECT m.tenant_id, m.device_id, m.asset_id, h, 60, 60, 60
       FROM ${unnestDevices}, generate_series($4::timestamptz, $5::timestamptz - interval '1 hour', interval '1 hour') AS h`,
    [...params, ...range],
  );
  await materializeGold(
    db,
    ['utilization_hourly', 'utilization_daily', 'positions_1min', 'positions_15min'],
    range[0]!.toISOString(),
    range[1]!.toISOString(),
  );
  await db.pool.query('SELECT pg_stat_reset()');
  const device = devices[3]!;
  return { tenantId: device.tenantId, assetId: device.assetId, deviceId: device.id };
}

interface Expectation {
  name: string;
  statement: { text: string; values: unknown[] };
  /** The big table read, and the index (of the table, or of its hypertable) that must read it. */
  reads: Array<{ table: string; index: string | RegExp }>;
}

/** Where each scanned relation and index belongs: chunks to their hypertable, materializations to their continuous aggregate. */
async function catalogOf(db: TestDatabase) {
  const { rows: indexes } = await db.pool.query<{ index: string; table: string }>(
    `SELECT indexrelid::regclass::text AS index, indrelid::regclass::text AS table FROM pg_index`,
  );
  const owner = new Map<string, string>();
  if (db.mode === 'timescaledb') {
    const { rows } = await db.pool.query<{ chunk: string; hypertable: string }>(
      `SELECT c.chunk_name AS chunk, coalesce(ca.view_name, c.hypertable_name) AS hypertable
         FROM timescaledb_information.chunks c
         LEFT JOIN timescaledb_information.continuous_aggregates ca
           ON ca.materialization_hypertable_name = c.hypertable_name
       UNION ALL
       SELECT materialization_hypertable_name, view_name FROM timescaledb_information.continuous_aggregates`,
    );
    for (const row of rows) owner.set(row.chunk, row.hypertable);
  }
  const bare = (name: string) => name.replace(/^.*\./, '');
  // PostgreSQL mode's day partitions (and their indexes) stand for their partitioned table.
  const { rows: partitions } = await db.pool.query<{ name: string; root: string }>(
    `SELECT relname AS name, pg_partition_root(oid)::regclass::text AS root FROM pg_class WHERE relispartition`,
  );
  const partitionRoot = new Map(partitions.map((row) => [row.name, bare(row.root)]));
  const tableOf = (relation: string) =>
    owner.get(bare(relation)) ?? partitionRoot.get(bare(relation)) ?? bare(relation);
  /** A table's own index names (a hypertable's, not its chunks'). */
  const indexesOf = (table: string) =>
    indexes
      .filter((row) => tableOf(row.table) === table && !/_hyper_\d+_\d+_chunk/.test(row.table))
      .map((row) => bare(row.index));
  /** The table and table-level index an index scan used (a chunk's index is named after its hypertable's, cut to 63 bytes). */
  const resolveIndex = (scanned: string) => {
    const index = partitionRoot.get(scanned) ?? scanned;
    const row = indexes.find((candidate) => bare(candidate.index) === index);
    if (!row) return null;
    const table = tableOf(row.table);
    const chunkPrefix = /^_hyper_\d+_\d+_chunk_/.exec(index)?.[0] ?? '';
    const own = indexesOf(table).find((name) => name === index || (chunkPrefix + name).slice(0, 63) === index);
    return { table, index: own ?? index };
  };
  return { tableOf, resolveIndex };
}

describe.each(availableStorageModes())(
  'per-asset statements on a database never analysed (%s)',
  (mode: StorageMode) => {
    let db: TestDatabase;
    let subject: { tenantId: string; assetId: string; deviceId: string };
    beforeAll(async () => {
      db = await createTestDatabase('plans', mode);
      subject = await load(db);
    }, 300_000);
    afterAll(async () => db?.drop());

    /** The statements as the API builds them for one asset (or its device) over the loaded days. */
    async function statements(): Promise<Expectation[]> {
      const scope: TelemetryScope = { tenantId: subject.tenantId, customerName: null };
      const from = new Date(FROM);
      const to = new Date(TO);
      // In TimescaleDB mode positions are continuous aggregates: their materialization's (asset_id, bucket) index.
      const goldKey = (relation: string) =>
        mode === 'timescaledb' && relation.startsWith('positions_') ? /_asset_id_bucket_idx$/ : `${relation}_pkey`;
      const list: Expectation[] = [];
      for (const resolution of ['1min', '15min'] as const) {
        const relation = `positions_${resolution}`;
        const statement = positionStatement(scope, { assetId: subject.assetId, from, to, resolution });
        const reads = [{ table: relation, index: goldKey(relation) }];
        list.push({ name: `positions ${resolution} page`, statement: pageSql(statement, 500, 0), reads });
        // The CSV export's COPY, as the API sends it (parameters inlined), without COPY around it.
        const copy = copyStatement({
          columns: exportColumns(statement.columns),
          query: orderedSql(statement),
          offset: 0,
        });
        list.push({
          name: `positions ${resolution} export`,
          statement: { text: copy.replace(/^.*?COPY \(/s, '').replace(/\) TO STDOUT.*$/s, ''), values: [] },
          reads,
        });
      }
      for (const bucket of ['hour', 'day'] as const) {
        const relation = bucket === 'hour' ? 'utilization_hourly' : 'utilization_daily';
        for (const forceSource of ['gold', 'live'] as const) {
          const statement = await utilizationStatement(db.pool, {
            tenantId: subject.tenantId,
            assetIds: [subject.assetId],
            from,
            to,
            bucket,
            groupBy: 'asset',
            forceSource,
          });
          list.push({
            name: `utilization per ${bucket}, ${forceSource}`,
            statement,
            reads: [
              forceSource === 'gold'
                ? { table: relation, index: goldKey(relation) }
                : { table: 'telemetry_segments', index: 'telemetry_segments_asset_idx' },
            ],
          });
        }
      }
      for (const [table, build] of [
        ['usage_sessions', usageSessionStatement],
        ['identifier_sessions', identifierSessionStatement],
      ] as const) {
        list.push({
          name: `${table} of the asset`,
          statement: pageSql(build(scope, { from, to, assetId: subject.assetId }), 100, 0),
          reads: [{ table, index: `${table}_asset_order_idx` }],
        });
      }
      list.push({
        name: 'data quality of the asset (its device’s readings and messages)',
        statement: dataQualityStatement(
          scope,
          wholeHours({ from, to }),
          subject.assetId,
          testConfig(db.url).telemetryStatus,
        ),
        reads: [
          { table: 'device_counts_hourly', index: 'device_counts_hourly_key' },
          { table: 'message_errors_hourly', index: 'message_errors_hourly_key' },
        ],
      });
      return list;
    }

    it('the loaded tables have no statistics', async () => {
      const catalog = await catalogOf(db);
      const { rows } = await db.pool.query<{ relname: string; reltuples: number }>(
        `SELECT relname, reltuples FROM pg_class WHERE relkind = 'r'`,
      );
      const loaded = rows.filter((row) => BIG_TABLES.includes(catalog.tableOf(row.relname)));
      expect(loaded.length).toBeGreaterThanOrEqual(BIG_TABLES.length);
      // -1: never analysed nor vacuumed (in TimescaleDB mode every chunk too).
      for (const row of loaded) expect(row.reltuples, row.relname).toBe(-1);
    });

    it('each per-asset statement reads its big table through the index leading with the asset or device, never by a sequential scan', async () => {
      const catalog = await catalogOf(db);
      for (const { name, statement, reads } of await statements()) {
        const scans = await explain(db, statement.text, statement.values);
        const seen = scans.map((scan) => ({
          node: scan.node,
          table: scan.relation ? catalog.tableOf(scan.relation) : null,
          index: scan.index ? catalog.resolveIndex(scan.index) : null,
        }));
        const described = JSON.stringify(seen);
        for (const scan of seen) {
          expect(scan.node === 'Seq Scan' && BIG_TABLES.includes(scan.table ?? ''), `${name}: ${described}`).toBe(
            false,
          );
        }
        for (const { table, index } of reads) {
          const used = seen.filter((scan) => scan.index?.table === table).map((scan) => scan.index!.index);
          expect(used.length, `${name} reads ${table} by an index: ${described}`).toBeGreaterThan(0);
          for (const usedIndex of used) expect(usedIndex, `${name}: ${described}`).toMatch(index);
        }
      }
    }, 120_000);
  },
);
