import { readFileSync } from 'node:fs';
import path from 'node:path';
import { dbDirectory, withTransaction, type Pool, type PoolClient, type Queryable } from '@gantry/db';
import type { ParsedMessage } from '../pipeline/steps.ts';
import { columnArrays, unnestCall, type Cell, type Column } from './encode.ts';
import { silverColumns } from './tables.ts';
import type { MessageOutcome, ReplayTarget } from './write-batch.ts';

/**
 * Traffic counters kept by ingest in the transaction of each batch, so they commit with
 * the rows they count: a crash or a redelivery never counts twice or loses a count.
 *
 * - `message_counts_hourly`: bronze messages of known devices per receive hour, message
 *   type and outcome (status and error code): messages, the readings they added, payload
 *   bytes, messages with a device time and those received over 5 minutes after it.
 * - `reading_counts_hourly`: silver readings per device-time hour and type, valid GPS
 *   fixes among them.
 *
 * Late and replayed data count in the hour of their own time, as their rows do. Each
 * batch adds aggregated rows with one `unnest` upsert per table, keys in one sorted
 * order so concurrent batches (several ingest processes, replay) never deadlock on them.
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

/** What one bronze row counts for in message_counts_hourly. */
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

const messageKeyColumns: readonly Column[] = [
  { name: 'tenant_id', kind: 'uuid' },
  { name: 'device_id', kind: 'uuid' },
  { name: 'asset_id', kind: 'uuid' },
  { name: 'bucket', kind: 'timestamptz' },
  { name: 'message_type', kind: 'text' },
  { name: 'status', kind: 'text' },
  { name: 'reason', kind: 'text' },
];
const messageSumColumns: readonly Column[] = [
  { name: 'message_count', kind: 'int8' },
  { name: 'reading_count', kind: 'int8' },
  { name: 'payload_bytes', kind: 'int8' },
  { name: 'timed_count', kind: 'int8' },
  { name: 'delayed_count', kind: 'int8' },
];
const readingKeyColumns: readonly Column[] = [
  { name: 'tenant_id', kind: 'uuid' },
  { name: 'device_id', kind: 'uuid' },
  { name: 'asset_id', kind: 'uuid' },
  { name: 'bucket', kind: 'timestamptz' },
  { name: 'type', kind: 'text' },
];
const readingSumColumns: readonly Column[] = [
  { name: 'reading_count', kind: 'int8' },
  { name: 'valid_gps_count', kind: 'int8' },
];

function upsert(table: string, keys: readonly Column[], sums: readonly Column[], offset: number): string {
  const columns = [...keys, ...sums];
  return `INSERT INTO ${table} AS c (${columns.map((column) => column.name).join(', ')})
SELECT * FROM ${unnestCall(columns, offset)}
ON CONFLICT ON CONSTRAINT ${table}_key DO UPDATE SET
  ${sums.map((column) => `${column.name} = c.${column.name} + excluded.${column.name}`).join(',\n  ')}`;
}

const messageColumns = [...messageKeyColumns, ...messageSumColumns];
const readingColumns = [...readingKeyColumns, ...readingSumColumns];

/** Both tables in one statement (one round trip per batch); messages first, as every writer does. */
const countSql = `/* ingest:countBatch */
WITH messages AS (
${upsert('message_counts_hourly', messageKeyColumns, messageSumColumns, 0)}
RETURNING 1)
${upsert('reading_counts_hourly', readingKeyColumns, readingSumColumns, messageColumns.length)}`;

/** Aggregated rows by key; the key string sorts as (device, bucket, the rest), the order every writer locks in. */
class Tally {
  readonly rows = new Map<string, { key: Cell[]; sums: number[] }>();

