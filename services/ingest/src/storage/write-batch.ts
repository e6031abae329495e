import { from as copyFrom } from 'pg-copy-streams';
import { markDirtySql, storageModeOf, type PoolClient } from '@gantry/db';
import type { ParsedMessage } from '../pipeline/steps.ts';
import { clip } from '../pipeline/steps.ts';
import type { RejectionReason } from '../pipeline/result.ts';
import { insertBronze, updateBronzeRows } from './bronze.ts';
import { countBatch, type CountedMessage } from './counters.ts';
import { binaryArray, columnArrays, copyBinary, unnestCall, type Cell, type Column } from './encode.ts';
import { applyPositionDeltas, logPositionInvalidations, positionsForBenchmarks, tallyPositions } from './positions.ts';
import { newStateDelta, noteReading, noteReceived, toStateRow, type DeviceStateDelta } from './device-state.ts';
import { silverColumns, stateAssignments, stateColumns, toSilverRow, type DeviceRecord } from './tables.ts';
import { noteUnknownDevices } from './unknown-devices.ts';

export type BronzeStatus = 'accepted' | 'rejected' | 'duplicate' | 'partial';
export type WriteMethod = 'unnest' | 'copy';

/** What became of one message: its bronze row's status and reason. */
export interface MessageOutcome {
  status: BronzeStatus;
  reason: RejectionReason | null;
  detail: string | null;
  /** Readings this message added to silver. */
  storedReadings: number;
  device: DeviceRecord | null;
}

/** A bronze message being re-parsed by replay: its identity and what it said before. */
export interface ReplayTarget {
  id: number;
  receivedAt: number;
  status: BronzeStatus;
  readingCount: number;
  /** What the row counts for in the traffic counters now (null: nothing), taken away as the new outcome is added. */
  counted?: CountedMessage | null;
  /**
   * Where it is kept: a row of its own (updated here) or a batch row (the caller writes
   * the batch again from the outcomes, see rewriteBronzeBatch).
   */
  storedIn: 'row' | 'batch';
}

export interface WriteOptions {
  method: WriteMethod;
  /** Bytes of an oversized payload kept in bronze (its real size is in payload_size). */
  oversizedPayloadBytes: number;
  /** Replay: update these bronze messages (same order as the messages) instead of inserting. */
  replay?: ReplayTarget[];
}

export interface BatchResult {
  outcomes: MessageOutcome[];
  storedReadings: number;
}

interface Candidate {
  /** Index of the message the reading came in. */
  owner: number;
  row: Cell[];
}

/** A silver row's key (device, type, ts) as a string, for sets of keys. */
const silverKey = (row: Cell[]) => `${row[1]}|${row[3]}|${row[4]}`;

const DAY_MS = 86_400_000;

/**
 * The order every writer locks readings in: the UTC day (silver's partition, or
 * TimescaleDB chunk), then silver's key (device_id, ts, type), then the message's
 * position, so copies of one reading lie side by side, the first received first. The day
 * comes first because COPY inserts a partition's rows together (one buffer per
 * partition): by key alone, a COPY and an INSERT of the same two days' readings took
 * their index entries in different orders, and deadlocked.
 */
function byKey(a: Candidate, b: Candidate): number {
  const left = a.row;
  const right = b.row;
  const leftDay = Math.floor((left[4] as number) / DAY_MS);
  const rightDay = Math.floor((right[4] as number) / DAY_MS);
  if (leftDay !== rightDay) return leftDay - rightDay;
  if (left[1] !== right[1]) return (left[1] as string) < (right[1] as string) ? -1 : 1;
  if (left[4] !== right[4]) return (left[4] as number) - (right[4] as number);
  if (left[3] !== right[3]) return (left[3] as string) < (right[3] as string) ? -1 : 1;
  return a.owner - b.owner;
}

/** The candidates in key order, each key once (its first copy in the batch). */
function uniqueByKey(candidates: Candidate[]): Candidate[] {
  candidates.sort(byKey);
  const unique: Candidate[] = [];
  let previous: Cell[] | null = null;
  for (const candidate of candidates) {
    const row = candidate.row;
    if (previous !== null && previous[1] === row[1] && previous[4] === row[4] && previous[3] === row[3]) continue;
    unique.push(candidate);
    previous = row;
  }
  return unique;
}

const stateUpsertSql = `/* ingest:upsertDeviceState */
INSERT INTO device_state AS s (${stateColumns.map((column) => column.name).join(', ')})
SELECT * FROM ${unnestCall(stateColumns)}
ON CONFLICT (device_id) DO UPDATE SET
    ${stateAssignments()}`;

