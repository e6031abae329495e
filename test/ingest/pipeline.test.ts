import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { metricsRegistry as register } from '@gantry/ingest';
import { createOutbox } from '@gantry/db';
import { provisioning } from '@gantry/api';
import {
  badMessageCases,
  createPublisher,
  publishMessages,
  toBatches,
  MachineScript,
  type Publisher,
  type SimulatedMessage,
} from '@gantry/simulator';
import { availableStorageModes, createTestDatabase, type TestDatabase } from '../support/database.ts';
import { startTestBroker, type TestBroker } from '../support/broker.ts';
import {
  countOf,
  provisionFleet,
  startTestIngest,
  uniqueDeviceIds,
  waitFor,
  type ProvisionedFleet,
  type TestIngest,
} from '../support/ingest.ts';

const HOUR = 3_600_000;

describe.each(availableStorageModes())('ingest pipeline (%s mode)', (mode) => {
  let db: TestDatabase;
  let broker: TestBroker;
  let ingest: TestIngest;
  let publisher: Publisher;
  let fleet: ProvisionedFleet;
  let ids: string[];
  let published = 0;

  /** Publishes and waits until bronze holds a row for every message (it always does, whatever the outcome). */
  async function deliver(messages: SimulatedMessage[]): Promise<void> {
    await publishMessages(publisher, messages);
    published += messages.length;
    await waitFor(
      () => countOf(db.pool, 'SELECT count(*) FROM device_messages'),
      (count) => count >= published,
      30_000,
      'bronze rows',
    );
  }

  async function silver(deviceId: string, type: string) {
    const { rows } = await db.pool.query(
      `SELECT r.*, extract(epoch FROM r.ts) * 1000 AS ts_ms FROM telemetry_readings r JOIN devices d ON d.id = r.device_id
       WHERE d.device_id = $1 AND r.type = $2 ORDER BY r.ts`,
      [deviceId, type],
    );
    return rows;
  }

  async function bronze(where: string, params: unknown[]) {
    const { rows } = await db.pool.query(`SELECT * FROM device_messages WHERE ${where} ORDER BY id`, params);
    return rows;
  }

  beforeAll(async () => {
    db = await createTestDatabase(`ingest_pipeline_${mode}`, mode);
    broker = await startTestBroker();
    ids = uniqueDeviceIds(6, 'pipe');
    fleet = await provisionFleet(db.pool, ids);
    ingest = await startTestIngest({ pool: db.pool, databaseUrl: db.url, mqttUrl: broker.url, storageMode: mode });
    publisher = await createPublisher({ mqttUrl: broker.url });
  });

  afterAll(async () => {
    await publisher?.close();
    await ingest?.stop();
    await broker?.stop();
    await db?.drop();
  });

  it('stores one reading of every message type in silver with the values the device sent', async () => {
    const deviceId = ids[0]!;
    const t = Date.now() - 60_000;
    const at = (offset: number) => new Date(t + offset).toISOString();
    await deliver([
      {
        deviceId,
        type: 'gps',
        ts: t,
        payload: {
          ts: at(0),
          lat: 51.9541234,
          lon: 4.0531234,
          speedKmh: 12.5,
          heading: 271.5,
          hdop: 0.9,
          satellites: 11,
          altitudeM: 4.5,
          ignition: true,
        },
      },
      { deviceId, type: 'adcin', ts: t, payload: { ts: at(1000), state: 'on', raw: 23.8 } },
      { deviceId, type: 'hourmeter', ts: t, payload: { ts: t + 2000, value: 36_001_234 } },
      { deviceId, type: 'imu', ts: t, payload: { ts: at(3000), peakG: 2.75, samples: 200, windowMs: 2000 } },
      { deviceId, type: 'identifier', ts: t, payload: { ts: at(4000), identifier: 'OP-007' } },
      {
        deviceId,
        type: 'heartbeat',
        ts: t,
        payload: { ts: at(5000), ignition: false, batteryV: 26.4, rssi: -71, firmware: 'fw-2.1.0', uptimeS: 86_400 },
      },
    ]);
    const device = fleet.byDeviceId.get(deviceId)!;

    const [gps] = await silver(deviceId, 'gps');
    expect(gps).toMatchObject({
      tenant_id: fleet.tenantId,
      asset_id: device.assetId,
      latitude: 51.9541234,
      longitude: 4.0531234,
      heading: 271.5,
      satellites: 11,
      fix: true,
      gps_valid: true,
      ignition: true,
    });
    expect(gps.speed_kmh).toBeCloseTo(12.5, 5);
    expect(gps.hdop).toBeCloseTo(0.9, 5);
    expect(gps.altitude_m).toBeCloseTo(4.5, 5);
    expect(gps.ts.getTime()).toBe(t);

    const [adcin] = await silver(deviceId, 'adcin');
    expect(adcin).toMatchObject({ adc_on: true, latitude: null });
    expect(adcin.adc_raw).toBeCloseTo(23.8, 4);
    const [hourmeter] = await silver(deviceId, 'hourmeter');
    expect(hourmeter).toMatchObject({ hourmeter: 36_001_234 });
    expect(hourmeter.ts.getTime()).toBe(t + 2000);
    const [imu] = await silver(deviceId, 'imu');
    expect(imu).toMatchObject({ imu_samples: 200, imu_window_ms: 2000 });
    expect(imu.peak_g).toBeCloseTo(2.75, 5);
    const [identifier] = await silver(deviceId, 'identifier');
    expect(identifier).toMatchObject({ identifier: 'OP-007', identifier_event: 'login' });
    const [heartbeat] = await silver(deviceId, 'heartbeat');
    expect(heartbeat).toMatchObject({ ignition: false, rssi: -71, firmware: 'fw-2.1.0', uptime_s: 86_400 });
    expect(heartbeat.battery_v).toBeCloseTo(26.4, 4);

    const messages = await bronze('device_key = $1', [deviceId]);
    expect(messages.map((row) => [row.message_type, row.status, row.reading_count, row.error])).toEqual([
      ['gps', 'accepted', 1, null],
      ['adcin', 'accepted', 1, null],
      ['hourmeter', 'accepted', 1, null],
      ['imu', 'accepted', 1, null],
      ['identifier', 'accepted', 1, null],
      ['heartbeat', 'accepted', 1, null],
    ]);
    expect(messages[0]).toMatchObject({ device_id: device.id, tenant_id: fleet.tenantId, asset_id: device.assetId });
    expect(JSON.parse(messages[0].payload.toString('utf8'))).toMatchObject({ lat: 51.9541234 });

    const { rows: state } = await db.pool.query('SELECT * FROM device_state WHERE device_id = $1', [device.id]);
    expect(state[0]).toMatchObject({
      latitude: 51.9541234,
      longitude: 4.0531234,
      gps_valid: true,
      adc_on: true,
      hourmeter: 36_001_234,
      identifier: 'OP-007',
      identifier_event: 'login',
      ignition: false,
      firmware: 'fw-2.1.0',
      last_message_type: 'heartbeat',
    });
    expect(state[0].last_message_at.getTime()).toBe(t + 5000);
    expect(state[0].ignition_ts.getTime()).toBe(t + 5000);

    const { rows: queue } = await db.pool.query('SELECT * FROM derivation_queue WHERE device_id = $1', [device.id]);
    expect(queue[0].dirty_from.getTime()).toBe(t);
    expect(queue[0].tenant_id).toBe(fleet.tenantId);
  });

  it('marks fixes without a fix, with hdop over 5 or at (0, 0) as not valid, and keeps the last valid position', async () => {
    const deviceId = ids[1]!;
    const script = new MachineScript({
      deviceId,
      start: Date.now() - 10 * 60_000,
      position: { lat: 51.955, lon: 4.05 },
    })
      .ignitionOn()
      .idle(10)
      .badFix('no_fix')
      .idle(5)
      .badFix('poor_hdop')
      .idle(5)
      .badFix('null_island');
    await deliver(script.messages());
    const fixes = await silver(deviceId, 'gps');
    expect(fixes.length).toBe(script.truth().gpsFixes);
    expect(fixes.filter((row) => row.gps_valid).length).toBe(script.truth().validGpsFixes);
    expect(fixes.filter((row) => !row.gps_valid).map((row) => [row.fix, row.hdop, row.latitude])).toEqual([
      [false, expect.any(Number), 51.955],
      [true, 9.5, 51.955],
      [true, expect.any(Number), 0],
    ]);
    const device = fleet.byDeviceId.get(deviceId)!;
    const { rows } = await db.pool.query('SELECT latitude, gps_valid FROM device_state WHERE device_id = $1', [
      device.id,
    ]);
    expect(rows[0]).toEqual({ latitude: 51.955, gps_valid: true });
  });

  it("stores a batch upload of yesterday's readings and marks the device dirty from the earliest one", async () => {
    const deviceId = ids[2]!;
    const yesterday = Date.now() - 26 * HOUR;
    const script = new MachineScript({ deviceId, start: yesterday, position: { lat: 51.954, lon: 4.052 } })
      .ignitionOn()
      .login('OP-003')
      .drive({ lat: 51.956, lon: 4.055 }, 15)
      .lift()
      .drive({ lat: 51.953, lon: 4.051 }, 12)
      .drop()
      .ignitionOff();
    const readings = script.messages();
    const batches = toBatches(readings, { size: 25, uploadAt: Date.now() });
    expect(batches.length).toBeGreaterThan(1);
    await deliver(batches);

    const device = fleet.byDeviceId.get(deviceId)!;
    expect(await countOf(db.pool, 'SELECT count(*) FROM telemetry_readings WHERE device_id = $1', [device.id])).toBe(
      readings.length,
    );
    const rows = await bronze('device_key = $1', [deviceId]);
    expect(rows.every((row) => row.status === 'accepted' && row.message_type === 'batch')).toBe(true);
    expect(rows.reduce((sum, row) => sum + row.reading_count, 0)).toBe(readings.length);
    const { rows: queue } = await db.pool.query('SELECT dirty_from FROM derivation_queue WHERE device_id = $1', [
      device.id,
    ]);
    expect(queue[0].dirty_from.getTime()).toBe(yesterday);
    const { rows: cycles } = await db.pool.query(
      `SELECT count(*)::int AS lifts FROM telemetry_readings WHERE device_id = $1 AND type = 'adcin' AND adc_on`,
      [device.id],
    );
    expect(cycles[0].lifts).toBe(script.truth().containerCycleCount);
  });

  it('stores a resent or redelivered reading once, and records the copies in bronze as duplicates', async () => {
    const deviceId = ids[3]!;
    const ts = new Date(Date.now() - 30_000).toISOString();
    const copy: SimulatedMessage = { deviceId, type: 'gps', ts: 0, payload: { ts, lat: 51.95, lon: 4.05 } };
    await deliver([copy, copy]);
    await deliver([copy]);
    // The same reading inside a batch is a duplicate too.
    await deliver([{ deviceId, type: 'batch', ts: 0, payload: [{ type: 'gps', ts, lat: 51.95, lon: 4.05 }] }]);
    expect(await silver(deviceId, 'gps')).toHaveLength(1);
    const rows = await bronze('device_key = $1', [deviceId]);
    expect(rows.map((row) => [row.status, row.reading_count])).toEqual([
      ['accepted', 1],
      ['duplicate', 0],
      ['duplicate', 0],
      ['duplicate', 0],
    ]);
  });

  it('keeps every kind of bad input in bronze with its reason and stores nothing of it in silver', async () => {
    const deviceId = ids[4]!;
    const cases = badMessageCases(deviceId, Date.now());
    await deliver(cases.map((entry) => entry.message));
    const rows = await bronze(`topic LIKE '%' || $1 || '%'`, [deviceId]);
    expect(rows).toHaveLength(cases.length);
    for (const entry of cases) {
      const topic = entry.message.topic ?? `gantry/v1/devices/${entry.message.deviceId}/${entry.message.type}`;
      const row = rows.find(
        (candidate) =>
          candidate.topic === topic && (candidate.error === entry.reason || entry.message.topic !== undefined),
      );
      expect(row, entry.label).toBeDefined();
      expect([row.status, row.error], entry.label).toEqual([entry.status, entry.reason]);
      expect(row.error_detail, entry.label).toEqual(expect.any(String));
    }
    const oversized = rows.find((row) => row.error === 'payload_too_large');
    expect(oversized.payload_size).toBeGreaterThan(65_536);
    expect(oversized.payload.length).toBe(4096);
    // A lone surrogate escape is kept as the bytes that came, its field named.
    const surrogate = rows.find((row) => row.error === 'invalid_utf8' && row.message_type === 'identifier');
    expect(surrogate.error_detail).toMatch(/^identifier: a lone surrogate escape/);
    expect(surrogate.payload.toString('utf8')).toContain('"identifier":"OP-\\ud800"');
    const coordinates = rows.find((row) => row.error === 'invalid_coordinates' && row.status === 'rejected');
    expect(coordinates.error_detail).toMatch(/^lat|^lon/);
    // Only the two good entries of the partial batch reach silver.
    const device = fleet.byDeviceId.get(deviceId)!;
    const { rows: stored } = await db.pool.query(
      'SELECT type FROM telemetry_readings WHERE device_id = $1 ORDER BY type',
      [device.id],
    );
    expect(stored.map((row) => row.type)).toEqual(['gps', 'heartbeat']);
    const partial = rows.find((row) => row.status === 'partial');
    expect(partial).toMatchObject({ reading_count: 2 });
    expect(partial.error_detail).toMatch(/^1 of 3 entries rejected; entry 1: lat/);
    const unknown = rows.find((row) => row.error === 'unknown_device');
    expect(unknown).toMatchObject({ device_id: null, tenant_id: null });
  });

  it('keeps messages of a disabled device in bronze only', async () => {
    const deviceId = ids[5]!;
    const device = fleet.byDeviceId.get(deviceId)!;
    await provisioning.updateDevice(
      { pool: db.pool, outbox: createOutbox({ maxAttempts: 3 }) },
      fleet.tenantId,
      device.id,
      { enabled: false },
    );
    await deliver([{ deviceId, type: 'gps', ts: 0, payload: { ts: new Date().toISOString(), lat: 51.95, lon: 4.05 } }]);
    const rows = await bronze('device_key = $1', [deviceId]);
    expect(rows.map((row) => [row.status, row.error, row.device_id])).toEqual([
      ['rejected', 'device_disabled', device.id],
    ]);
    expect(await countOf(db.pool, 'SELECT count(*) FROM telemetry_readings WHERE device_id = $1', [device.id])).toBe(0);
    expect(await countOf(db.pool, 'SELECT count(*) FROM derivation_queue WHERE device_id = $1', [device.id])).toBe(0);
  });

  it('keeps the newest value per field group in device_state when older readings arrive late', async () => {
    const deviceId = ids[0]!;
    const device = fleet.byDeviceId.get(deviceId)!;
    const now = Date.now();
    await deliver([
      { deviceId, type: 'adcin', ts: 0, payload: { ts: new Date(now - 1000).toISOString(), state: 'off' } },
    ]);
    await deliver([
      { deviceId, type: 'adcin', ts: 0, payload: { ts: new Date(now - 5 * HOUR).toISOString(), state: 'on' } },
    ]);
    const { rows } = await db.pool.query('SELECT adc_on, adc_ts FROM device_state WHERE device_id = $1', [device.id]);
    expect(rows[0].adc_on).toBe(false);
    expect(rows[0].adc_ts.getTime()).toBe(now - 1000);
    const { rows: queue } = await db.pool.query('SELECT dirty_from FROM derivation_queue WHERE device_id = $1', [
      device.id,
    ]);
    expect(queue[0].dirty_from.getTime()).toBeLessThanOrEqual(now - 5 * HOUR);
  });

  it('counts messages by outcome and rejections by reason in the metrics registry', async () => {
    const text = await register.metrics();
    expect(text).toMatch(/gantry_ingest_messages_rejected_total\{reason="invalid_json"\} [1-9]/);
    expect(text).toMatch(/gantry_ingest_messages_stored_total\{status="duplicate"\} [1-9]/);
    expect(text).toMatch(/gantry_ingest_commit_seconds_count [1-9]/);
    expect(text).toMatch(/gantry_ingest_lag_seconds_count [1-9]/);
    expect(ingest.isConnected()).toBe(true);
  });
});
