import { DEVICE_ID_PATTERN } from '@gantry/contracts';
import type { PoolClient } from '@gantry/db';
import type { ParsedMessage } from '../pipeline/steps.ts';
import type { DeviceRecord } from './tables.ts';

/**
 * How many unregistered device ids a deployment keeps. Past it the least recently seen
 * are evicted: a device really being installed publishes every few seconds and stays,
 * while a flood of random ids only churns this fixed number of rows.
 */
export const UNKNOWN_DEVICES_CAP = 1000;

/** Bytes of the latest payload kept as a sample. */
export const UNKNOWN_DEVICE_SAMPLE_BYTES = 512;

interface Sighting {
  first: number;
  last: number;
  count: number;
  topic: string;
  payload: Buffer;
}

/** Per unregistered (but well-formed) device id of the batch: when, how often, the latest message. */
function sightings(messages: ParsedMessage[], devices: Map<string, DeviceRecord>): Map<string, Sighting> {
  const seen = new Map<string, Sighting>();
  for (const message of messages) {
    const key = message.deviceKey;
    if (key === null || devices.has(key) || !DEVICE_ID_PATTERN.test(key)) continue;
    const at = message.raw.receivedAt;
    const sighting = seen.get(key);
    if (!sighting) {
      seen.set(key, { first: at, last: at, count: 1, topic: message.raw.topic, payload: message.raw.payload });
      continue;
    }
    sighting.count += 1;
    sighting.first = Math.min(sighting.first, at);
    if (at >= sighting.last) {
      sighting.last = at;
      sighting.topic = message.raw.topic;
      sighting.payload = message.raw.payload;
    }
  }
  return seen;
}

const upsertSql = `/* ingest:noteUnknownDevices */
INSERT INTO unknown_devices AS u
  (device_key, first_seen_at, last_seen_at, message_count, sample_topic, sample_payload, sample_size)
SELECT * FROM unnest($1::text[], $2::timestamptz[], $3::timestamptz[], $4::int8[], $5::text[], $6::bytea[], $7::int4[])
ON CONFLICT (device_key) DO UPDATE SET
  first_seen_at = least(u.first_seen_at, excluded.first_seen_at),
  message_count = u.message_count + excluded.message_count,
  sample_topic = CASE WHEN excluded.last_seen_at >= u.last_seen_at THEN excluded.sample_topic ELSE u.sample_topic END,
  sample_payload = CASE WHEN excluded.last_seen_at >= u.last_seen_at THEN excluded.sample_payload ELSE u.sample_payload END,
  sample_size = CASE WHEN excluded.last_seen_at >= u.last_seen_at THEN excluded.sample_size ELSE u.sample_size END,
  last_seen_at = greatest(u.last_seen_at, excluded.last_seen_at)
RETURNING (xmax = 0) AS inserted`;

// Rows another batch is updating right now are skipped (they are being seen: recent).
const evictSql = `/* ingest:evictUnknownDevices */
DELETE FROM unknown_devices WHERE device_key IN (
  SELECT device_key FROM unknown_devices ORDER BY last_seen_at DESC, device_key OFFSET $1 FOR UPDATE SKIP LOCKED)`;

/**
 * Remembers, in the batch's transaction, the device ids of this batch that no tenant
 * has registered (their messages go to bronze as `unknown_device`, with no tenant), and
 * keeps the table at `cap` ids. Replays re-read stored messages and are not counted again.
 */
export async function noteUnknownDevices(
  client: PoolClient,
  messages: ParsedMessage[],
  devices: Map<string, DeviceRecord>,
  options: { replay?: unknown },
  cap = UNKNOWN_DEVICES_CAP,
): Promise<void> {
  if (options.replay) return;
  const seen = sightings(messages, devices);
  if (seen.size === 0) return;
  // One lock order for every writer: concurrent batches never deadlock on these rows.
  const keys = [...seen.keys()].sort();
  const rows = keys.map((key) => seen.get(key)!);
  const { rows: results } = await client.query<{ inserted: boolean }>(upsertSql, [
    keys,
    rows.map((row) => new Date(row.first)),
    rows.map((row) => new Date(row.last)),
    rows.map((row) => row.count),
    rows.map((row) => row.topic.slice(0, 300)),
    rows.map((row) => row.payload.subarray(0, UNKNOWN_DEVICE_SAMPLE_BYTES)),
    rows.map((row) => row.payload.length),
  ]);
  // Only a new id can push the table past its cap; updates leave its size alone.
  if (results.some((row) => row.inserted)) await client.query(evictSql, [cap]);
}
