import type { z } from 'zod';
import {
  DEVICE_ID_PATTERN,
  findIllFormedText,
  mayHoldSurrogateEscape,
  TOPIC_PREFIX,
  deviceTimestampSchema,
  isDeviceMessageType,
  isReadingType,
  readingPayloadSchemas,
  type DeviceMessageType,
  type Reading,
  type ReadingType,
} from '@gantry/contracts';
import { fastReading } from './fast-validation.ts';
import { ok, rejected, type RejectionReason, type StepResult } from './result.ts';

/** A message as it came off the broker. */
export interface RawMessage {
  topic: string;
  payload: Buffer;
  /** Receive time, epoch milliseconds. */
  receivedAt: number;
}

export interface TimeBounds {
  /** Readings more than this far ahead of the receive time are rejected. */
  maxFutureMs: number;
  /** Readings older than this (the silver retention window) are rejected. */
  maxAgeMs: number;
  /** The clock the age is measured against (now; the receive time for live ingest). */
  now: number;
}

export interface EntryRejection {
  index: number;
  reason: RejectionReason;
  detail: string;
}

/** What the per-message steps make of a raw message, before devices are resolved. */
export interface ParsedMessage {
  raw: RawMessage;
  deviceKey: string | null;
  messageType: string | null;
  /** Device time of the message: its ts, or for a batch the newest entry's; null if unknown. */
  deviceTs: number | null;
  /** Valid readings, in payload order. */
  readings: Reading[];
  /** Set when the whole message is rejected. */
  rejection: { reason: RejectionReason; detail: string } | null;
  /** Entries of a batch that were rejected (the rest are in readings); NO_REJECTIONS when none. */
  entryRejections: readonly EntryRejection[];
}

/** The entry rejections of every message without any: one shared empty array, not one per message. */
export const NO_REJECTIONS: readonly EntryRejection[] = Object.freeze([]);

const TOPIC_LEVELS = TOPIC_PREFIX.split('/').length + 2;
const TOPIC_START = `${TOPIC_PREFIX}/`;

/** `levels`: the topic split at '/', when the caller has split it already. */
export function parseTopicStep(
  topic: string,
  levels: readonly string[] = topic.split('/'),
): StepResult<{ deviceKey: string; messageType: DeviceMessageType }> {
  if (levels.length !== TOPIC_LEVELS || !topic.startsWith(TOPIC_START)) {
    return rejected('unknown_topic', `topic must be ${TOPIC_PREFIX}/{deviceId}/{type}`);
  }
  const deviceKey = levels[TOPIC_LEVELS - 2]!;
  const messageType = levels[TOPIC_LEVELS - 1]!;
  if (!isDeviceMessageType(messageType)) {
    return rejected(
      'unknown_message_type',
      `"${clip(messageType, 40)}" is not a message type (gps, adcin, hourmeter, imu, identifier, heartbeat, batch)`,
    );
  }
  if (!DEVICE_ID_PATTERN.test(deviceKey)) {
    return rejected(
      'unknown_device',
      'the device id in the topic is not a valid device id (1-64 of A-Z a-z 0-9 . _ : -)',
    );
  }
  return ok({ deviceKey, messageType });
}

