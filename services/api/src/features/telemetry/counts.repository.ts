import { deviceMessageTypes, readingTypes, type ReadingType } from '@gantry/contracts';
import type { Queryable } from '@gantry/db';
import { assetScopeCondition, SqlParams, type TelemetryScope } from './sql.ts';

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

/** The devices counted: their ids, or every device of the assets a key sees (optionally of one asset). */
type CountedDevices = string[] | { scope: TelemetryScope; assetId?: string | undefined };

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
  const devices = Array.isArray(query.devices)
    ? `c.device_id = ANY (${params.add(query.devices, 'uuid[]')})`
    : `c.device_id IN (SELECT d.id FROM devices d JOIN assets a ON a.id = d.asset_id
                        WHERE ${assetScopeCondition(params, query.devices.scope)}${
                          query.devices.assetId ? ` AND a.id = ${params.add(query.devices.assetId, 'uuid')}` : ''
                        })`;
  return `${devices} AND c.tenant_id = ${params.add(query.tenantId, 'uuid')}
        AND c.bucket >= ${params.add(query.from, 'timestamptz')} AND c.bucket < ${params.add(query.to, 'timestamptz')}`;
}

/** Per device with a counter row in the range, its sums in summedColumns order. */
async function sumCounters(db: Queryable, query: CountsQuery): Promise<Map<string, number[]>> {
  const params = new SqlParams();
  // Rows as arrays: no object with a property per column to build and look up.
  const { rows } = await db.query<[string, ...number[]]>({
    text: `/* api:deviceCounts */
     SELECT c.device_id, ${sums(summedColumns)}
       FROM device_counts_hourly c
      WHERE ${countedRows(query, params)}
      GROUP BY c.device_id`,
    values: params.values,
    rowMode: 'array',
  });
  return new Map(rows.map(([deviceId, ...values]) => [deviceId, values]));
}

/**
 * Messages with an error per device and topic type over the range, and the rejected
 * among them: message_errors_hourly holds every rejected or partly stored message of a
 * known device (ingest counts it there and in device_counts_hourly's `_errors`/`_rejected`
 * columns in the same step), so these are those columns' sums — and, for a topic type
 * that is none of the message types (always rejected), all its messages.
 */
async function sumErrors(db: Queryable, query: CountsQuery) {
  const params = new SqlParams();
  const { rows } = await db.query<[string, string, number, number]>({
    text: `/* api:deviceErrorCounts */
     SELECT c.device_id, c.message_type, sum(c.message_count)::bigint,
            coalesce(sum(c.message_count) FILTER (WHERE c.status = 'rejected'), 0)::bigint
       FROM message_errors_hourly c
      WHERE ${countedRows(query, params)}
      GROUP BY c.device_id, c.message_type`,
    values: params.values,
    rowMode: 'array',
  });
  return rows.map(([deviceId, messageType, errorCount, rejectedCount]) => ({
    deviceId,
    messageType,
    errorCount,
    rejectedCount,
  }));
}

/**
 * [from, to) cut into `parts` consecutive ranges of whole hours, as even as the hours
 * allow (never an empty one), so each part reads about as many counter rows.
 */
function splitHours(range: HourRange, parts: number): HourRange[] {
  const hours = (range.to.getTime() - range.from.getTime()) / HOUR_MS;
  const count = Math.max(1, Math.min(parts, hours));
  const at = (index: number) => new Date(range.from.getTime() + Math.round((index * hours) / count) * HOUR_MS);
  return Array.from({ length: count }, (_, index) => ({ from: at(index), to: at(index + 1) }));
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

/**
 * Each device's counts over the range, one entry per device with a counter row in it.
 * Given several connections (each in the same snapshot: inSharedSnapshot), the range is
 * cut into as many parts of whole hours, summed at the same time, one part per
 * connection, and the parts added up: sums, so the answer is the one a single statement
 * over the whole range gives.
 */
export async function readDeviceCounts(db: Queryable | Queryable[], query: CountsQuery): Promise<DeviceCounts[]> {
  assertWholeHours(query);
  if (Array.isArray(query.devices) && query.devices.length === 0) return [];
  const connections = Array.isArray(db) ? db : [db];
  // One statement at a time per connection; the error rows follow the first part.
  const parts = await Promise.all(
    splitHours(query, connections.length).map(async (hours, index) => {
      const sums = await sumCounters(connections[index]!, { ...query, ...hours });
      return { sums, errors: index === 0 ? await sumErrors(connections[index]!, query) : [] };
    }),
  );
  const errors = parts[0]!.errors;
  const total = parts[0]!.sums;
  for (const part of parts.slice(1))
    for (const [deviceId, values] of part.sums) {
      const sum = total.get(deviceId);
      if (!sum) total.set(deviceId, values);
      else for (let index = 0; index < values.length; index += 1) sum[index]! += values[index]!;
    }
  const byDevice = new Map([...total].map(([deviceId, values]) => [deviceId, toDeviceCounts(deviceId, values)]));
  for (const { deviceId, messageType, errorCount, rejectedCount } of errors) {
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
