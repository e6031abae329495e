import type { Config } from '@gantry/config';
import type { Pool } from '@gantry/db';
import { OVERSIZED_PAYLOAD_BYTES, timeBounds } from './ingest.ts';
import { parseMessage } from './pipeline/steps.ts';
import type { CountedMessage } from './storage/counters.ts';
import { inTransaction } from './storage/transaction.ts';
import { writeBatch, type BronzeStatus, type ReplayTarget } from './storage/write-batch.ts';

export interface ReplayOptions {
  /** Receive-time range [from, to). */
  from: Date;
  to: Date;
  /** Only messages whose topic named this device id. */
  deviceKey?: string | undefined;
  /** Also re-parse accepted and duplicate messages (only missing readings are added). */
  all?: boolean;
  chunkSize?: number;
  onProgress?(summary: ReplaySummary): void;
}

export interface ReplaySummary {
  messages: number;
  /** Bronze status after the replay, per status. */
  statuses: Record<BronzeStatus, number>;
  /** Messages whose status changed. */
  changed: number;
  readingsAdded: number;
}

interface BronzeRow {
  id: number;
  received_at: Date;
  topic: string;
  payload: Buffer;
  status: BronzeStatus;
  reading_count: number;
  tenant_id: string | null;
  device_id: string | null;
  asset_id: string | null;
  message_type: string | null;
  error: string | null;
  device_ts: Date | null;
  payload_size: number;
}

/** What the row counts for in message_counts_hourly before the replay (db/counters/message_counts_hourly.sql). */
function countedBefore(row: BronzeRow): CountedMessage | null {
  if (row.device_id === null || row.tenant_id === null || row.message_type === null) return null;
  return {
    tenantId: row.tenant_id,
    deviceId: row.device_id,
    assetId: row.asset_id,
    receivedAt: row.received_at.getTime(),
    messageType: row.message_type,
    status: row.status,
    reason: row.error ?? '',
    readingCount: row.reading_count,
    payloadBytes: row.payload_size,
    deviceTs: row.device_ts?.getTime() ?? null,
  };
}

/**
 * Re-runs the parse steps over bronze messages (after a parser fix, or once an unknown
 * device is registered) and writes what now parses into silver, device_state and the
 * derivation queue; each bronze row gets its new status in place. Idempotent: silver
 * keeps one reading per (device, type, ts), so running it twice adds nothing.
 */
export async function replayBronze(
  deps: { pool: Pool; config: Config },
  options: ReplayOptions,
): Promise<ReplaySummary> {
  const { pool, config } = deps;
  const chunkSize = options.chunkSize ?? 2000;
  const summary: ReplaySummary = {
    messages: 0,
    statuses: { accepted: 0, rejected: 0, duplicate: 0, partial: 0 },
    changed: 0,
    readingsAdded: 0,
  };
  const statuses = options.all ? ['accepted', 'duplicate', 'partial', 'rejected'] : ['partial', 'rejected'];
  let cursor: { receivedAt: Date; id: number } = { receivedAt: options.from, id: -1 };

  for (;;) {
    // Rows are read and locked in the transaction that rewrites them, so the counters lose
    // exactly what each row counted for, even with another replay running over them.
    const chunk = await inTransaction(pool, config.ingest.statementTimeoutMs * 4, async (client) => {
      const { rows } = await client.query<BronzeRow>(
        `/* ingest:replaySelect */
         SELECT id, received_at, topic, payload, status, reading_count,
                tenant_id, device_id, asset_id, message_type, error, device_ts, payload_size
         FROM device_messages
         WHERE received_at >= $1 AND received_at < $2
           AND (received_at, id) > ($3::timestamptz, $4::bigint)
           AND ($5::text IS NULL OR device_key = $5)
           AND status = ANY($6::text[])
           -- an oversized payload is kept truncated; there is nothing to re-parse
           AND payload_size = octet_length(payload)
         ORDER BY received_at, id
         LIMIT $7
         FOR UPDATE`,
        [options.from, options.to, cursor.receivedAt, cursor.id, options.deviceKey ?? null, statuses, chunkSize],
      );
      if (rows.length === 0) return null;
      const now = Date.now();
      const messages = rows.map((row) =>
        parseMessage(
          { topic: row.topic, payload: row.payload, receivedAt: row.received_at.getTime() },
          { maxPayloadBytes: config.ingest.maxPayloadBytes, bounds: timeBounds(config, now) },
        ),
      );
      const targets: ReplayTarget[] = rows.map((row) => ({
        id: row.id,
        receivedAt: row.received_at.getTime(),
        status: row.status,
        readingCount: row.reading_count,
        counted: countedBefore(row),
      }));
      const result = await writeBatch(client, messages, {
        method: 'unnest',
        oversizedPayloadBytes: OVERSIZED_PAYLOAD_BYTES,
        replay: targets,
      });
      return { rows, result };
    });
    if (chunk === null) break;
    const { rows, result } = chunk;
    result.outcomes.forEach((outcome, index) => {
      summary.statuses[outcome.status] += 1;
      if (outcome.status !== rows[index]!.status) summary.changed += 1;
    });
    summary.messages += rows.length;
    summary.readingsAdded += result.storedReadings;
    options.onProgress?.(summary);
    const last = rows[rows.length - 1]!;
    cursor = { receivedAt: last.received_at, id: last.id };
    if (rows.length < chunkSize) break;
  }
  return summary;
}
