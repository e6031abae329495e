import { readFileSync } from 'node:fs';
import path from 'node:path';
import { deviceMessageTypes, readingTypes } from '@gantry/contracts';
import {
  addToCounterWindow,
  counterWindowColumns,
  dbDirectory,
  holdCounterWindow,
  inCounterWindow,
  lockCounterWindow,
  rebuildCounterWindow,
  withTransaction,
  type CounterWindowDelta,
  type Pool,
  type PoolClient,
  type Queryable,
} from '@gantry/db';
import type { ParsedMessage } from '../pipeline/steps.ts';
import { columnArrays, unnestCall, type Cell, type Column } from './encode.ts';
import { silverCell } from './tables.ts';
import type { MessageOutcome, ReplayTarget } from './write-batch.ts';

/**
 * Traffic counters kept by ingest in the transaction of each batch, so they commit with
 * the rows they count: a crash or a redelivery never counts twice or loses a count.
 *
 * - `device_counts_hourly`: one row per device, hour and asset. Its message columns count
 *   bronze messages of known devices by receive hour — per message type the messages,
 *   those with an error (rejected or partly stored) and those rejected; for all types the
 *   duplicates, the readings the messages added, payload bytes, messages with a device
 *   time and those received over 5 minutes after it. Its reading columns count silver
 *   readings by device-time hour, per reading type, and the valid GPS fixes among them.
 * - `message_errors_hourly`: rejected and partly stored messages per receive hour, message
 *   type, status and error code; only such messages touch it.
 *
 * Late and replayed data count in the hour of their own time, as their rows do. A batch
 * of N devices upserts about N rows (one per device, more when its messages or readings
 * span hours), one `unnest` upsert per table in one statement, keys in one sorted order
 * so concurrent batches (several ingest processes, replay) never deadlock on them.
 * db/counters/*.sql define the same figures from bronze and silver: the recount the
 * tables must always equal (counterDrift).
 */

const HOUR_MS = 3_600_000;
/** A message is delayed when received more than this after its device time (data quality's `delayed`). */
export const DELAYED_AFTER_MS = 5 * 60_000;

/**
 * For `pnpm bench:data-quality` alone, which measures what counting costs ingest by
 * writing the same batches with and without it. Off, the counters drift from bronze
 * and silver; no configuration reaches it.
 */
export const countingForBenchmarks = { enabled: true };

/** What one bronze row counts for in the counters. */
export interface CountedMessage {
  tenantId: string;
  deviceId: string;
  assetId: string | null;
  receivedAt: number;
  messageType: string;
  status: string;
  /** Error code of a rejected or partly stored message; '' for none. */
  reason: string;
  readingCount: number;
  payloadBytes: number;
  deviceTs: number | null;
}

/** Message columns per topic type; a type that is none of them (always rejected) counts as `other`. */
const messageGroups = [...deviceMessageTypes, 'other'] as const;

/** The counting columns of device_counts_hourly, in table order (db/migrations/0140, 0141: integer but payload_bytes). */
export const deviceCounterColumns: readonly string[] = [
  ...messageGroups.flatMap((type) => [`${type}_messages`, `${type}_errors`, `${type}_rejected`]),
  'duplicates',
  'readings_added',
  'payload_bytes',
  'timed_messages',
  'delayed_messages',
  ...readingTypes.map((type) => `${type}_readings`),
  'valid_gps_fixes',
];
const columnIndex = (name: string) => deviceCounterColumns.indexOf(name);
/** Per message type, the index of its `_messages` column; `_errors` and `_rejected` follow it. */
const messageColumn = new Map<string, number>(messageGroups.map((type) => [type, columnIndex(`${type}_messages`)]));
const otherMessageColumn = columnIndex('other_messages');
const readingColumn = new Map<string, number>(readingTypes.map((type) => [type, columnIndex(`${type}_readings`)]));
const COLUMN = {
  duplicates: columnIndex('duplicates'),
  readingsAdded: columnIndex('readings_added'),
  payloadBytes: columnIndex('payload_bytes'),
  timed: columnIndex('timed_messages'),
  delayed: columnIndex('delayed_messages'),
  validGps: columnIndex('valid_gps_fixes'),
};

