import { deviceMessageTypes, readingTypes, type ReadingType } from '@gantry/contracts';
import type { Queryable } from '@gantry/db';
import { SqlParams } from './sql.ts';

// Per-device message and reading counts, read from the hourly counters ingest keeps in
// the transaction of each batch (services/ingest/src/storage/counters.ts): one row of
// device_counts_hourly per device and hour, whose message columns count by receive hour
// and whose reading columns count by device-time hour. They hold every committed batch,
// open hour included, so an answer costs the number of devices × hours in the range
// (and, for data quality, of the error rows in it: message_errors_hourly), whatever the
// traffic behind them.

export const HOUR_MS = 3_600_000;

/** A range of whole hours: the counters' grain, so counts over it are exact. */
export interface HourRange {
  from: Date;
  to: Date;
}

/** [from, to) widened to whole UTC hours: the hour holding `from` and every hour up to the one holding the last instant before `to`. */
export function wholeHours(range: { from: Date; to: Date }): HourRange {
  return {
    from: new Date(Math.floor(range.from.getTime() / HOUR_MS) * HOUR_MS),
    to: new Date(Math.ceil(range.to.getTime() / HOUR_MS) * HOUR_MS),
  };
}

/**
 * The devices counted: their ids; the ids a subquery of the same statement selects
 * (`inQuery`, e.g. a CTE's); or every counter row of the tenant (`'tenant'`: no filter by
 * device, so devices of deleted assets are in it too, and the caller keeps the devices it
 * wants).
 */
type CountedDevices = string[] | { inQuery: string } | 'tenant';

export interface CountsQuery extends HourRange {
  tenantId: string;
  devices: CountedDevices;
}

/** One device's messages of one type. */
export interface MessageCountRow {
  deviceId: string;
  messageType: string;
  messageCount: number;
  /** Messages with an error: rejected, or a batch stored in part. */
  errorCount: number;
  /** Messages not rejected (a batch stored in part is both). */
  parsedCount: number;
}

export interface DeviceCounts {
  deviceId: string;
  /** Per message type the device sent in the range (receive hours). */
  messages: MessageCountRow[];
  /** Messages with a device time, and those received more than 5 minutes after it. */
  timedCount: number;
  delayedCount: number;
  /** Silver readings per reading type (device-time hours). */
  readings: Record<ReadingType, number>;
  validGpsCount: number;
}

function assertWholeHours(query: HourRange): void {
  if (query.from.getTime() % HOUR_MS !== 0 || query.to.getTime() % HOUR_MS !== 0)
    throw new Error('counter ranges are whole hours (wholeHours)');
}

const sums = (columns: string[]) => columns.map((column) => `sum(${column})::bigint AS ${column}`).join(', ');
const readingColumns = [...readingTypes.map((type) => `${type}_readings`), 'valid_gps_fixes'];
/**
 * What data quality sums from device_counts_hourly: messages per known type, timed and
 * delayed messages, readings. The `_errors`/`_rejected` columns are left to the error
 * rows (below), which count the same messages: summing 33 columns instead of 16 was
 * most of the statement's time, and those columns are 0 in almost every row.
 */
const summedColumns = [
  ...deviceMessageTypes.map((type) => `${type}_messages`),
  'timed_messages',
  'delayed_messages',
  ...readingColumns,
];
const TIMED = deviceMessageTypes.length;
const READINGS = TIMED + 2;
const VALID_GPS = READINGS + readingTypes.length;

/** The counter rows of the devices over the range, as a condition on a counter table (alias c). */
function countedRows(query: CountsQuery, params: SqlParams): string {
  const { devices } = query;
  const byDevice =
    devices === 'tenant'
      ? ''
      : Array.isArray(devices)
        ? `c.device_id = ANY (${params.add(devices, 'uuid[]')}) AND `
        : `c.device_id IN (${devices.inQuery}) AND `;
  return `${byDevice}c.tenant_id = ${params.add(query.tenantId, 'uuid')}
        AND c.bucket >= ${params.add(query.from, 'timestamptz')} AND c.bucket < ${params.add(query.to, 'timestamptz')}`;
}

/**
 * Per device with a counter row in the range, `[device id, ...sums in summedColumns
 * order]`, as one JSON array PostgreSQL builds: the driver parses one field instead of
 * 18 per device (its per-field parsing was a tenth of the answer's time in Node), and
 * JSON.parse reads the array at native speed.
 */
function counterSumsSql(query: CountsQuery, params: SqlParams): string {
  const sums = summedColumns.map((column) => `sum(c.${column})`).join(', ');
  return `(SELECT coalesce(json_agg(device_sums.row), '[]')
     FROM (SELECT json_build_array(c.device_id, ${sums}) AS row
             FROM device_counts_hourly c
            WHERE ${countedRows(query, params)}
            GROUP BY c.device_id) AS device_sums)`;
}