const silverNames = silverColumns.map((column) => column.name).join(', ');

/** COPY of rows already in COPY text format, in chunks (the benchmark's physical limit). */
export async function copyEncoded(
  client: PoolClient,
  table: string,
  columns: readonly Column[],
  chunks: string[],
): Promise<void> {
  const names = columns.map((column) => column.name).join(', ');
  await new Promise<void>((resolve, reject) => {
    const stream = client.query(copyFrom(`COPY ${table} (${names}) FROM STDIN`));
    stream.on('error', reject);
    stream.on('finish', resolve);
    const write = (index: number): void => {
      if (index >= chunks.length) {
        stream.end();
        return;
      }
      if (stream.write(chunks[index])) write(index + 1);
      else stream.once('drain', () => write(index + 1));
    };
    write(0);
  });
}

/** COPY of one buffer already in COPY binary format. */
async function copyBinaryInto(
  client: PoolClient,
  table: string,
  columns: readonly Column[],
  data: Buffer,
): Promise<void> {
  const names = columns.map((column) => column.name).join(', ');
  await new Promise<void>((resolve, reject) => {
    const stream = client.query(copyFrom(`COPY ${table} (${names}) FROM STDIN (FORMAT binary)`));
    stream.on('error', reject);
    stream.on('finish', resolve);
    stream.end(data);
  });
}

/** Which of a batch's keys its silver write stored. */
interface InsertedKeys {
  has(key: string): boolean;
}

const EVERY_KEY: InsertedKeys = { has: () => true };

/**
 * Inserts new readings, skipping (device, type, ts) already stored; returns the keys
 * inserted. `probe`: look up stored keys first (COPY method), as after recent duplicates.
 */
async function insertReadings(
  client: PoolClient,
  rows: Cell[][],
  method: WriteMethod,
  probe: boolean,
): Promise<InsertedKeys> {
  if (rows.length === 0) return new Set();
  if (method === 'copy') return copyNewReadings(client, rows, probe);
  const result = await client.query<{ device_id: string; type: string; ts: Date }>(
    `/* ingest:insertReadings */ INSERT INTO telemetry_readings (${silverNames})
     SELECT * FROM ${unnestCall(silverColumns)} ON CONFLICT DO NOTHING RETURNING device_id, type, ts`,
    columnArrays(silverColumns, rows),
  );
  const inserted = new Set<string>();
  for (const row of result.rows) inserted.add(`${row.device_id}|${row.type}|${row.ts.getTime()}`);
  return inserted;
}

/**
 * How long the COPY method keeps looking up stored keys first after it last met a
 * duplicate. Duplicates come in runs (a redelivered window after a reconnect, a device
 * resending its buffer, a replay): while they do, probing first is cheaper than a COPY
 * that fails; otherwise the probe is a wasted statement per batch.
 */
const PROBE_AFTER_DUPLICATE_MS = 60_000;
let probeUntil = 0;

/** Whether the COPY method looks up stored keys before copying (always for a replay). */
function probeFirst(replay: boolean): boolean {
  return replay || Date.now() < probeUntil;
}

function duplicatesMet(): void {
  probeUntil = Date.now() + PROBE_AFTER_DUPLICATE_MS;
}

/**
 * The COPY method: binary COPY straight into telemetry_readings, cheaper than INSERT …
 * ON CONFLICT: no text to parse, and COPY writes heap pages in bulk (one WAL record per
 * page instead of a speculative insert and its confirmation per row). The key guards
 * against duplicates: a reading silver holds already fails the COPY (rolled back to a
 * savepoint), and the batch then looks up which keys are stored and copies the others.
 * While duplicates keep coming (PROBE_AFTER_DUPLICATE_MS) the lookup goes first.
 */
