import type { Config } from '@gantry/config';
import type { Pool } from '@gantry/db';
import { OVERSIZED_PAYLOAD_BYTES, timeBounds } from './ingest.ts';
import { NO_REJECTIONS, parseMessage } from './pipeline/steps.ts';
import { rewriteBronzeBatch, type BronzeOutcome, type StoredBatch } from './storage/bronze.ts';
import type { CountedMessage } from './storage/counters.ts';
import type { DeviceRecord } from './storage/tables.ts';
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

/** What the row counts for in the traffic counters before the replay (db/counters/*.sql). */
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

interface BatchMessageRow {
  position: number;
  received_at: Date;
  topic: string;
  payload: string;
  reading_count: number;
  device_ts: Date | null;
  device_id: string;
  tenant_id: string;
  asset_id: string | null;
}

/**
 * Re-runs the parse steps over bronze messages (after a parser fix, or once an unknown
 * device is registered) and writes what now parses into silver, device_state and the
 * derivation queue; each bronze message gets its new status in place. Idempotent: silver
 * keeps one reading per (device, type, ts), so running it twice adds nothing.
 * Rejected and partial messages have rows of their own; stored ones (only with `all`)
 * live in batch rows, each replayed in one transaction.
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
         FROM device_message_rows
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
        storedIn: 'row',
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
  if (options.all) await replayBatches(deps, options, summary);
  return summary;
}

/** Replays the stored messages of every batch row holding some of the range, a batch per transaction. */
async function replayBatches(
  deps: { pool: Pool; config: Config },
  options: ReplayOptions,
  summary: ReplaySummary,
): Promise<void> {
  const { pool, config } = deps;
  let cursor: { receivedFrom: Date; id: number } = { receivedFrom: new Date(0), id: -1 };
  for (;;) {
    const { rows: batches } = await pool.query<{ id: string; received_from: Date }>(
      `/* ingest:replaySelectBatches */
       SELECT id, received_from FROM device_message_batches
        WHERE received_from < $2 AND received_to >= $1 AND (received_from, id) > ($3::timestamptz, $4::bigint)
        ORDER BY received_from, id LIMIT 100`,
      [options.from, options.to, cursor.receivedFrom, cursor.id],
    );
    if (batches.length === 0) return;
    for (const batch of batches) {
      await replayBatch(pool, config, Number(batch.id), batch.received_from, options, summary);
      options.onProgress?.(summary);
    }
    const last = batches[batches.length - 1]!;
    cursor = { receivedFrom: last.received_from, id: Number(last.id) };
  }
}

async function replayBatch(
  pool: Pool,
  config: Config,
  id: number,
  receivedFrom: Date,
  options: ReplayOptions,
  summary: ReplaySummary,
): Promise<void> {
  await inTransaction(pool, config.ingest.statementTimeoutMs * 4, async (client) => {
    const { rows } = await client.query<BatchMessageRow>(
      `/* ingest:replayLoadBatch */
       SELECT m.position, m.received_at, m.topic, m.payload, m.reading_count, m.device_ts,
              b.devices[m.device_index] AS device_id, b.device_tenants[m.device_index] AS tenant_id,
              b.device_assets[m.device_index] AS asset_id
         FROM device_message_batches b
        CROSS JOIN LATERAL unnest(b.positions, b.received_at, b.topic, b.device_index, b.device_ts, b.reading_count, b.payload)
              AS m(position, received_at, topic, device_index, device_ts, reading_count, payload)
        WHERE b.id = $1 AND b.received_from = $2
        ORDER BY m.position
        FOR UPDATE OF b`,
      [id, receivedFrom],
    );
    const now = Date.now();
    const entries: StoredBatch['messages'] = [];
    const targets: Array<{
      entry: StoredBatch['messages'][number];
      before: BronzeOutcome;
      deviceTsBefore: number | null;
    }> = [];
    for (const row of rows) {
      const receivedAt = row.received_at.getTime();
      const raw = { topic: row.topic, payload: Buffer.from(row.payload, 'utf8'), receivedAt };
      const device: DeviceRecord = { id: row.device_id, tenantId: row.tenant_id, assetId: row.asset_id, enabled: true };
      const before: BronzeOutcome = {
        status: row.reading_count > 0 ? 'accepted' : 'duplicate',
        reason: null,
        detail: null,
        storedReadings: row.reading_count,
        device,
      };
      const inRange =
        receivedAt >= options.from.getTime() &&
        receivedAt < options.to.getTime() &&
        (options.deviceKey === undefined || row.topic.split('/')[3] === options.deviceKey);
      const message = inRange
        ? parseMessage(raw, { maxPayloadBytes: config.ingest.maxPayloadBytes, bounds: timeBounds(config, now) })
        : {
            raw,
            deviceKey: null,
            messageType: null,
            deviceTs: row.device_ts?.getTime() ?? null,
            readings: [],
            rejection: null,
            entryRejections: NO_REJECTIONS,
          };
      const entry = { position: row.position, message, outcome: before };
      entries.push(entry);
      if (inRange) targets.push({ entry, before, deviceTsBefore: row.device_ts?.getTime() ?? null });
    }
    if (targets.length === 0) return;
    const result = await writeBatch(
      client,
      targets.map(({ entry }) => entry.message),
      {
        method: 'unnest',
        oversizedPayloadBytes: OVERSIZED_PAYLOAD_BYTES,
        replay: targets.map(({ entry, before, deviceTsBefore }) => ({
          id,
          receivedAt: entry.message.raw.receivedAt,
          status: before.status,
          readingCount: before.storedReadings,
          // What the message counts for now in the counters, as countedBefore does for single rows.
          counted: {
            tenantId: before.device!.tenantId,
            deviceId: before.device!.id,
            assetId: before.device!.assetId,
            receivedAt: entry.message.raw.receivedAt,
            messageType: entry.message.raw.topic.split('/')[4]!,
            status: before.status,
            reason: '',
            readingCount: before.storedReadings,
            payloadBytes: entry.message.raw.payload.length,
            deviceTs: deviceTsBefore,
          },
          storedIn: 'batch',
        })),
      },
    );
    let changed = false;
    result.outcomes.forEach((outcome, index) => {
      const target = targets[index]!;
      summary.statuses[outcome.status] += 1;
      if (outcome.status !== target.before.status) summary.changed += 1;
      if (
        outcome.status !== target.before.status ||
        outcome.storedReadings !== target.before.storedReadings ||
        outcome.device?.id !== target.before.device?.id ||
        outcome.device?.assetId !== target.before.device?.assetId
      )
        changed = true;
      target.entry.outcome = outcome;
    });
    summary.messages += targets.length;
    summary.readingsAdded += result.storedReadings;
    if (changed) await rewriteBronzeBatch(client, { id, messages: entries }, OVERSIZED_PAYLOAD_BYTES);
  });
}
