import type { PoolClient } from '@gantry/db';
import type { ParsedMessage } from '../pipeline/steps.ts';
import { clip } from '../pipeline/steps.ts';
import { columnArrays, unnestCall, type Cell, type Column } from './encode.ts';
import type { DeviceRecord } from './tables.ts';

/**
 * Bronze is two tables behind the `device_messages` view (migration 0080, docs/ingest.md):
 * the stored messages of a batch together in one `device_message_batches` row (arrays,
 * compressed), and rejected or partial messages one `device_message_rows` row each, so
 * data quality finds them one by one. A message's id is its batch's id × 2^20 plus its
 * position in the batch, in both tables.
 */
export const MESSAGE_ID_FACTOR = 1_048_576;

/** What bronze needs of a message's outcome. */
export interface BronzeOutcome {
  status: 'accepted' | 'rejected' | 'duplicate' | 'partial';
  reason: string | null;
  detail: string | null;
  storedReadings: number;
  device: DeviceRecord | null;
}

/** Kept one row each: what data quality lists as errors. */
export function keptAsRow(outcome: BronzeOutcome): boolean {
  return outcome.status === 'rejected' || outcome.status === 'partial';
}

/** `device_message_rows`, in insert order (id first). */
const rowColumns: readonly Column[] = [
  { name: 'id', kind: 'int8' },
  { name: 'received_at', kind: 'timestamptz' },
  { name: 'topic', kind: 'text' },
  { name: 'device_key', kind: 'text' },
  { name: 'device_id', kind: 'uuid' },
  { name: 'tenant_id', kind: 'uuid' },
  { name: 'asset_id', kind: 'uuid' },
  { name: 'message_type', kind: 'text' },
  { name: 'status', kind: 'text' },
  { name: 'error', kind: 'text' },
  { name: 'error_detail', kind: 'text' },
  { name: 'device_ts', kind: 'timestamptz' },
  { name: 'reading_count', kind: 'int4' },
  { name: 'payload_size', kind: 'int4' },
  { name: 'payload', kind: 'bytea' },
];
const rowNames = rowColumns.map((column) => column.name).join(', ');

const positionedColumns: readonly Column[] = [{ name: 'position', kind: 'int8' }, ...rowColumns.slice(1)];

/** Rows of a fresh batch: ids from the batch row's id, or a batch id of their own when nothing was stored. */
const insertRowsSql = `/* ingest:insertMessageRows */
INSERT INTO device_message_rows (${rowNames})
SELECT b.id * ${MESSAGE_ID_FACTOR} + u.position, ${rowColumns
  .slice(1)
  .map((column) => `u.${column.name}`)
  .join(', ')}
  FROM (SELECT coalesce($1::bigint, nextval('device_message_batch_ids')) AS id) b,
       ${unnestCall(positionedColumns, 1)} AS u(${positionedColumns.map((column) => column.name).join(', ')})`;

/** The batch row's arrays, from the messages kept in it (cells in batchColumns order). */
const batchColumns: readonly Column[] = [
  { name: 'positions', kind: 'int4' },
  { name: 'received_at', kind: 'timestamptz' },
  { name: 'topic', kind: 'text' },
  { name: 'device_index', kind: 'int4' },
  { name: 'device_ts', kind: 'timestamptz' },
  { name: 'reading_count', kind: 'int4' },
  { name: 'payload', kind: 'text' },
];

function rowCells(id: number | null, message: ParsedMessage, outcome: BronzeOutcome, oversizedBytes: number): Cell[] {
  const payload = message.raw.payload;
  return [
    id,
    message.raw.receivedAt,
    message.raw.topic,
    message.deviceKey,
    outcome.device?.id ?? null,
    outcome.device?.tenantId ?? null,
    outcome.device?.assetId ?? null,
    message.messageType,
    outcome.status,
    outcome.reason,
    outcome.detail === null ? null : clip(outcome.detail, 1000),
    message.deviceTs,
    outcome.storedReadings,
    payload.length,
    outcome.reason === 'payload_too_large' ? payload.subarray(0, oversizedBytes) : payload,
  ];
}

interface BatchArrays {
  devices: DeviceRecord[];
  cells: Cell[][];
  receivedFrom: number;
  receivedTo: number;
}

/** Groups stored messages into one batch row: a device dictionary and one array per field. */
function toBatchArrays(
  entries: Array<{ position: number; message: ParsedMessage; outcome: BronzeOutcome }>,
): BatchArrays {
  const devices: DeviceRecord[] = [];
  const indexOf = new Map<string, number>();
  const cells: Cell[][] = [];
  let receivedFrom = Number.POSITIVE_INFINITY;
  let receivedTo = Number.NEGATIVE_INFINITY;
  for (const { position, message, outcome } of entries) {
    const device = outcome.device!;
    let index = indexOf.get(device.id);
    if (index === undefined) {
      devices.push(device);
      index = devices.length;
      indexOf.set(device.id, index);
    }
    const receivedAt = message.raw.receivedAt;
    if (receivedAt < receivedFrom) receivedFrom = receivedAt;
    if (receivedAt > receivedTo) receivedTo = receivedAt;
    cells.push([
      position,
      receivedAt,
      message.raw.topic,
      index,
      message.deviceTs,
      outcome.storedReadings,
      // Sent as its bytes into the text[] column: stored messages passed the strict UTF-8 decode.
      message.raw.payload,
    ]);
  }
  return { devices, cells, receivedFrom, receivedTo };
}