  add(sortKey: string, key: Cell[], sums: number[]): void {
    const row = this.rows.get(sortKey);
    if (!row) {
      this.rows.set(sortKey, { key, sums: [...sums] });
      return;
    }
    for (let index = 0; index < sums.length; index += 1) row.sums[index]! += sums[index]!;
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

function tallyMessage(tally: Tally, message: CountedMessage, sign: 1 | -1): void {
  const bucket = hourOf(message.receivedAt);
  const timed = message.deviceTs !== null;
  const delayed = timed && message.receivedAt - message.deviceTs! > DELAYED_AFTER_MS;
  tally.add(
    `${message.deviceId}|${hourKey(bucket)}|${message.messageType}|${message.status}|${message.reason}|${message.assetId ?? ''}`,
    [message.tenantId, message.deviceId, message.assetId, bucket, message.messageType, message.status, message.reason],
    [sign, sign * message.readingCount, sign * message.payloadBytes, timed ? sign : 0, delayed ? sign : 0],
  );
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

const silverIndex = (name: string) => silverColumns.findIndex((column) => column.name === name);
const SILVER = {
  tenant: silverIndex('tenant_id'),
  device: silverIndex('device_id'),
  asset: silverIndex('asset_id'),
  type: silverIndex('type'),
  ts: silverIndex('ts'),
  gpsValid: silverIndex('gps_valid'),
};

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
  const messageTally = new Tally();
  let subtracted = false;
  messages.forEach((message, index) => {
    const counted = countedMessage(message, outcomes[index]!);
    if (counted) tallyMessage(messageTally, counted, 1);
    const before = replay?.[index]?.counted;
    if (before) {
      tallyMessage(messageTally, before, -1);
      subtracted = true;
    }
  });

  const readingTally = new Tally();
  for (const row of storedReadings) {
    const ts = row[SILVER.ts] as number;
    const bucket = hourOf(ts);
    const deviceId = row[SILVER.device] as string;
    const assetId = (row[SILVER.asset] as string | null) ?? null;
    const type = row[SILVER.type] as string;
    readingTally.add(
      `${deviceId}|${hourKey(bucket)}|${type}|${assetId ?? ''}`,
      [row[SILVER.tenant], deviceId, assetId, bucket, type],
      [1, row[SILVER.gpsValid] === true ? 1 : 0],
    );
  }

  const messageRows = messageTally.sorted();
  const readingRows = readingTally.sorted();
  if (messageRows.length + readingRows.length === 0) return;
  await client.query(countSql, [
    ...columnArrays(messageColumns, messageRows),
    ...columnArrays(readingColumns, readingRows),
  ]);
  // A replayed message leaves its old outcome; the recount has no row for an empty key.
  if (subtracted) await dropEmptyMessageCounts(client, messageRows);
}

/** Deletes the batch's own keys (already locked by its upsert) that a replay brought to zero. */
async function dropEmptyMessageCounts(client: PoolClient, rows: Cell[][]): Promise<void> {
  const keyColumns = messageKeyColumns.slice(1);
  await client.query(
    `/* ingest:dropEmptyMessageCounts */
     DELETE FROM message_counts_hourly c
      USING ${unnestCall(keyColumns)} AS k(${keyColumns.map((column) => column.name).join(', ')})
      WHERE c.device_id = k.device_id AND c.bucket = k.bucket AND c.message_type = k.message_type
        AND c.status = k.status AND c.reason = k.reason AND c.asset_id IS NOT DISTINCT FROM k.asset_id
        AND c.message_count = 0`,
    columnArrays(
      keyColumns,
      rows.map((row) => row.slice(1, messageKeyColumns.length)),
    ),
  );
}

// The recount ------------------------------------------------------------------------------

export const counterTables = ['message_counts_hourly', 'reading_counts_hourly'] as const;
export type CounterTable = (typeof counterTables)[number];

const definitions = new Map<CounterTable, string>();

/** The table's figures counted from bronze or silver (db/counters/<table>.sql), `filter` on its source. */
export function recountDefinition(table: CounterTable, filter = 'TRUE'): string {
  let template = definitions.get(table);
  if (template === undefined) {
    template = readFileSync(path.join(dbDirectory, 'counters', `${table}.sql`), 'utf8')
      .split('\n')
      .filter((line) => !line.trimStart().startsWith('--'))
      .join('\n')
      .trim();
    definitions.set(table, template);
  }
  return template.replace('{{filter}}', `(${filter})`);
}

const sourceAlias: Record<CounterTable, string> = { message_counts_hourly: 'm', reading_counts_hourly: 'r' };

export interface RecountScope {
  /** Only these devices (default all). */
  deviceIds?: string[];
  /** Only the hours in [from, to): whole UTC hours (default all time). */
  from?: Date;
  to?: Date;
}

const sourceTime: Record<CounterTable, string> = { message_counts_hourly: 'received_at', reading_counts_hourly: 'ts' };

function scopeOf(scope: RecountScope): { from: Date; to: Date; params: unknown[] } {
  const from = scope.from ?? new Date(0);
  const to = scope.to ?? new Date(Date.UTC(3000, 0, 1));
  if (from.getTime() % HOUR_MS !== 0 || to.getTime() % HOUR_MS !== 0)
    throw new Error('counter scopes are whole hours: from and to on the hour');
  return { from, to, params: scope.deviceIds ? [from, to, scope.deviceIds] : [from, to] };
}

/** The counter rows in scope (`c`) and the same figures recounted from bronze or silver. */
function scopedSides(table: CounterTable, scope: RecountScope): { stored: string; recount: string } {
  const alias = sourceAlias[table];
  const time = `${alias}.${sourceTime[table]}`;
  const devices = (prefix: string) => (scope.deviceIds ? `${prefix}device_id = ANY ($3::uuid[])` : 'TRUE');
  return {
    stored: `${devices('c.')} AND c.bucket >= $1::timestamptz AND c.bucket < $2::timestamptz`,
    recount: recountDefinition(
      table,
      `${devices(`${alias}.`)} AND ${time} >= $1::timestamptz AND ${time} < $2::timestamptz`,
    ),
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
  const count = table === 'message_counts_hourly' ? 'message_count' : 'reading_count';
  const stored = `SELECT c.* FROM ${table} c WHERE ${sides.stored} AND c.${count} <> 0`;
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
    await client.query(`LOCK TABLE ${counterTables.join(', ')} IN SHARE ROW EXCLUSIVE MODE`);
    for (const table of counterTables) {
      const sides = scopedSides(table, scope);
      await client.query(`DELETE FROM ${table} c WHERE ${sides.stored}`, params);
      await client.query(`/* counters:recount */ INSERT INTO ${table} ${sides.recount}`, params);
    }
  });
}