const deviceKeyColumns: readonly Column[] = [
  { name: 'tenant_id', kind: 'uuid' },
  { name: 'device_id', kind: 'uuid' },
  { name: 'asset_id', kind: 'uuid' },
  { name: 'bucket', kind: 'timestamptz' },
];
const deviceColumns: readonly Column[] = [
  ...deviceKeyColumns,
  ...deviceCounterColumns.map((name): Column => ({ name, kind: name === 'payload_bytes' ? 'int8' : 'int4' })),
];
const errorKeyColumns: readonly Column[] = [
  ...deviceKeyColumns,
  { name: 'message_type', kind: 'text' },
  { name: 'status', kind: 'text' },
  { name: 'reason', kind: 'text' },
];
const errorColumns: readonly Column[] = [...errorKeyColumns, { name: 'message_count', kind: 'int8' }];

function upsert(table: string, columns: readonly Column[], keyCount: number, offset: number): string {
  const sums = columns.slice(keyCount);
  return `INSERT INTO ${table} AS c (${columns.map((column) => column.name).join(', ')})
SELECT * FROM ${unnestCall(columns, offset)}
ON CONFLICT ON CONSTRAINT ${table}_key DO UPDATE SET
  ${sums.map((column) => `${column.name} = c.${column.name} + excluded.${column.name}`).join(',\n  ')}`;
}

/** The device rows alone: the statement of almost every batch. */
const countSql = `/* ingest:countBatch */
${upsert('device_counts_hourly', deviceColumns, deviceKeyColumns.length, 0)}`;
/**
 * With error rows too, in one statement (one round trip). PostgreSQL runs a data-modifying
 * CTE that nothing reads after the main statement: device rows are locked first, then
 * error rows, by every writer (and recountCounters locks the tables in that order).
 */
const countWithErrorsSql = `/* ingest:countBatch */
WITH errors AS (
${upsert('message_errors_hourly', errorColumns, errorKeyColumns.length, deviceColumns.length)}
RETURNING 1)
${upsert('device_counts_hourly', deviceColumns, deviceKeyColumns.length, 0)}`;

/** Aggregated rows by key; the key string sorts as (device, bucket, the rest), the order every writer locks in. */
class Tally {
  readonly rows = new Map<string, { key: Cell[]; sums: number[] }>();
  /** Per device, the row it added to last (deviceSums). */
  readonly lastOf = new Map<string, { bucket: number; assetId: string | null; sums: number[] }>();

  constructor(private readonly width: number) {}

  /** The sums of a key's row, to add to in place. */
  sums(sortKey: string, key: () => Cell[]): number[] {
    let row = this.rows.get(sortKey);
    if (!row) {
      row = { key: key(), sums: new Array<number>(this.width).fill(0) };
      this.rows.set(sortKey, row);
    }
    return row.sums;
  }

  /** Rows in lock order, without those that change nothing. */
  sorted(): Cell[][] {
    return [...this.rows.entries()]
      .filter(([, row]) => row.sums.some((value) => value !== 0))
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([, row]) => [...row.key, ...row.sums]);
  }
}

const hourOf = (ms: number) => Math.floor(ms / HOUR_MS) * HOUR_MS;
// Fixed-width fields first (uuid, zero-padded hour), so the string order is the key order.
const hourKey = (ms: number) => String(ms / HOUR_MS).padStart(9, '0');

/**
 * The device row's sums, through the device's last row: a batch's messages and readings of
 * one device almost always fall in the same hour and asset, so most calls find their row
 * without building its key (this ran once per message and once per reading).
 */
function deviceSums(tally: Tally, tenantId: string, deviceId: string, assetId: string | null, bucket: number) {
  const last = tally.lastOf.get(deviceId);
  if (last !== undefined && last.bucket === bucket && last.assetId === assetId) return last.sums;
  const key = `${deviceId}|${hourKey(bucket)}|${assetId ?? ''}`;
  const sums = tally.sums(key, () => [tenantId, deviceId, assetId, bucket]);
  tally.lastOf.set(deviceId, { bucket, assetId, sums });
  return sums;
}

