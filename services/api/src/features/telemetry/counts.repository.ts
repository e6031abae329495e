import { deviceMessageTypes, readingTypes, type ReadingType } from '@gantry/contracts';
import type { Queryable } from '@gantry/db';

// Per-device message and reading counts, read from the hourly counters ingest keeps in
// the transaction of each batch (services/ingest/src/storage/counters.ts): one row of
// device_counts_hourly per device and hour, whose message columns count by receive hour
// and whose reading columns count by device-time hour. They hold every committed batch,
// open hour included, so an answer costs the number of devices × hours in the range,
// whatever the traffic behind them.

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

export interface CountsQuery extends HourRange {
  tenantId: string;
  deviceIds: string[];
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
const messageColumns = [...deviceMessageTypes, 'other'].flatMap((type) => [
  `${type}_messages`,
  `${type}_errors`,
  `${type}_rejected`,
]);
const readingColumns = [...readingTypes.map((type) => `${type}_readings`), 'valid_gps_fixes'];

/** Each device's counts over the range, one entry per device with a counter row in it. */
export async function readDeviceCounts(db: Queryable, query: CountsQuery): Promise<DeviceCounts[]> {
  assertWholeHours(query);
  if (query.deviceIds.length === 0) return [];
  const params = [query.tenantId, query.deviceIds, query.from, query.to];
  const { rows } = await db.query<Record<string, string>>(
    `/* api:deviceCounts */
     SELECT device_id, ${sums([...messageColumns, 'timed_messages', 'delayed_messages', ...readingColumns])}
       FROM device_counts_hourly
      WHERE device_id = ANY ($2::uuid[]) AND tenant_id = $1::uuid
        AND bucket >= $3::timestamptz AND bucket < $4::timestamptz
      GROUP BY device_id`,
    params,
  );
  const counts = rows.map((row): DeviceCounts => {
    const deviceId = row.device_id!;
    const messages: MessageCountRow[] = [];
    for (const type of deviceMessageTypes) {
      const messageCount = Number(row[`${type}_messages`]);
      if (messageCount === 0) continue;
      messages.push({
        deviceId,
        messageType: type,
        messageCount,
        errorCount: Number(row[`${type}_errors`]),
        parsedCount: messageCount - Number(row[`${type}_rejected`]),
      });
    }
    return {
      deviceId,
      messages,
      timedCount: Number(row.timed_messages),
      delayedCount: Number(row.delayed_messages),
      readings: Object.fromEntries(readingTypes.map((type) => [type, Number(row[`${type}_readings`])])) as Record<
        ReadingType,
        number
      >,
      validGpsCount: Number(row.valid_gps_fixes),
    };
  });

  // A topic type that is none of the message types is rejected, so its messages, by type,
  // are all in message_errors_hourly; read only for devices that sent any.
  const withOther = rows.filter((row) => Number(row.other_messages) > 0).map((row) => row.device_id!);
  if (withOther.length > 0) {
    const other = await db.query<Record<string, string>>(
      `/* api:otherTypeCounts */
       SELECT device_id, message_type, sum(message_count)::bigint AS message_count,
              coalesce(sum(message_count) FILTER (WHERE status = 'rejected'), 0)::bigint AS rejected_count
         FROM message_errors_hourly
        WHERE device_id = ANY ($2::uuid[]) AND tenant_id = $1::uuid
          AND bucket >= $3::timestamptz AND bucket < $4::timestamptz AND message_type <> ALL ($5::text[])
        GROUP BY device_id, message_type`,
      [query.tenantId, withOther, query.from, query.to, deviceMessageTypes],
    );
    const byDevice = new Map(counts.map((entry) => [entry.deviceId, entry]));
    for (const row of other.rows) {
      const messageCount = Number(row.message_count);
      byDevice.get(row.device_id!)?.messages.push({
        deviceId: row.device_id!,
        messageType: row.message_type!,
        messageCount,
        errorCount: messageCount,
        parsedCount: messageCount - Number(row.rejected_count),
      });
    }
  }
  return counts;
}

/** Silver readings per reading type over the range, all the devices together (device-time hours). */
export async function readReadingTotals(db: Queryable, query: CountsQuery): Promise<Record<ReadingType, number>> {
  assertWholeHours(query);
  const totals = Object.fromEntries(readingTypes.map((type) => [type, 0])) as Record<ReadingType, number>;
  if (query.deviceIds.length === 0) return totals;
  const { rows } = await db.query<Record<string, string | null>>(
    `/* api:readingTotals */
     SELECT ${sums(readingTypes.map((type) => `${type}_readings`))}
       FROM device_counts_hourly
      WHERE device_id = ANY ($2::uuid[]) AND tenant_id = $1::uuid
        AND bucket >= $3::timestamptz AND bucket < $4::timestamptz`,
    [query.tenantId, query.deviceIds, query.from, query.to],
  );
  for (const type of readingTypes) totals[type] = Number(rows[0]?.[`${type}_readings`] ?? 0);
  return totals;
}
