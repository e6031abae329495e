import { TOPIC_PREFIX, deviceTopic, type ReadingType } from '@gantry/contracts';
import { destination, type LatLon } from './geo.ts';
import type { SimulatedMessage } from './messages.ts';

/** The demo yard's centre (services/api/src/features/provisioning/demo.ts). */
export const DEMO_YARD: LatLon = { lat: 51.9542, lon: 4.0529 };

/** A small deterministic PRNG (mulberry32), so a seed reproduces a run. */
export function randomSource(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export type MessageMix = Partial<Record<ReadingType, number>>;

/** Roughly what a yard tracker sends: mostly fixes, some IMU windows and heartbeats. */
export const DEFAULT_MIX: MessageMix = { gps: 70, imu: 10, heartbeat: 8, adcin: 6, hourmeter: 5, identifier: 1 };

export function pickerFor(mix: MessageMix, random: () => number): () => ReadingType {
  const entries = Object.entries(mix).filter(([, weight]) => (weight ?? 0) > 0) as Array<[ReadingType, number]>;
  const total = entries.reduce((sum, [, weight]) => sum + weight, 0);
  return () => {
    let roll = random() * total;
    for (const [type, weight] of entries) {
      roll -= weight;
      if (roll < 0) return type;
    }
    return entries[entries.length - 1]![0];
  };
}

/** A plausible payload of a type for a device at a position (≈150 bytes for gps). */
export function readingPayload(
  type: ReadingType,
  ts: number,
  position: LatLon,
  random: () => number,
): Record<string, unknown> {
  const iso = new Date(ts).toISOString();
  switch (type) {
    case 'gps':
      return {
        ts: iso,
        lat: Number(position.lat.toFixed(7)),
        lon: Number(position.lon.toFixed(7)),
        speedKmh: Math.round(random() * 250) / 10,
        heading: Math.round(random() * 3600) / 10,
        hdop: Math.round((0.6 + random()) * 10) / 10,
        satellites: 8 + Math.floor(random() * 6),
        fix: true,
        ignition: true,
      };
    case 'adcin':
      return { ts: iso, state: random() < 0.5 ? 'on' : 'off', raw: Math.round(random() * 240) / 10, ignition: true };
    case 'hourmeter':
      return { ts: iso, value: 36_000_000 + (Math.floor(ts / 1000) % 1_000_000), ignition: true };
    case 'imu':
      return { ts: iso, peakG: Math.round(random() * 300) / 100, samples: 200, windowMs: 2000, ignition: true };
    case 'identifier':
      return {
        ts: iso,
        identifier: `OP-${String(1 + Math.floor(random() * 5)).padStart(3, '0')}`,
        event: 'login',
        ignition: true,
      };
    case 'heartbeat':
      return {
        ts: iso,
        ignition: true,
        batteryV: Math.round((24 + random() * 4) * 10) / 10,
        rssi: -50 - Math.floor(random() * 40),
        firmware: 'sim-1.4.2',
        uptimeS: Math.floor(ts / 1000) % 1_000_000,
      };
  }
}

export interface FleetTrafficOptions {
  deviceIds: string[];
  /** Messages to generate. */
  count: number;
  /** Device time of each device's first reading (epoch ms). */
  start: number;
  /** Device time between one device's consecutive messages (default 1 s). */
  stepMs?: number;
  center?: LatLon;
  mix?: MessageMix;
  seed?: number;
}

/**
 * Bulk traffic for tests and benchmarks: `count` readings round-robin over the devices,
 * each device's clock advancing `stepMs` per message, so every (device, type, ts) is
 * distinct and the number of readings silver must end up with is exactly `count`.
 */
export function* fleetTraffic(options: FleetTrafficOptions): Generator<SimulatedMessage> {
  const random = randomSource(options.seed ?? 1);
  const pick = pickerFor(options.mix ?? DEFAULT_MIX, random);
  const center = options.center ?? DEMO_YARD;
  const stepMs = options.stepMs ?? 1000;
  const devices = options.deviceIds.map((deviceId) => ({
    deviceId,
    position: destination(center, random() * 600, random() * 360),
    clock: options.start,
  }));
  for (let index = 0; index < options.count; index += 1) {
    const device = devices[index % devices.length]!;
    const type = pick();
    if (type === 'gps') device.position = destination(device.position, random() * 20, random() * 360);
    const ts = device.clock;
    device.clock += stepMs;
    yield { deviceId: device.deviceId, type, ts, payload: readingPayload(type, ts, device.position, random) };
  }
}

/** One kind of bad input and the bronze outcome ingest must give it. */
export interface BadMessageCase {
  label: string;
  status: 'rejected' | 'partial';
  reason: string;
  message: SimulatedMessage;
}

/**
 * Every kind of bad input the device contract rejects (docs/ingest.md, bronze reasons),
 * for a registered device (and one that is not), with the reason ingest must store. Used by the tests and the live fleet.
 */
export function badMessageCases(
  deviceId: string,
  now: number,
  unknownDeviceId = `unregistered-${deviceId}`.slice(0, 64),
): BadMessageCase[] {
  const iso = new Date(now).toISOString();
  const gps = { ts: iso, lat: 51.95, lon: 4.05 };
  const message = (
    type: SimulatedMessage['type'],
    payload: unknown,
    extra: Partial<SimulatedMessage> = {},
  ): SimulatedMessage => ({
    deviceId,
    type,
    ts: now,
    payload,
    ...extra,
  });
  return [
    {
      label: 'malformed JSON',
      status: 'rejected',
      reason: 'invalid_json',
      message: message('gps', null, { raw: '{"ts": "2024-01-01T00:00:00Z", "lat": 51.9,' }),
    },
    {
      label: 'bytes that are not UTF-8',
      status: 'rejected',
      reason: 'invalid_utf8',
      message: message('gps', null, { raw: Buffer.from([0x7b, 0xff, 0xfe, 0x7d]) }),
    },
    {
      label: 'a lone surrogate escape, text with no UTF-8 form',
      status: 'rejected',
      reason: 'invalid_utf8',
      message: message('identifier', null, { raw: `{"ts":"${iso}","identifier":"OP-\\ud800"}` }),
    },
    {
      label: 'a payload over 64 KiB',
      status: 'rejected',
      reason: 'payload_too_large',
      message: message('heartbeat', null, { raw: JSON.stringify({ ts: iso, firmware: 'x'.repeat(70_000) }) }),
    },
    {
      label: 'a JSON array where an object belongs',
      status: 'rejected',
      reason: 'invalid_payload',
      message: message('gps', [51.95, 4.05]),
    },
    {
      label: 'a missing required field',
      status: 'rejected',
      reason: 'missing_field',
      message: message('gps', { ts: iso, lon: 4.05 }),
    },
    {
      label: 'a number sent as a string',
      status: 'rejected',
      reason: 'invalid_field_type',
      message: message('hourmeter', { ts: iso, value: '1200' }),
    },
    {
      label: 'a value outside its enumeration',
      status: 'rejected',
      reason: 'invalid_field_value',
      message: message('adcin', { ts: iso, state: 'maybe' }),
    },
    {
      label: 'a value out of range',
      status: 'rejected',
      reason: 'value_out_of_range',
      message: message('imu', { ts: iso, peakG: -1 }),
    },
    {
      label: 'a latitude out of range',
      status: 'rejected',
      reason: 'invalid_coordinates',
      message: message('gps', { ...gps, lat: 123.4 }),
    },
    {
      label: 'a NaN longitude',
      status: 'rejected',
      reason: 'invalid_coordinates',
      message: message('gps', { ...gps, lon: 'NaN' }),
    },
    {
      label: 'an unparseable timestamp',
      status: 'rejected',
      reason: 'invalid_timestamp',
      message: message('gps', { ...gps, ts: 'yesterday at noon' }),
    },
    {
      label: 'a timestamp an hour in the future',
      status: 'rejected',
      reason: 'future_timestamp',
      message: message('gps', { ...gps, ts: new Date(now + 3_600_000).toISOString() }),
    },
    {
      label: 'a timestamp older than the retention window',
      status: 'rejected',
      reason: 'stale_timestamp',
      message: message('gps', { ...gps, ts: new Date(now - 500 * 86_400_000).toISOString() }),
    },
    {
      label: 'an unregistered device',
      status: 'rejected',
      reason: 'unknown_device',
      message: { ...message('gps', gps), deviceId: unknownDeviceId },
    },
    {
      label: 'an unknown message type',
      status: 'rejected',
      reason: 'unknown_message_type',
      message: message('gps', gps, { topic: `${TOPIC_PREFIX}/${deviceId}/temperature` }),
    },
    {
      label: 'a topic outside the contract',
      status: 'rejected',
      reason: 'unknown_topic',
      message: message('gps', gps, { topic: `${deviceTopic(deviceId, 'gps')}/extra` }),
    },
    { label: 'an empty batch', status: 'rejected', reason: 'empty_batch', message: message('batch', []) },
    {
      label: 'a batch with one bad entry among good ones',
      status: 'partial',
      reason: 'invalid_coordinates',
      message: message('batch', [
        { type: 'gps', ...gps, ts: new Date(now - 2000).toISOString() },
        { type: 'gps', ...gps, ts: new Date(now - 1000).toISOString(), lat: 95 },
        { type: 'heartbeat', ts: new Date(now - 1000).toISOString(), batteryV: 25.1 },
      ]),
    },
  ];
}