async function copyNewReadings(client: PoolClient, rows: Cell[][], probe: boolean): Promise<InsertedKeys> {
  if (!probe) {
    if (await copyUnlessDuplicate(client, rows)) return EVERY_KEY;
    duplicatesMet();
  }
  const { rows: existing } = await client.query<{ device_id: string; type: string; ts: Date }>(
    // LIMIT 1 per key keeps it a probe of the key index per reading, never a scan of silver.
    `/* ingest:existingReadings */ SELECT r.device_id, r.type, r.ts
       FROM unnest($1::uuid[], $2::timestamptz[], $3::text[]) AS k(device_id, ts, type)
      CROSS JOIN LATERAL (SELECT r.device_id, r.type, r.ts FROM telemetry_readings r
                           WHERE r.device_id = k.device_id AND r.ts = k.ts AND r.type = k.type LIMIT 1) r`,
    [
      binaryArray(
        'uuid',
        rows.map((row) => row[1]),
      ),
      binaryArray(
        'timestamptz',
        rows.map((row) => row[4]),
      ),
      binaryArray(
        'text',
        rows.map((row) => row[3]),
      ),
    ],
  );
  if (existing.length > 0) duplicatesMet();
  const stored = new Set(existing.map((row) => `${row.device_id}|${row.type}|${row.ts.getTime()}`));
  const inserted = new Set<string>();
  const fresh = rows.filter((row) => {
    const key = silverKey(row);
    if (stored.has(key)) return false;
    inserted.add(key);
    return true;
  });
  if (fresh.length === 0) return inserted;
  // A reading committed meanwhile by another writer (a redelivered copy) fails the COPY:
  // these rows then go in through INSERT … ON CONFLICT instead, nothing else is undone.
  if (await copyUnlessDuplicate(client, fresh)) return inserted;
  return insertReadings(client, fresh, 'unnest', false);
}

/** COPYs the rows under a savepoint; false (and rolled back) if one of them is stored already. */
async function copyUnlessDuplicate(client: PoolClient, rows: Cell[][]): Promise<boolean> {
  await client.query('SAVEPOINT silver_copy');
  try {
    await copyBinaryInto(client, 'telemetry_readings', silverColumns, copyBinary(silverColumns, rows));
    return true;
  } catch (error) {
    if ((error as { code?: unknown }).code !== '23505') throw error;
    await client.query('ROLLBACK TO SAVEPOINT silver_copy');
    return false;
  }
}

/**
 * PostgreSQL mode: positions gold moves with the fixes stored (positions.ts), after the
 * counters and before the rows the other writer and the worker wait for. A replay may
 * re-store readings gold still counts: its minutes are refreshed from silver instead.
 */
async function keepPositions(client: PoolClient, stored: Cell[][], replay: boolean): Promise<void> {
  if (stored.length === 0 || !positionsForBenchmarks.enabled || (await storageModeOf(client)) !== 'postgres') return;
  if (replay) await logPositionInvalidations(client, stored);
  else await applyPositionDeltas(client, tallyPositions(stored));
}

export async function resolveDevices(client: PoolClient, keys: Iterable<string>): Promise<Map<string, DeviceRecord>> {
  const unique = [...new Set(keys)];
  const devices = new Map<string, DeviceRecord>();
  if (unique.length === 0) return devices;
  const { rows } = await client.query<{
    device_id: string;
    id: string;
    tenant_id: string;
    asset_id: string | null;
    enabled: boolean;
  }>(
    `/* ingest:resolveDevices */ SELECT device_id, id, tenant_id, asset_id, enabled FROM devices WHERE device_id = ANY($1::text[])`,
    [unique],
  );
  for (const row of rows)
    devices.set(row.device_id, { id: row.id, tenantId: row.tenant_id, assetId: row.asset_id, enabled: row.enabled });
  return devices;
}

function partialDetail(message: ParsedMessage): string {
  const first = message.entryRejections[0]!;
  const total = message.readings.length + message.entryRejections.length;
  return `${message.entryRejections.length} of ${total} entries rejected; entry ${first.index}: ${first.detail}`;
}

/**
 * Writes one batch inside the caller's transaction: resolves devices, inserts new
 * readings into silver (duplicates by (device, type, ts) dropped), every message into
 * bronze with its outcome, updates device_state (newer device time wins) and marks
 * devices dirty for derivation from their earliest new reading. This is the one place
 * where a rejection becomes a bronze row.
 */