function tallyMessage(devices: Tally, errors: Tally, message: CountedMessage, sign: 1 | -1): void {
  const bucket = hourOf(message.receivedAt);
  const sums = deviceSums(devices, message.tenantId, message.deviceId, message.assetId, bucket);
  const column = messageColumn.get(message.messageType) ?? otherMessageColumn;
  sums[column]! += sign;
  if (message.status === 'rejected' || message.status === 'partial') {
    sums[column + 1]! += sign;
    if (message.status === 'rejected') sums[column + 2]! += sign;
    const key = `${message.deviceId}|${hourKey(bucket)}|${message.messageType}|${message.status}|${message.reason}|${message.assetId ?? ''}`;
    errors.sums(key, () => [
      message.tenantId,
      message.deviceId,
      message.assetId,
      bucket,
      message.messageType,
      message.status,
      message.reason,
    ])[0]! += sign;
  } else if (message.status === 'duplicate') sums[COLUMN.duplicates]! += sign;
  sums[COLUMN.readingsAdded]! += sign * message.readingCount;
  sums[COLUMN.payloadBytes]! += sign * message.payloadBytes;
  if (message.deviceTs !== null) {
    sums[COLUMN.timed]! += sign;
    if (message.receivedAt - message.deviceTs > DELAYED_AFTER_MS) sums[COLUMN.delayed]! += sign;
  }
}

/** The bronze row a message became, as counted; null when it is not counted (no known device or type). */
export function countedMessage(message: ParsedMessage, outcome: MessageOutcome): CountedMessage | null {
  if (!outcome.device || message.messageType === null) return null;
  return {
    tenantId: outcome.device.tenantId,
    deviceId: outcome.device.id,
    assetId: outcome.device.assetId,
    receivedAt: message.raw.receivedAt,
    messageType: message.messageType,
    status: outcome.status,
    reason: outcome.reason ?? '',
    readingCount: outcome.storedReadings,
    payloadBytes: message.raw.payload.length,
    deviceTs: message.deviceTs,
  };
}

/**
 * Adds one batch to the counters, inside the batch's transaction and after its rows were
 * written: every message by the outcome its bronze row records, and the silver rows the
 * INSERT … ON CONFLICT actually stored (duplicates are not among them). For a replay,
 * what each bronze row counted for before is taken away in the same statement.
 */
export async function countBatch(
  client: PoolClient,
  messages: readonly ParsedMessage[],
  outcomes: readonly MessageOutcome[],
  storedReadings: readonly Cell[][],
  replay?: readonly ReplayTarget[],
): Promise<void> {
  if (!countingForBenchmarks.enabled) return;
  const devices = new Tally(deviceCounterColumns.length);
  const errors = new Tally(1);
  let subtracted = false;
  messages.forEach((message, index) => {
    const counted = countedMessage(message, outcomes[index]!);
    if (counted) tallyMessage(devices, errors, counted, 1);
    const before = replay?.[index]?.counted;
    if (before) {
      tallyMessage(devices, errors, before, -1);
      subtracted = true;
    }
  });

  for (const row of storedReadings) {
    const type = row[silverCell.type] as string;
    const column = readingColumn.get(type);
    // Silver holds only the reading types of the contract; the table has a column for each.
    if (column === undefined) throw new Error(`no counter column for reading type ${type}`);
    const sums = deviceSums(
      devices,
      row[silverCell.tenant] as string,
      row[silverCell.device] as string,
      (row[silverCell.asset] as string | null) ?? null,
      hourOf(row[silverCell.ts] as number),
    );
    sums[column]! += 1;
    if (row[silverCell.gpsValid] === true) sums[COLUMN.validGps]! += 1;
  }

  const deviceRows = devices.sorted();
  const errorRows = errors.sorted();
  if (deviceRows.length + errorRows.length === 0) return;
  // Before any counter row is written: the window's lock, then its share of the batch.
  const windowStart = await lockCounterWindow(client);
  await addToCounterWindow(client, windowShare(deviceRows, windowStart));
  await client.query(
    errorRows.length === 0 ? countSql : countWithErrorsSql,
    errorRows.length === 0
      ? columnArrays(deviceColumns, deviceRows)
      : [...columnArrays(deviceColumns, deviceRows), ...columnArrays(errorColumns, errorRows)],
  );
  // A replayed message leaves its old outcome; the recount has no row for an empty key.
  if (subtracted) await dropEmptyCounts(client, deviceRows, errorRows);
}

