import type { Queryable } from '@gantry/db';

// Per-device message and reading counts, read from the hourly counters ingest keeps in
// the transaction of each batch (message_counts_hourly by receive hour,
// reading_counts_hourly by device-time hour; services/ingest/src/storage/counters.ts).
// They hold every committed batch, open hour included, so an answer costs the number of
// counter rows in the range (devices × hours × types), whatever the traffic behind them.

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

export interface MessageCountRow {
  deviceId: string;
  messageType: string;
  messageCount: number;
  /** Messages with an error: rejected, or a batch stored in part. */
  errorCount: number;
  /** Messages not rejected (a batch stored in part is both). */
  parsedCount: number;
  timedCount: number;
  delayedCount: number;
}

export interface ReadingCountRow {
  deviceId: string;
  type: string;
  readingCount: number;
  validGpsCount: number;
}

function assertWholeHours(query: HourRange): void {
  if (query.from.getTime() % HOUR_MS !== 0 || query.to.getTime() % HOUR_MS !== 0)
    throw new Error('counter ranges are whole hours (wholeHours)');
}

export async function readMessageCounts(db: Queryable, query: CountsQuery): Promise<MessageCountRow[]> {
  assertWholeHours(query);
  if (query.deviceIds.length === 0) return [];
  const { rows } = await db.query<Record<string, string>>(
    `/* api:messageCounts */
     SELECT device_id, message_type,
            sum(message_count)::bigint AS message_count,
            coalesce(sum(message_count) FILTER (WHERE status IN ('rejected', 'partial')), 0)::bigint AS error_count,
            coalesce(sum(message_count) FILTER (WHERE status <> 'rejected'), 0)::bigint AS parsed_count,
            sum(timed_count)::bigint AS timed_count,
            sum(delayed_count)::bigint AS delayed_count
       FROM message_counts_hourly
      WHERE device_id = ANY ($2::uuid[]) AND tenant_id = $1::uuid
        AND bucket >= $3::timestamptz AND bucket < $4::timestamptz
      GROUP BY device_id, message_type`,
    [query.tenantId, query.deviceIds, query.from, query.to],
  );
  return rows.map((row) => ({
    deviceId: row.device_id!,
    messageType: row.message_type!,
    messageCount: Number(row.message_count),
    errorCount: Number(row.error_count),
    parsedCount: Number(row.parsed_count),
    timedCount: Number(row.timed_count),
    delayedCount: Number(row.delayed_count),
  }));
}

export async function readReadingCounts(db: Queryable, query: CountsQuery): Promise<ReadingCountRow[]> {
  assertWholeHours(query);
  if (query.deviceIds.length === 0) return [];
  const { rows } = await db.query<Record<string, string>>(
    `/* api:readingCounts */
     SELECT device_id, type, sum(reading_count)::bigint AS reading_count, sum(valid_gps_count)::bigint AS valid_gps_count
       FROM reading_counts_hourly
      WHERE device_id = ANY ($2::uuid[]) AND tenant_id = $1::uuid
        AND bucket >= $3::timestamptz AND bucket < $4::timestamptz
      GROUP BY device_id, type`,
    [query.tenantId, query.deviceIds, query.from, query.to],
  );
  return rows.map((row) => ({
    deviceId: row.device_id!,
    type: row.type!,
    readingCount: Number(row.reading_count),
    validGpsCount: Number(row.valid_gps_count),
  }));
}