function batchParameters(arrays: BatchArrays): unknown[] {
  return [
    new Date(arrays.receivedFrom),
    new Date(arrays.receivedTo),
    ...columnArrays(
      [
        { name: 'devices', kind: 'uuid' },
        { name: 'device_tenants', kind: 'uuid' },
        { name: 'device_assets', kind: 'uuid' },
      ],
      arrays.devices.map((device) => [device.id, device.tenantId, device.assetId]),
    ),
    ...columnArrays(batchColumns, arrays.cells),
  ];
}

const batchAssignments = `received_from = $2, received_to = $3, devices = $4::uuid[], device_tenants = $5::uuid[],
  device_assets = $6::uuid[], ${batchColumns.map((column, index) => `${column.name} = $${index + 7}::${column.kind}[]`).join(', ')}`;

const insertBatchSql = `/* ingest:insertMessageBatch */
INSERT INTO device_message_batches (received_from, received_to, devices, device_tenants, device_assets,
  ${batchColumns.map((column) => column.name).join(', ')})
VALUES ($1, $2, $3::uuid[], $4::uuid[], $5::uuid[], ${batchColumns.map((column, index) => `$${index + 6}::${column.kind}[]`).join(', ')})
RETURNING id`;

/**
 * Writes a fresh batch's messages to bronze: the stored ones as one batch row, the
 * rejected and partial ones a row each, all with ids in receive order.
 */
export async function insertBronze(
  client: PoolClient,
  messages: ParsedMessage[],
  outcomes: BronzeOutcome[],
  oversizedBytes: number,
): Promise<void> {
  const stored: Array<{ position: number; message: ParsedMessage; outcome: BronzeOutcome }> = [];
  const single: Array<{ position: number; message: ParsedMessage; outcome: BronzeOutcome }> = [];
  messages.forEach((message, position) => {
    const outcome = outcomes[position]!;
    (keptAsRow(outcome) ? single : stored).push({ position, message, outcome });
  });
  let batchId: number | null = null;
  if (stored.length > 0) {
    const { rows } = await client.query<{ id: string }>(insertBatchSql, batchParameters(toBatchArrays(stored)));
    batchId = Number(rows[0]!.id);
  }
  if (single.length > 0) {
    const cells = single.map(({ position, message, outcome }) => rowCells(position, message, outcome, oversizedBytes));
    // The first cell is the position here; the statement turns it into the id.
    await client.query(insertRowsSql, [batchId, ...columnArrays(positionedColumns, cells)]);
  }
}

const replayRowColumns: readonly Column[] = [
  { name: 'id', kind: 'int8' },
  { name: 'received_at', kind: 'timestamptz' },
  { name: 'device_id', kind: 'uuid' },
  { name: 'tenant_id', kind: 'uuid' },
  { name: 'asset_id', kind: 'uuid' },
  { name: 'status', kind: 'text' },
  { name: 'error', kind: 'text' },
  { name: 'error_detail', kind: 'text' },
  { name: 'device_ts', kind: 'timestamptz' },
  { name: 'reading_count', kind: 'int4' },
];

/** Replay: new outcomes of messages kept one row each, updated in place. */
export async function updateBronzeRows(
  client: PoolClient,
  targets: Array<{ id: number; receivedAt: number; message: ParsedMessage; outcome: BronzeOutcome }>,
): Promise<void> {
  if (targets.length === 0) return;
  const names = replayRowColumns.map((column) => column.name);
  await client.query(
    `/* ingest:replayMessages */ UPDATE device_message_rows m SET
       ${names
         .slice(2)
         .map((name) => `${name} = u.${name}`)
         .join(', ')}
     FROM ${unnestCall(replayRowColumns)} AS u(${names.join(', ')})
     WHERE m.id = u.id AND m.received_at = u.received_at`,
    columnArrays(
      replayRowColumns,
      targets.map(({ id, receivedAt, message, outcome }) => [
        id,
        receivedAt,
        outcome.device?.id ?? null,
        outcome.device?.tenantId ?? null,
        outcome.device?.assetId ?? null,
        outcome.status,
        outcome.reason,
        outcome.detail === null ? null : clip(outcome.detail, 1000),
        message.deviceTs,
        outcome.storedReadings,
      ]),
    ),
  );
}

/** One batch row as replay reads it: every message in it, in position order. */
export interface StoredBatch {
  id: number;
  messages: Array<{ position: number; message: ParsedMessage; outcome: BronzeOutcome }>;
}

/**
 * Replay: writes a batch row again with its messages' new outcomes. Those still stored
 * stay in it; any now rejected or partial moves to a row of its own (same id), where
 * data quality finds it.
 */
export async function rewriteBronzeBatch(
  client: PoolClient,
  batch: StoredBatch,
  oversizedBytes: number,
): Promise<void> {
  const stored = batch.messages.filter((entry) => !keptAsRow(entry.outcome));
  const moved = batch.messages.filter((entry) => keptAsRow(entry.outcome));
  if (stored.length > 0) {
    await client.query(
      `/* ingest:replayMessageBatch */ UPDATE device_message_batches SET ${batchAssignments} WHERE id = $1`,
      [batch.id, ...batchParameters(toBatchArrays(stored))],
    );
  } else {
    await client.query(`/* ingest:replayMessageBatch */ DELETE FROM device_message_batches WHERE id = $1`, [batch.id]);
  }
  if (moved.length > 0) {
    await client.query(
      `/* ingest:replayMessageRows */ INSERT INTO device_message_rows (${rowNames}) SELECT * FROM ${unnestCall(rowColumns)}`,
      columnArrays(
        rowColumns,
        moved.map(({ position, message, outcome }) =>
          rowCells(batch.id * MESSAGE_ID_FACTOR + position, message, outcome, oversizedBytes),
        ),
      ),
    );
  }
}