/**
 * Messages with an error per device and topic type over the range, and the rejected
 * among them, as a JSON array of `[device id, message type, errors, rejected]`:
 * message_errors_hourly holds every rejected or partly stored message of a known device
 * (ingest counts it there and in device_counts_hourly's `_errors`/`_rejected` columns in
 * the same step), so these are those columns' sums — and, for a topic type that is none
 * of the message types (always rejected), all its messages.
 */
function errorSumsSql(query: CountsQuery, params: SqlParams): string {
  return `(SELECT coalesce(json_agg(device_errors.row), '[]')
     FROM (SELECT json_build_array(c.device_id, c.message_type, sum(c.message_count),
                                   coalesce(sum(c.message_count) FILTER (WHERE c.status = 'rejected'), 0)) AS row
             FROM message_errors_hourly c
            WHERE ${countedRows(query, params)}
            GROUP BY c.device_id, c.message_type) AS device_errors)`;
}

/** The two JSON columns readDeviceCounts' answer is built from, for a statement that reads more beside them. */
export interface CounterColumns {
  /** counterSumsSql's array. */
  sums: Array<[string, ...number[]]>;
  /** errorSumsSql's array. */
  errors: Array<[string, string, number, number]>;
}

/** The select-list items `sums` and `errors` (CounterColumns) of the range's counters. */
export function counterColumnsSql(query: CountsQuery, params: SqlParams): string {
  assertWholeHours(query);
  return `${counterSumsSql(query, params)} AS sums, ${errorSumsSql(query, params)} AS errors`;
}

function toDeviceCounts(deviceId: string, values: number[]): DeviceCounts {
  const messages: MessageCountRow[] = [];
  deviceMessageTypes.forEach((messageType, index) => {
    const messageCount = values[index]!;
    if (messageCount > 0)
      messages.push({ deviceId, messageType, messageCount, errorCount: 0, parsedCount: messageCount });
  });
  const readings = {} as Record<ReadingType, number>;
  readingTypes.forEach((type, index) => {
    readings[type] = values[READINGS + index]!;
  });
  return {
    deviceId,
    messages,
    timedCount: values[TIMED]!,
    delayedCount: values[TIMED + 1]!,
    readings,
    validGpsCount: values[VALID_GPS]!,
  };
}

const knownTypes = new Set<string>(deviceMessageTypes);

/** Each device's counts from the two JSON columns (counterColumnsSql), one entry per device with a counter row. */
export function toDeviceCountList({ sums, errors }: CounterColumns): DeviceCounts[] {
  const byDevice = new Map(sums.map(([deviceId, ...values]) => [deviceId, toDeviceCounts(deviceId, values)]));
  for (const [deviceId, messageType, errorCount, rejectedCount] of errors) {
    const counts = byDevice.get(deviceId);
    if (!counts) continue;
    if (knownTypes.has(messageType)) {
      // Every message with an error is also one of its type's messages, so the entry exists.
      const row = counts.messages.find((entry) => entry.messageType === messageType);
      if (row) {
        row.errorCount = errorCount;
        row.parsedCount = row.messageCount - rejectedCount;
      }
    } else
      counts.messages.push({
        deviceId,
        messageType,
        messageCount: errorCount,
        errorCount,
        parsedCount: errorCount - rejectedCount,
      });
  }
  return [...byDevice.values()];
}

/** Each device's counts over the range, one entry per device with a counter row in it, in one statement. */
export async function readDeviceCounts(db: Queryable, query: CountsQuery): Promise<DeviceCounts[]> {
  if (Array.isArray(query.devices) && query.devices.length === 0) return [];
  const params = new SqlParams();
  const { rows } = await db.query<CounterColumns>(
    `/* api:deviceCounts */ SELECT ${counterColumnsSql(query, params)}`,
    params.values,
  );
  return toDeviceCountList(rows[0]!);
}

/** Silver readings per reading type over the range, all the devices together (device-time hours). */
export async function readReadingTotals(db: Queryable, query: CountsQuery): Promise<Record<ReadingType, number>> {
  assertWholeHours(query);
  const totals = Object.fromEntries(readingTypes.map((type) => [type, 0])) as Record<ReadingType, number>;
  if (Array.isArray(query.devices) && query.devices.length === 0) return totals;
  const params = new SqlParams();
  const { rows } = await db.query<Record<string, string | null>>(
    `/* api:readingTotals */
     SELECT ${sums(readingTypes.map((type) => `${type}_readings`))}
       FROM device_counts_hourly c
      WHERE ${countedRows(query, params)}`,
    params.values,
  );
  for (const type of readingTypes) totals[type] = Number(rows[0]?.[`${type}_readings`] ?? 0);
  return totals;
}
