import { describe, expect, it } from 'vitest';
import { readingPayloadSchemas, readingTypes, type ReadingType } from '@gantry/contracts';
import { fastReading } from './fast-validation.ts';

const ts = '2026-03-10T11:59:58.250Z';

/** A valid payload of each type with every optional field set. */
const full: Record<ReadingType, Record<string, unknown>> = {
  gps: {
    ts,
    ignition: true,
    lat: 51.95,
    lon: 4.05,
    speedKmh: 7,
    heading: 90,
    hdop: 0.9,
    satellites: 9,
    fix: false,
    altitudeM: 3,
  },
  adcin: { ts, ignition: false, state: 'on', raw: 12.5 },
  hourmeter: { ts, value: 36_000_000 },
  imu: { ts, peakG: 1.25, samples: 200, windowMs: 2000 },
  identifier: { ts, identifier: 'OP-001', event: 'logout' },
  heartbeat: { ts, batteryV: 24.4, rssi: -71, firmware: 'sim-1.4.2', uptimeS: 1234 },
};

/** Values around every bound of the contract, of every JSON kind. */
const awkward: unknown[] = [
  undefined,
  null,
  true,
  false,
  0,
  -0,
  0.5,
  1,
  1.5,
  -1,
  -0.001,
  5,
  63,
  64,
  65,
  -90,
  -90.0001,
  90,
  90.0001,
  -180,
  -180.5,
  180,
  180.5,
  -200,
  -200.5,
  200,
  200.5,
  255,
  255.5,
  256,
  360,
  360.1,
  400,
  400.1,
  -1000,
  -1000.5,
  1000,
  1000.5,
  20000,
  20000.5,
  2_147_483_647,
  2_147_483_648,
  Number.MAX_SAFE_INTEGER,
  Number.MAX_SAFE_INTEGER + 2,
  253_402_300_799_999,
  253_402_300_800_000,
  1_773_143_998_250,
  1_773_143_998_250.7,
  '',
  'on',
  'off',
  'ON',
  'login',
  'logout',
  'x'.repeat(64),
  'x'.repeat(65),
  'OP\u00001',
  '2026-03-10T11:59:58Z',
  '2026-03-10 11:59:58.123456+02:00',
  '2026-02-30T00:00:00Z',
  '2026-03-10T24:00:00Z',
  'NaN',
  '17',
  [],
  {},
];

function zodReading(type: ReadingType, payload: Record<string, unknown>) {
  const parsed = readingPayloadSchemas[type].safeParse(payload);
  return parsed.success ? { type, ...parsed.data } : undefined;
}

describe('fast validation', () => {
  it('accepts a full and a minimal payload of every type with what zod returns', () => {
    for (const type of readingTypes) {
      const minimal = Object.fromEntries(
        Object.entries(full[type]).filter(([key]) => readingPayloadSchemas[type].shape[key as never] !== undefined),
      );
      for (const payload of [full[type], { ...minimal, unknownField: 1 }]) {
        const fast = fastReading(type, payload);
        expect(fast).toBeDefined();
        expect(fast).toStrictEqual(zodReading(type, payload));
      }
    }
    expect(fastReading('gps', { ts, lat: 1, lon: 2 })).toStrictEqual({
      type: 'gps',
      ts: 1_773_143_998_250,
      lat: 1,
      lon: 2,
      fix: true,
    });
    expect(fastReading('identifier', { ts: 5.9, identifier: 'A' })).toStrictEqual({
      type: 'identifier',
      ts: 5,
      identifier: 'A',
      event: 'login',
    });
  });

  it('never accepts what zod rejects, nor returns anything but what zod returns, for any field set to any awkward value', () => {
    let accepted = 0;
    let rejected = 0;
    for (const type of readingTypes) {
      for (const field of Object.keys(readingPayloadSchemas[type].shape)) {
        for (const value of awkward) {
          const payload = { ...full[type], [field]: value };
          if (value === undefined) delete payload[field];
          const fast = fastReading(type, payload);
          const zod = zodReading(type, payload);
          if (fast === undefined) {
            rejected += 1;
            // zod decides; the fast path may only decline what it cannot vouch for.
            continue;
          }
          accepted += 1;
          expect({ type, field, value, reading: fast }).toStrictEqual({ type, field, value, reading: zod });
        }
      }
    }
    expect(accepted).toBeGreaterThan(100);
    expect(rejected).toBeGreaterThan(100);
  });
});