/** Where each of the window's columns sits in a device row (after its four key cells). */
const windowCells = counterWindowColumns.map((name) => deviceKeyColumns.length + columnIndex(name));

/**
 * Per device, what the batch adds to the counter window: the rows of hours inside it (a
 * late reading, a batch received just before the hour turned). Live traffic counts in
 * the open hour, outside the window, so most batches add nothing.
 */
function windowShare(deviceRows: Cell[][], windowStart: number | null): CounterWindowDelta[] {
  const byDevice = new Map<string, CounterWindowDelta>();
  for (const row of deviceRows) {
    if (!inCounterWindow(windowStart, row[3] as number)) continue;
    const deviceId = row[1] as string;
    let delta = byDevice.get(deviceId);
    if (!delta) {
      delta = { tenantId: row[0] as string, deviceId, sums: windowCells.map(() => 0) };
      byDevice.set(deviceId, delta);
    }
    windowCells.forEach((cell, index) => {
      delta.sums[index]! += row[cell] as number;
    });
  }
  return [...byDevice.values()];
}

const allZero = deviceCounterColumns.map((name) => `c.${name} = 0`).join(' AND ');

/** Deletes the batch's own keys (already locked by its upsert) that a replay brought to zero. */
async function dropEmptyCounts(client: PoolClient, deviceRows: Cell[][], errorRows: Cell[][]): Promise<void> {
  const deviceKeys = deviceKeyColumns.slice(1);
  await client.query(
    `/* ingest:dropEmptyCounts */
     DELETE FROM device_counts_hourly c
      USING ${unnestCall(deviceKeys)} AS k(${deviceKeys.map((column) => column.name).join(', ')})
      WHERE c.device_id = k.device_id AND c.bucket = k.bucket AND c.asset_id IS NOT DISTINCT FROM k.asset_id
        AND ${allZero}`,
    columnArrays(
      deviceKeys,
      deviceRows.map((row) => row.slice(1, deviceKeyColumns.length)),
    ),
  );
  if (errorRows.length === 0) return;
  const errorKeys = errorKeyColumns.slice(1);
  await client.query(
    `/* ingest:dropEmptyCounts */
     DELETE FROM message_errors_hourly c
      USING ${unnestCall(errorKeys)} AS k(${errorKeys.map((column) => column.name).join(', ')})
      WHERE c.device_id = k.device_id AND c.bucket = k.bucket AND c.message_type = k.message_type
        AND c.status = k.status AND c.reason = k.reason AND c.asset_id IS NOT DISTINCT FROM k.asset_id
        AND c.message_count = 0`,
    columnArrays(
      errorKeys,
      errorRows.map((row) => row.slice(1, errorKeyColumns.length)),
    ),
  );
}

// The recount ------------------------------------------------------------------------------

/** In lock order: every writer upserts device rows and error rows in one statement, recountCounters locks these in this order. */
export const counterTables = ['device_counts_hourly', 'message_errors_hourly'] as const;
export type CounterTable = (typeof counterTables)[number];

const tableColumns: Record<CounterTable, readonly Column[]> = {
  device_counts_hourly: deviceColumns,
  message_errors_hourly: errorColumns,
};

/** A condition on a source of the recount: bronze (`m`, its time `received_at`) or silver (`r`, `ts`). */
export type SourceFilter = (alias: 'm' | 'r', time: 'received_at' | 'ts') => string;

const definitions = new Map<CounterTable, string>();

