import { z } from 'zod';

/**
 * The device contract: topics and the JSON payload of every message type (docs/ingest.md).
 * Ingest validates with these schemas; the simulator builds payloads of these types.
 */

export const TOPIC_PREFIX = 'gantry/v1/devices';

/** Message types a device may publish; `batch` wraps typed readings for store-and-forward. */
export const readingTypes = ['gps', 'adcin', 'hourmeter', 'imu', 'identifier', 'heartbeat'] as const;
export const deviceMessageTypes = [...readingTypes, 'batch'] as const;

export type ReadingType = (typeof readingTypes)[number];
export type DeviceMessageType = (typeof deviceMessageTypes)[number];

export const DEVICE_ID_PATTERN = /^[A-Za-z0-9._:-]{1,64}$/;

export function isReadingType(value: unknown): value is ReadingType {
  return typeof value === 'string' && (readingTypes as readonly string[]).includes(value);
}

export function isDeviceMessageType(value: unknown): value is DeviceMessageType {
  return typeof value === 'string' && (deviceMessageTypes as readonly string[]).includes(value);
}

/** `gantry/v1/devices/{deviceId}/{type}` */
export function deviceTopic(deviceId: string, type: DeviceMessageType): string {
  return `${TOPIC_PREFIX}/${deviceId}/${type}`;
}

/** The value of `count` ASCII digits of `value` from `at`, or -1 if one of them is not a digit. */
function digits(value: string, at: number, count: number): number {
  let result = 0;
  for (let index = at; index < at + count; index += 1) {
    const code = value.charCodeAt(index) - 48;
    if (!(code >= 0 && code <= 9)) return -1;
    result = result * 10 + code;
  }
  return result;
}

const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

function daysInMonth(year: number, month: number): number {
  if (month !== 2) return DAYS_IN_MONTH[month - 1]!;
  return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0 ? 29 : 28;
}

/**
 * Epoch milliseconds of an RFC 3339 string, or NaN. Sub-millisecond digits are dropped.
 * Read character by character: every reading's ts goes through here, and a regex match
 * with its substrings and a Date per reading were a measurable share of ingest's CPU
 * and garbage. Accepts `YYYY-MM-DD[Tt ]HH:MM:SS[.1-9 digits]([Zz]|±HH:MM)`; a date that
 * does not exist (2024-02-30) is NaN, a leap second (:60) rolls into the next minute
 * within its day, as Date.UTC does.
 */
export function parseRfc3339(value: string): number {
  const length = value.length;
  if (length < 20) return Number.NaN;
  const year = digits(value, 0, 4);
  const month = digits(value, 5, 2);
  const day = digits(value, 8, 2);
  const hour = digits(value, 11, 2);
  const minute = digits(value, 14, 2);
  const second = digits(value, 17, 2);
  const separator = value.charCodeAt(10);
  if (
    year < 0 ||
    month < 1 ||
    month > 12 ||
    day < 1 ||
    hour < 0 ||
    hour > 23 ||
    minute < 0 ||
    minute > 59 ||
    second < 0 ||
    second > 60 ||
    value.charCodeAt(4) !== 45 ||
    value.charCodeAt(7) !== 45 ||
    (separator !== 84 && separator !== 116 && separator !== 32) ||
    value.charCodeAt(13) !== 58 ||
    value.charCodeAt(16) !== 58
  )
    return Number.NaN;
  // Date.UTC reads years 0-99 as 1900-1999: the calendar check follows it.
  if (day > daysInMonth(year < 100 ? 1900 + year : year, month)) return Number.NaN;
  // A leap second at the day's last minute rolls into the next day: a date Date.UTC does not keep.
  if (second === 60 && hour === 23 && minute === 59) return Number.NaN;
  let at = 19;
  let ms = 0;
  if (value.charCodeAt(at) === 46) {
    at += 1;
    const from = at;
    while (at < length && at - from < 9) {
      const code = value.charCodeAt(at) - 48;
      if (code < 0 || code > 9) break;
      if (at - from < 3) ms = ms * 10 + code;
      at += 1;
    }
    const count = at - from;
    if (count === 0) return Number.NaN;
    if (count === 1) ms *= 100;
    else if (count === 2) ms *= 10;
  }
  const utc = Date.UTC(year, month - 1, day, hour, minute, second, ms);
  const zone = value.charCodeAt(at);
  if (zone === 90 || zone === 122) return at + 1 === length ? utc : Number.NaN;
  if ((zone !== 43 && zone !== 45) || at + 6 !== length || value.charCodeAt(at + 3) !== 58) return Number.NaN;
  const offsetHours = digits(value, at + 1, 2);
  const offsetMinutes = digits(value, at + 4, 2);
  if (offsetHours < 0 || offsetMinutes < 0) return Number.NaN;
  const sign = zone === 45 ? -1 : 1;
  return utc - sign * (offsetHours * 60 + offsetMinutes) * 60_000;
}