export function checkSizeStep(payload: Buffer, maxBytes: number): StepResult<Buffer> {
  if (payload.length > maxBytes) {
    return rejected('payload_too_large', `payload is ${payload.length} bytes, the limit is ${maxBytes}`);
  }
  return ok(payload);
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

export function decodeStep(payload: Buffer): StepResult<string> {
  try {
    return ok(utf8.decode(payload));
  } catch {
    return rejected('invalid_utf8', 'payload is not valid UTF-8');
  }
}

export function parseJsonStep(text: string): StepResult<unknown> {
  try {
    return ok(JSON.parse(text) as unknown);
  } catch (error) {
    return rejected('invalid_json', `payload is not JSON: ${clip((error as Error).message, 120)}`);
  }
}

/**
 * A lone surrogate escape (`"\ud800"`) parses into a string that has no UTF-8 form: a
 * stored reading would hold U+FFFD instead. Such a payload is no more UTF-8 text than
 * invalid bytes are, so it is rejected with the same reason, naming the field. Only a
 * payload with a \uD800–\uDFFF escape is walked.
 */
export function checkTextStep(text: string, value: unknown): StepResult<unknown> {
  if (!mayHoldSurrogateEscape(text)) return ok(value);
  const path = findIllFormedText(value);
  if (path === null) return ok(value);
  return rejected(
    'invalid_utf8',
    `${path === '' ? 'payload' : clip(path, 80)}: a lone surrogate escape (\\uD800–\\uDFFF without its pair) is not UTF-8 text`,
  );
}

/** The value at a zod issue path inside the input, to tell "missing" from "wrong type". */
function valueAt(input: unknown, path: PropertyKey[]): unknown {
  let current = input;
  for (const key of path) {
    if (current === null || typeof current !== 'object') return undefined;
    current = (current as Record<PropertyKey, unknown>)[key];
  }
  return current;
}

/** Turns the first zod issue into a reason code and a message naming the field. */
export function reasonFromIssues(
  issues: z.core.$ZodIssue[],
  input: unknown,
): { reason: RejectionReason; detail: string } {
  const issue = issues[0]!;
  const field = issue.path.map(String).join('.') || 'payload';
  const value = valueAt(input, issue.path);
  const shown =
    typeof value === 'number' || typeof value === 'boolean'
      ? ` (got ${value})`
      : typeof value === 'string'
        ? ` (got "${clip(value, 40)}")`
        : '';
  const detail = `${field}: ${issue.message}${shown}`;
  const top = String(issue.path[0] ?? '');
  let reason: RejectionReason;
  if (top === 'ts') reason = value === undefined ? 'missing_field' : 'invalid_timestamp';
  else if (issue.code === 'invalid_type' && value === undefined) reason = 'missing_field';
  else if (top === 'lat' || top === 'lon') reason = 'invalid_coordinates';
  else if (issue.code === 'invalid_type') reason = 'invalid_field_type';
  else if (issue.code === 'too_big' || issue.code === 'too_small') reason = 'value_out_of_range';
  else reason = 'invalid_field_value';
  return { reason, detail };
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** Validates one reading payload of a known type with its zod schema. */
export function validateReadingStep(type: ReadingType, value: unknown): StepResult<Reading> {
  if (!isPlainObject(value)) return rejected('invalid_payload', `a ${type} payload must be a JSON object`);
  const fast = fastReading(type, value);
  if (fast !== undefined) return ok(fast);
  const parsed = readingPayloadSchemas[type].safeParse(value);
  if (!parsed.success) {
    const { reason, detail } = reasonFromIssues(parsed.error.issues, value);
    return rejected(reason, detail);
  }
  return ok({ type, ...parsed.data } as Reading);
}

export function checkTimeBoundsStep(reading: Reading, receivedAt: number, bounds: TimeBounds): StepResult<Reading> {
  if (reading.ts > receivedAt + bounds.maxFutureMs) {
    const ahead = Math.round((reading.ts - receivedAt) / 1000);
    return rejected(
      'future_timestamp',
      `ts ${new Date(reading.ts).toISOString()} is ${ahead} s ahead of the receive time (limit ${bounds.maxFutureMs / 1000} s)`,
    );
  }
  if (reading.ts < bounds.now - bounds.maxAgeMs) {
    return rejected(
      'stale_timestamp',
      `ts ${new Date(reading.ts).toISOString()} is older than the retention window of ${Math.round(bounds.maxAgeMs / 86_400_000)} days`,
    );
  }
  return ok(reading);
}

/** Best-effort device time of a rejected payload (for delay statistics), or null. */
function looseTs(value: unknown): number | null {
  if (!isPlainObject(value)) return null;
  const ts = deviceTimestampSchema.safeParse(value.ts);
  return ts.success ? ts.data : null;
}

function reading(type: ReadingType, value: unknown, receivedAt: number, bounds: TimeBounds): StepResult<Reading> {
  const valid = validateReadingStep(type, value);
  return valid.ok ? checkTimeBoundsStep(valid.value, receivedAt, bounds) : valid;
}

/** Marks the message rejected (a function of its own: no closure made per message). */
function rejectWith(message: ParsedMessage, result: { reason: RejectionReason; detail: string }): ParsedMessage {
  message.rejection = { reason: result.reason, detail: result.detail };
  return message;
}

/**
 * The per-message steps: topic → size → UTF-8 → JSON → well-formed text → schema → time bounds. Pure and
 * synchronous; device resolution and deduplication happen per batch (storage).
 */
export function parseMessage(raw: RawMessage, options: { maxPayloadBytes: number; bounds: TimeBounds }): ParsedMessage {
  const message: ParsedMessage = {
    raw,
    deviceKey: null,
    messageType: null,
    deviceTs: null,
    readings: [],
    rejection: null,
    entryRejections: NO_REJECTIONS,
  };

  const levels = raw.topic.split('/');
  if (levels.length === TOPIC_LEVELS) {
    message.deviceKey = clip(levels[TOPIC_LEVELS - 2]!, 200);
    message.messageType = clip(levels[TOPIC_LEVELS - 1]!, 40);
  }
  const topic = parseTopicStep(raw.topic, levels);
  if (!topic.ok) return rejectWith(message, topic);
  const size = checkSizeStep(raw.payload, options.maxPayloadBytes);
  if (!size.ok) return rejectWith(message, size);
  const text = decodeStep(raw.payload);
  if (!text.ok) return rejectWith(message, text);
  const json = parseJsonStep(text.value);
  if (!json.ok) return rejectWith(message, json);
  const wellFormed = checkTextStep(text.value, json.value);
  if (!wellFormed.ok) return rejectWith(message, wellFormed);

  const type = topic.value.messageType;
  if (type !== 'batch') {
    const result = reading(type, json.value, raw.receivedAt, options.bounds);
    if (!result.ok) {
      message.deviceTs = looseTs(json.value);
      return rejectWith(message, result);
    }
    message.readings.push(result.value);
    message.deviceTs = result.value.ts;
    return message;
  }

  if (!Array.isArray(json.value))
    return rejectWith(message, {
      reason: 'invalid_payload',
      detail: 'a batch payload must be a JSON array of typed readings',
    });
  if (json.value.length === 0)
    return rejectWith(message, { reason: 'empty_batch', detail: 'the batch holds no readings' });
  const entryRejections: EntryRejection[] = [];
  const entries: unknown[] = json.value;
  for (let index = 0; index < entries.length; index += 1) {
    const entry = entries[index];
    const entryType = isPlainObject(entry) ? entry.type : undefined;
    let result: StepResult<Reading>;
    if (!isPlainObject(entry)) result = rejected('invalid_payload', 'a batch entry must be a JSON object');
    else if (!isReadingType(entryType)) {
      result =
        entryType === undefined
          ? rejected('missing_field', 'type: a batch entry needs a type')
          : rejected('unknown_message_type', `type: "${clip(String(entryType), 40)}" is not a reading type`);
    } else result = reading(entryType, entry, raw.receivedAt, options.bounds);
    if (result.ok) {
      message.readings.push(result.value);
      if (message.deviceTs === null || result.value.ts > message.deviceTs) message.deviceTs = result.value.ts;
    } else {
      entryRejections.push({ index, reason: result.reason, detail: result.detail });
    }
  }
  if (entryRejections.length > 0) message.entryRejections = entryRejections;
  if (message.readings.length === 0) {
    const first = entryRejections[0]!;
    return rejectWith(message, {
      reason: first.reason,
      detail: `every entry was rejected; entry ${first.index}: ${first.detail}`,
    });
  }
  return message;
}

export function clip(value: string, max: number): string {
  return value.length > max ? `${value.slice(0, max)}…` : value;
}
