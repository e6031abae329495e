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

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$/;

/** Epoch milliseconds of an RFC 3339 string, or NaN. Sub-millisecond digits are dropped. */
export function parseRfc3339(value: string): number {
  const match = RFC3339.exec(value);
  if (!match) return Number.NaN;
  const [, year, month, day, hour, minute, second, fraction = '', zone = 'Z'] = match;
  const ms = fraction ? Number(fraction.slice(1, 4).padEnd(3, '0')) : 0;
  const utc = Date.UTC(Number(year), Number(month) - 1, Number(day), Number(hour), Number(minute), Number(second), ms);
  // Date.UTC rolls 2024-02-30 over into March: a date that does not exist is invalid.
  const check = new Date(utc);
  if (
    check.getUTCMonth() !== Number(month) - 1 ||
    check.getUTCDate() !== Number(day) ||
    Number(hour) > 23 ||
    Number(minute) > 59 ||
    Number(second) > 60
  )
    return Number.NaN;
  if (zone === 'Z' || zone === 'z') return utc;
  const sign = zone[0] === '-' ? -1 : 1;
  const offsetMinutes = Number(zone.slice(1, 3)) * 60 + Number(zone.slice(4, 6));
  return utc - sign * offsetMinutes * 60_000;
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