/** Device time: RFC 3339 or epoch milliseconds; parsed to epoch milliseconds. */
export const deviceTimestampSchema = z.union([z.string(), z.number()]).transform((value, ctx) => {
  const ms =
    typeof value === 'number' ? (Number.isFinite(value) ? Math.trunc(value) : Number.NaN) : parseRfc3339(value);
  if (Number.isNaN(ms) || ms < 0 || ms > 253_402_300_799_999) {
    ctx.addIssue({ code: 'custom', message: 'ts must be an RFC 3339 date-time or epoch milliseconds' });
    return z.NEVER;
  }
  return ms;
});

/** Text as PostgreSQL can store it (no NUL characters). */
const text = (max: number) =>
  z
    .string()
    .max(max)
    .refine((value) => !value.includes('\u0000'), 'must not contain NUL characters');

const common = {
  ts: deviceTimestampSchema,
  ignition: z.boolean().optional(),
};

const int32 = z.number().int().min(0).max(2_147_483_647);

export const gpsPayloadSchema = z.object({
  ...common,
  lat: z.number().min(-90).max(90),
  lon: z.number().min(-180).max(180),
  speedKmh: z.number().min(0).max(400).optional(),
  heading: z.number().min(0).max(360).optional(),
  hdop: z.number().min(0).max(100).optional(),
  satellites: z.number().int().min(0).max(255).optional(),
  fix: z.boolean().default(true),
  altitudeM: z.number().min(-1000).max(20000).optional(),
});

export const adcinPayloadSchema = z.object({
  ...common,
  state: z.enum(['on', 'off']),
  raw: z.number().min(-1000).max(1000).optional(),
});

export const hourmeterPayloadSchema = z.object({
  ...common,
  value: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
});

export const imuPayloadSchema = z.object({
  ...common,
  peakG: z.number().min(0).max(100),
  samples: int32.optional(),
  windowMs: int32.optional(),
});

export const identifierPayloadSchema = z.object({
  ...common,
  identifier: text(64).min(1),
  event: z.enum(['login', 'logout']).default('login'),
});

export const heartbeatPayloadSchema = z.object({
  ...common,
  batteryV: z.number().min(0).max(100).optional(),
  rssi: z.number().min(-200).max(200).optional(),
  firmware: text(64).optional(),
  uptimeS: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
});

/** The payload schema of each reading type (a message on its own topic). */
export const readingPayloadSchemas = {
  gps: gpsPayloadSchema,
  adcin: adcinPayloadSchema,
  hourmeter: hourmeterPayloadSchema,
  imu: imuPayloadSchema,
  identifier: identifierPayloadSchema,
  heartbeat: heartbeatPayloadSchema,
} as const satisfies Record<ReadingType, z.ZodType>;

/** One entry of a `batch` message: a reading payload with its own `type`. */
export const batchEntrySchema = z.discriminatedUnion('type', [
  gpsPayloadSchema.extend({ type: z.literal('gps') }),
  adcinPayloadSchema.extend({ type: z.literal('adcin') }),
  hourmeterPayloadSchema.extend({ type: z.literal('hourmeter') }),
  imuPayloadSchema.extend({ type: z.literal('imu') }),
  identifierPayloadSchema.extend({ type: z.literal('identifier') }),
  heartbeatPayloadSchema.extend({ type: z.literal('heartbeat') }),
]);

/** A `batch` payload: a JSON array of typed readings (store-and-forward upload). */
export const batchPayloadSchema = z.array(batchEntrySchema).min(1);

export type GpsPayload = z.input<typeof gpsPayloadSchema>;
export type AdcinPayload = z.input<typeof adcinPayloadSchema>;
export type HourmeterPayload = z.input<typeof hourmeterPayloadSchema>;
export type ImuPayload = z.input<typeof imuPayloadSchema>;
export type IdentifierPayload = z.input<typeof identifierPayloadSchema>;
export type HeartbeatPayload = z.input<typeof heartbeatPayloadSchema>;
/** What a device sends as one batch entry (input form: ts as string or number). */
export type BatchEntry = z.input<typeof batchEntrySchema>;
/** A reading payload of a given type, as a device sends it. */
export type ReadingPayload<T extends ReadingType = ReadingType> = z.input<(typeof readingPayloadSchemas)[T]>;

/** A validated reading: the payload of its type with `ts` in epoch milliseconds. */
export type Reading =
  | ({ type: 'gps' } & z.output<typeof gpsPayloadSchema>)
  | ({ type: 'adcin' } & z.output<typeof adcinPayloadSchema>)
  | ({ type: 'hourmeter' } & z.output<typeof hourmeterPayloadSchema>)
  | ({ type: 'imu' } & z.output<typeof imuPayloadSchema>)
  | ({ type: 'identifier' } & z.output<typeof identifierPayloadSchema>)
  | ({ type: 'heartbeat' } & z.output<typeof heartbeatPayloadSchema>);

/** A fix is valid when `fix` is true, hdop ≤ 5 (if given) and it is not (0, 0). */
export function isValidGpsFix(reading: { fix: boolean; hdop?: number | undefined; lat: number; lon: number }): boolean {
  return reading.fix && (reading.hdop === undefined || reading.hdop <= 5) && !(reading.lat === 0 && reading.lon === 0);
}