export async function writeBatch(
  client: PoolClient,
  messages: ParsedMessage[],
  options: WriteOptions,
): Promise<BatchResult> {
  const devices = await resolveDevices(
    client,
    messages.flatMap((message) => (message.deviceKey === null ? [] : [message.deviceKey])),
  );

  const outcomes: MessageOutcome[] = new Array(messages.length);
  const readings: Candidate[] = [];
  const deltas = new Map<string, DeviceStateDelta>();

  messages.forEach((message, index) => {
    const device = message.deviceKey === null ? null : (devices.get(message.deviceKey) ?? null);
    const receivedAt = message.raw.receivedAt;
    let delta: DeviceStateDelta | undefined;
    if (device?.enabled) {
      delta = deltas.get(device.id);
      if (delta) noteReceived(delta, receivedAt);
      else {
        delta = newStateDelta(device, receivedAt);
        deltas.set(device.id, delta);
      }
    }
    if (message.rejection) {
      outcomes[index] = {
        status: 'rejected',
        reason: message.rejection.reason,
        detail: message.rejection.detail,
        storedReadings: 0,
        device,
      };
      return;
    }
    if (!device) {
      outcomes[index] = {
        status: 'rejected',
        reason: 'unknown_device',
        detail: `device "${clip(message.deviceKey ?? '', 64)}" is not registered`,
        storedReadings: 0,
        device: null,
      };
      return;
    }
    if (!device.enabled) {
      outcomes[index] = {
        status: 'rejected',
        reason: 'device_disabled',
        detail: 'the device is disabled; kept in bronze only',
        storedReadings: 0,
        device,
      };
      return;
    }
    for (const reading of message.readings) {
      noteReading(delta!, reading);
      readings.push({ owner: index, row: toSilverRow(device, reading, receivedAt) });
    }
    outcomes[index] = { status: 'accepted', reason: null, detail: null, storedReadings: 0, device };
  });

  // One lock order for every writer (byKey): concurrent batches touching the same keys never deadlock.
  const candidates = uniqueByKey(readings);
  const inserted = await insertReadings(
    client,
    candidates.map((candidate) => candidate.row),
    options.method,
    probeFirst(options.replay !== undefined),
  );

  const dirtyFrom = new Map<string, { tenantId: string; ts: number }>();
  let storedReadings = 0;
  const stored: Cell[][] = [];
  for (const candidate of candidates) {
    if (inserted !== EVERY_KEY && !inserted.has(silverKey(candidate.row))) continue;
    stored.push(candidate.row);
    outcomes[candidate.owner]!.storedReadings += 1;
    storedReadings += 1;
    const ts = candidate.row[4] as number;
    const deviceId = candidate.row[1] as string;
    const current = dirtyFrom.get(deviceId);
    if (!current) dirtyFrom.set(deviceId, { tenantId: candidate.row[0] as string, ts });
    else if (ts < current.ts) current.ts = ts;
  }

  messages.forEach((message, index) => {
    const outcome = outcomes[index]!;
    if (outcome.status !== 'accepted') return;
    const previous = options.replay?.[index];
    const wasStored = previous !== undefined && (previous.status === 'accepted' || previous.status === 'partial');
    // Never more than the message holds: readings re-stored after silver lost them were counted before.
    if (wasStored)
      outcome.storedReadings = Math.min(message.readings.length, outcome.storedReadings + previous.readingCount);
    if (message.entryRejections.length > 0) {
      outcome.status = 'partial';
      outcome.reason = message.entryRejections[0]!.reason;
      outcome.detail = partialDetail(message);
    } else if (outcome.storedReadings === 0) {
      outcome.status = 'duplicate';
    }
  });

  if (options.replay) {
    const replay = options.replay;
    await updateBronzeRows(
      client,
      messages.flatMap((message, index) => {
        const target = replay[index]!;
        if (target.storedIn !== 'row') return [];
        return [{ id: target.id, receivedAt: target.receivedAt, message, outcome: outcomes[index]! }];
      }),
    );
  } else {
    await insertBronze(client, messages, outcomes, options.oversizedPayloadBytes);
  }

  await noteUnknownDevices(client, messages, devices, options);
  // Counters commit with the rows they count (counters.ts); duplicates never reach silver.
  await countBatch(client, messages, outcomes, stored, options.replay);
  await keepPositions(client, stored, options.replay !== undefined);

  // Last, right before the commit: the rows other transactions wait for. The other writer
  // waits for a device's state row, the worker's claim for its queue row, so both are
  // held only from here to the commit.
  if (deltas.size > 0) {
    const rows = [...deltas.values()].sort((a, b) => (a.device.id < b.device.id ? -1 : 1)).map(toStateRow);
    await client.query(stateUpsertSql, columnArrays(stateColumns, rows));
  }
  if (dirtyFrom.size > 0) {
    const entries = [...dirtyFrom.entries()].sort(([a], [b]) => (a < b ? -1 : 1));
    await client.query(markDirtySql, [
      entries.map(([id]) => id),
      entries.map(([, v]) => v.tenantId),
      entries.map(([, v]) => new Date(v.ts)),
    ]);
  }
  return { outcomes, storedReadings };
}
