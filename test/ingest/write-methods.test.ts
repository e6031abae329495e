import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withTransaction } from '@gantry/db';
import { parseMessage } from '@gantry/ingest';
import { writeBatch, type WriteMethod } from '../../services/ingest/src/storage/write-batch.ts';
import { availableStorageModes, createTestDatabase, type TestDatabase } from '../support/database.ts';
import { provisionFleet, uniqueDeviceIds } from '../support/ingest.ts';

/** Text that breaks naive array-literal or COPY encoding. */
const awkward = [
  'say "hi"',
  'back\\slash',
  'tab\there',
  'new\nline',
  'NULL',
  '{braces,comma}',
  'ünïcødé ✓',
  ' padded ',
];

describe.each(availableStorageModes())('bulk write methods (%s mode)', (mode) => {
  let db: TestDatabase;
  let ids: string[];

  beforeAll(async () => {
    db = await createTestDatabase(`ingest_write_${mode}`, mode);
    ids = uniqueDeviceIds(3, 'write');
    await provisionFleet(db.pool, ids);
  });
  afterAll(async () => {
    await db?.drop();
  });

  function messages(deviceId: string, receivedAt: number) {
    const ts = (index: number) => new Date(receivedAt - 60_000 + index * 1000).toISOString();
    const payloads: Array<[string, unknown]> = [
      ...awkward.map((text, index): [string, unknown] => [
        'identifier',
        { ts: ts(index), identifier: text, event: 'logout' },
      ]),
      ...awkward.map((text, index): [string, unknown] => [
        'heartbeat',
        { ts: ts(index), firmware: text, batteryV: 24.5, rssi: -80.25, uptimeS: 9_007_199_254_740_991 },
      ]),
      [
        'gps',
        {
          ts: ts(20),
          lat: -33.8688197,
          lon: 151.2092955,
          speedKmh: 0.1,
          heading: 359.9,
          hdop: 5,
          satellites: 0,
          fix: false,
          altitudeM: -12.5,
          ignition: false,
        },
      ],
      ['imu', { ts: ts(21), peakG: 0, samples: 2_147_483_647, windowMs: 0 }],
      ['adcin', { ts: ts(22), state: 'off', raw: -0.001 }],
      ['gps', { ts: ts(23), lat: 91, lon: 0 }],
    ];
    return payloads.map(([type, payload]) =>
      parseMessage(
        { topic: `gantry/v1/devices/${deviceId}/${type}`, payload: Buffer.from(JSON.stringify(payload)), receivedAt },
        { maxPayloadBytes: 65536, bounds: { maxFutureMs: 300_000, maxAgeMs: 400 * 86_400_000, now: receivedAt } },
      ),
    );
  }

  async function stored(deviceId: string) {
    const readings = await db.pool.query(
      `SELECT r.type, extract(epoch FROM r.ts - min(r.ts) OVER ()) AS offset_s, r.ignition, r.latitude, r.longitude, r.speed_kmh, r.heading, r.hdop,
              r.satellites, r.fix, r.altitude_m, r.gps_valid, r.adc_on, r.adc_raw, r.hourmeter, r.peak_g, r.imu_samples, r.imu_window_ms,
              r.identifier, r.identifier_event, r.battery_v, r.rssi, r.firmware, r.uptime_s
       FROM telemetry_readings r JOIN devices d ON d.id = r.device_id WHERE d.device_id = $1 ORDER BY r.ts, r.type`,
      [deviceId],
    );
    const bronze = await db.pool.query(
      `SELECT message_type, status, error, reading_count, payload_size, convert_from(payload, 'UTF8') AS payload
       FROM device_messages WHERE device_key = $1 ORDER BY id`,
      [deviceId],
    );
    return {
      readings: readings.rows,
      bronze: bronze.rows.map((row) => ({ ...row, payload: JSON.parse(row.payload) })),
    };
  }

  it('store the same values through unnest and through COPY, awkward text included', async () => {
    const results = [];
    const receivedAt = Date.now();
    for (const [index, method] of (['unnest', 'copy'] as WriteMethod[]).entries()) {
      const batch = messages(ids[index]!, receivedAt);
      await withTransaction(db.pool, (client) => writeBatch(client, batch, { method, oversizedPayloadBytes: 4096 }));
      results.push(await stored(ids[index]!));
      // Bronze gives back every payload byte for byte, escapes and non-ASCII included (the batch row's text[] and the rejected row's bytea).
      const { rows } = await db.pool.query<{ payload: Buffer; payload_size: number }>(
        `SELECT payload, payload_size FROM device_messages WHERE device_key = $1 ORDER BY id`,
        [ids[index]!],
      );
      expect(rows.map((row) => row.payload.toString('hex'))).toEqual(batch.map((m) => m.raw.payload.toString('hex')));
      expect(rows.map((row) => row.payload_size)).toEqual(batch.map((m) => m.raw.payload.length));
    }
    const [unnest, copy] = results;
    expect(unnest!.readings).toHaveLength(awkward.length * 2 + 3);
    expect(copy).toEqual(unnest);
    expect(unnest!.readings.filter((row) => row.type === 'identifier').map((row) => row.identifier)).toEqual(awkward);
    expect(unnest!.readings.filter((row) => row.type === 'heartbeat').map((row) => row.firmware)).toEqual(awkward);
    expect(unnest!.readings.find((row) => row.type === 'heartbeat')).toMatchObject({
      uptime_s: 9_007_199_254_740_991,
      rssi: -80.25,
    });
    expect(unnest!.readings.find((row) => row.type === 'imu')).toMatchObject({ imu_samples: 2_147_483_647, peak_g: 0 });
    expect(unnest!.readings.find((row) => row.type === 'gps')).toMatchObject({
      latitude: -33.8688197,
      longitude: 151.2092955,
      fix: false,
      gps_valid: false,
      satellites: 0,
    });
    expect(unnest!.bronze.at(-1)).toMatchObject({
      status: 'rejected',
      error: 'invalid_coordinates',
      payload: { lat: 91 },
    });
    expect(unnest!.bronze.filter((row) => row.status === 'accepted')).toHaveLength(awkward.length * 2 + 3);
  });

  it('COPY stores only the new readings of a batch that repeats stored ones, copying at once and after a duplicate probing first', async () => {
    const deviceId = ids[2]!;
    const receivedAt = Date.now();
    const gps = (second: number) =>
      parseMessage(
        {
          topic: `gantry/v1/devices/${deviceId}/gps`,
          payload: Buffer.from(
            JSON.stringify({ ts: new Date(receivedAt - 600_000 + second * 1000).toISOString(), lat: 51.9, lon: 4.05 }),
          ),
          receivedAt,
        },
        { maxPayloadBytes: 65536, bounds: { maxFutureMs: 300_000, maxAgeMs: 400 * 86_400_000, now: receivedAt } },
      );
    const write = (seconds: number[]) =>
      withTransaction(db.pool, (client) =>
        writeBatch(client, seconds.map(gps), { method: 'copy', oversizedPayloadBytes: 4096 }),
      );
    const range = (from: number, to: number) => Array.from({ length: to - from }, (_, index) => from + index);

    // Nothing stored yet: copied at once.
    expect((await write(range(0, 10))).storedReadings).toBe(10);
    // Half of it stored: the COPY meets a duplicate, rolls back and the batch probes.
    const second = await write(range(5, 15));
    expect(second.storedReadings).toBe(5);
    expect(second.outcomes.map((outcome) => outcome.status)).toEqual([
      ...Array(5).fill('duplicate'),
      ...Array(5).fill('accepted'),
    ]);
    // Right after a duplicate the lookup goes first.
    const third = await write(range(12, 20));
    expect(third.storedReadings).toBe(5);
    expect(third.outcomes.filter((outcome) => outcome.status === 'duplicate')).toHaveLength(3);

    const { rows } = await db.pool.query<{ readings: number; distinct_ts: number }>(
      `SELECT count(*)::int AS readings, count(DISTINCT r.ts)::int AS distinct_ts
         FROM telemetry_readings r JOIN devices d ON d.id = r.device_id WHERE d.device_id = $1`,
      [deviceId],
    );
    expect(rows[0]).toEqual({ readings: 20, distinct_ts: 20 });
    const bronze = await db.pool.query<{ status: string; n: number; readings: number }>(
      `SELECT status, count(*)::int AS n, sum(reading_count)::int AS readings FROM device_messages
        WHERE device_key = $1 GROUP BY status ORDER BY status`,
      [deviceId],
    );
    expect(bronze.rows).toEqual([
      { status: 'accepted', n: 20, readings: 20 },
      { status: 'duplicate', n: 8, readings: 0 },
    ]);
  });
});