/** The table's figures counted from bronze and silver (db/counters/<table>.sql), `filter` on each source. */
export function recountDefinition(table: CounterTable, filter: SourceFilter = () => 'TRUE'): string {
  let template = definitions.get(table);
  if (template === undefined) {
    template = readFileSync(path.join(dbDirectory, 'counters', `${table}.sql`), 'utf8')
      .split('\n')
      .filter((line) => !line.trimStart().startsWith('--'))
      .join('\n')
      .trim();
    definitions.set(table, template);
  }
  return template.replace('{{m}}', `(${filter('m', 'received_at')})`).replace('{{r}}', `(${filter('r', 'ts')})`);
}

export interface RecountScope {
  /** Only these devices (default all). */
  deviceIds?: string[];
  /** Only the hours in [from, to): whole UTC hours (default all time). */
  from?: Date;
  to?: Date;
}

function scopeOf(scope: RecountScope): { from: Date; to: Date; params: unknown[] } {
  const from = scope.from ?? new Date(0);
  const to = scope.to ?? new Date(Date.UTC(3000, 0, 1));
  if (from.getTime() % HOUR_MS !== 0 || to.getTime() % HOUR_MS !== 0)
    throw new Error('counter scopes are whole hours: from and to on the hour');
  return { from, to, params: scope.deviceIds ? [from, to, scope.deviceIds] : [from, to] };
}

/** The counter rows in scope (`c`) and the same figures recounted from bronze and silver, column by column. */
function scopedSides(table: CounterTable, scope: RecountScope): { stored: string; recount: string; columns: string } {
  const devices = (prefix: string) => (scope.deviceIds ? `${prefix}device_id = ANY ($3::uuid[])` : 'TRUE');
  const names = tableColumns[table].map((column) => column.name);
  return {
    stored: `${devices('c.')} AND c.bucket >= $1::timestamptz AND c.bucket < $2::timestamptz`,
    recount: `SELECT ${names.join(', ')} FROM (${recountDefinition(
      table,
      (alias, time) =>
        `${devices(`${alias}.`)} AND ${alias}.${time} >= $1::timestamptz AND ${alias}.${time} < $2::timestamptz`,
    )}) recounted`,
    columns: names.join(', '),
  };
}

/**
 * Rows where a table differs from its recount (each row of the difference once, either
 * side), within the scope. A consistency check for tests, drills and benchmarks; it
 * reads every counted row in scope, so it costs what the data costs.
 */
export async function counterDrift(db: Queryable, table: CounterTable, scope: RecountScope = {}): Promise<number> {
  const { params } = scopeOf(scope);
  const sides = scopedSides(table, scope);
  // Ingest upserts by exact key; a row brought to zero by a replay counts as no row.
  const nonEmpty = table === 'device_counts_hourly' ? `NOT (${allZero})` : 'c.message_count <> 0';
  const stored = `SELECT ${sides.columns} FROM ${table} c WHERE ${sides.stored} AND ${nonEmpty}`;
  const { rows } = await db.query<{ n: string }>(
    `/* counters:drift */
     SELECT (SELECT count(*) FROM ((${stored}) EXCEPT ALL (${sides.recount})) a)
          + (SELECT count(*) FROM ((${sides.recount}) EXCEPT ALL (${stored})) b) AS n`,
    params,
  );
  return Number(rows[0]?.n ?? 0);
}

/**
 * Replaces the counters in scope with their recount: for data written without ingest
 * (test fixtures, a restore, a benchmark's bulk load) or a repair. The tables are locked
 * against ingest's upserts for the duration, so batches committing meanwhile are
 * counted exactly once: before the recount reads, or added after it.
 */
export async function recountCounters(pool: Pool, scope: RecountScope = {}): Promise<void> {
  const { params } = scopeOf(scope);
  await withTransaction(pool, async (client) => {
    // The window's lock first, as ingest takes it before its counter rows.
    await holdCounterWindow(client);
    await client.query(`LOCK TABLE ${counterTables.join(', ')} IN SHARE ROW EXCLUSIVE MODE`);
    for (const table of counterTables) {
      const sides = scopedSides(table, scope);
      await client.query(`DELETE FROM ${table} c WHERE ${sides.stored}`, params);
      await client.query(`/* counters:recount */ INSERT INTO ${table} (${sides.columns}) ${sides.recount}`, params);
    }
    await rebuildCounterWindow(client);
  });
}
