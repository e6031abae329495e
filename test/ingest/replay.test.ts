import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOutbox } from '@gantry/db';
import { provisioning } from '@gantry/api';
import { createPublisher, publishMessages, type Publisher, type SimulatedMessage } from '@gantry/simulator';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { startTestBroker, type TestBroker } from '../support/broker.ts';
import {
  countOf,
  provisionFleet,
  startTestIngest,
  uniqueDeviceIds,
  waitFor,
  type TestIngest,
} from '../support/ingest.ts';
import { nodeArguments } from '../support/processes.ts';

const run = promisify(execFile);

let db: TestDatabase;
let broker: TestBroker;
let ingest: TestIngest;
let publisher: Publisher;

beforeAll(async () => {
  db = await createTestDatabase('ingest_replay');
  broker = await startTestBroker();
  ingest = await startTestIngest({ pool: db.pool, databaseUrl: db.url, mqttUrl: broker.url });
  publisher = await createPublisher({ mqttUrl: broker.url });
});

afterAll(async () => {
  await publisher?.close();
  await ingest?.stop();
  await broker?.stop();
  await db?.drop();
});

async function replay(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, nodeArguments('cli', 'replay', ...args), {
      env: { ...process.env, GANTRY_DATABASE_URL: db.url, GANTRY_LOG_LEVEL: 'silent' },
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

describe('gantry replay', () => {
  it('stores the messages of a device registered after they arrived, once, however often it runs', async () => {
    const [late, other] = uniqueDeviceIds(2, 'replay');
    const started = new Date(Date.now() - 1000);
    const now = Date.now();
    const messages: SimulatedMessage[] = [
      ...Array.from({ length: 5 }, (_, index) => ({
        deviceId: late!,
        type: 'gps' as const,
        ts: 0,
        payload: { ts: new Date(now - 60_000 + index * 1000).toISOString(), lat: 51.95 + index * 0.0001, lon: 4.05 },
      })),
      {
        deviceId: late!,
        type: 'batch',
        ts: 0,
        payload: [
          { type: 'hourmeter', ts: now - 30_000, value: 1000 },
          { type: 'adcin', ts: now - 29_000, state: 'on' },
        ],
      },
      { deviceId: late!, type: 'gps', ts: 0, payload: { ts: new Date(now).toISOString(), lat: 91, lon: 4.05 } },
      { deviceId: other!, type: 'gps', ts: 0, payload: { ts: new Date(now).toISOString(), lat: 51.9, lon: 4.0 } },
    ];
    await publishMessages(publisher, messages);
    await waitFor(
      () => countOf(db.pool, 'SELECT count(*) FROM device_messages'),
      (count) => count >= messages.length,
      30_000,
      'bronze rows',
    );
    expect(await countOf(db.pool, `SELECT count(*) FROM device_messages WHERE error = 'unknown_device'`)).toBe(7);

    const fleet = await provisionFleet(db.pool, [late!]);
    const to = new Date(Date.now() + 1000).toISOString();
    const first = await replay(['--from', started.toISOString(), '--to', to, '--device', late!]);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toMatch(/messages re-parsed: 7/);
    expect(first.stdout).toMatch(/readings added: +7/);

    const device = fleet.byDeviceId.get(late!)!;
    expect(await countOf(db.pool, 'SELECT count(*) FROM telemetry_readings WHERE device_id = $1', [device.id])).toBe(7);
    const { rows } = await db.pool.query(
      `SELECT status, error, reading_count, device_id FROM device_messages WHERE device_key = $1 ORDER BY id`,
      [late],
    );
    expect(rows.map((row) => [row.status, row.error, row.reading_count])).toEqual([
      ...Array.from({ length: 5 }, () => ['accepted', null, 1]),
      ['accepted', null, 2],
      // Still out of range: replay does not make bad data good.
      ['rejected', 'invalid_coordinates', 0],
    ]);
    expect(rows.every((row) => row.device_id === device.id)).toBe(true);
    const { rows: queue } = await db.pool.query('SELECT dirty_from FROM derivation_queue WHERE device_id = $1', [
      device.id,
    ]);
    expect(queue[0].dirty_from.getTime()).toBe(now - 60_000);
    // The other device stays unknown: --device limited the replay.
    expect(
      await countOf(
        db.pool,
        `SELECT count(*) FROM device_messages WHERE device_key = $1 AND error = 'unknown_device'`,
        [other],
      ),
    ).toBe(1);

    const again = await replay(['--from', started.toISOString(), '--to', to, '--device', late!, '--all']);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toMatch(/readings added: +0/);
    expect(again.stdout).toMatch(/status changed: +0/);
    expect(await countOf(db.pool, 'SELECT count(*) FROM telemetry_readings WHERE device_id = $1', [device.id])).toBe(7);
    expect(
      await countOf(db.pool, `SELECT sum(reading_count) AS count FROM device_messages WHERE device_key = $1`, [late]),
    ).toBe(7);
  });

  it('rebuilds lost silver from the batch rows of bronze, and moves a message of a since disabled device to its own row', async () => {
    const [kept, disabled] = uniqueDeviceIds(2, 'replay-rebuild');
    const fleet = await provisionFleet(db.pool, [kept!, disabled!], 'Replay rebuild');
    const started = new Date(Date.now() - 1000);
    const now = Date.now();
    const messages: SimulatedMessage[] = [kept!, disabled!].flatMap((deviceId) =>
      Array.from({ length: 4 }, (_, index) => ({
        deviceId,
        type: 'gps' as const,
        ts: 0,
        payload: { ts: new Date(now - 40_000 + index * 1000).toISOString(), lat: 51.95, lon: 4.05 + index * 0.0001 },
      })),
    );
    const before = await countOf(db.pool, 'SELECT count(*) FROM device_messages');
    await publishMessages(publisher, messages);
    await waitFor(
      () => countOf(db.pool, 'SELECT count(*) FROM device_messages'),
      (count) => count >= before + messages.length,
      30_000,
      'bronze rows',
    );
    const ids = fleet.devices.map((device) => device.id);
    // Stored messages live in batch rows, not one row each.
    expect(
      await countOf(db.pool, 'SELECT count(*) FROM device_message_rows WHERE device_id = ANY($1::uuid[])', [ids]),
    ).toBe(0);
    expect(
      await countOf(db.pool, 'SELECT count(*) FROM telemetry_readings WHERE device_id = ANY($1::uuid[])', [ids]),
    ).toBe(8);

    // Silver of one device is lost; the other device is disabled since.
    const keptDevice = fleet.byDeviceId.get(kept!)!;
    await db.pool.query('DELETE FROM telemetry_readings WHERE device_id = $1', [keptDevice.id]);
    await provisioning.updateDevice(
      { pool: db.pool, outbox: createOutbox({ maxAttempts: 3 }) },
      fleet.tenantId,
      fleet.byDeviceId.get(disabled!)!.id,
      { enabled: false },
    );
    const to = new Date(Date.now() + 1000).toISOString();
    for (const deviceId of [kept!, disabled!]) {
      const result = await replay(['--from', started.toISOString(), '--to', to, '--device', deviceId, '--all']);
      expect(result.code, result.stderr).toBe(0);
    }
    expect(
      await countOf(db.pool, 'SELECT count(*) FROM telemetry_readings WHERE device_id = $1', [keptDevice.id]),
    ).toBe(4);
    const { rows } = await db.pool.query(
      `SELECT device_key, status, error, reading_count FROM device_messages WHERE device_key = ANY($1::text[]) ORDER BY id`,
      [[kept, disabled]],
    );
    expect(rows.filter((row) => row.device_key === kept).map((row) => [row.status, row.reading_count])).toEqual(
      Array.from({ length: 4 }, () => ['accepted', 1]),
    );
    expect(rows.filter((row) => row.device_key === disabled).map((row) => [row.status, row.error])).toEqual(
      Array.from({ length: 4 }, () => ['rejected', 'device_disabled']),
    );
    expect(
      await countOf(db.pool, `SELECT count(*) FROM device_message_rows WHERE device_key = $1 AND status = 'rejected'`, [
        disabled,
      ]),
    ).toBe(4);
  }, 180_000);

  it('refuses a bad range with a usage message naming the option', async () => {
    const result = await replay(['--from', '2024-02-01', '--to', '2024-01-01']);
    expect(result.stderr).toMatch(/--from must be before --to/);
    expect(result.stdout).not.toMatch(/re-parsed/);
    const missing = await replay(['--to', '2024-01-01']);
    expect(missing.stderr).toMatch(/--from is required/);
  });

  it('leaves the bronze rows of a disabled device rejected', async () => {
    const [deviceId] = uniqueDeviceIds(1, 'replay-disabled');
    const fleet = await provisionFleet(db.pool, [deviceId!], 'Replay disabled');
    const device = fleet.byDeviceId.get(deviceId!)!;
    await provisioning.updateDevice(
      { pool: db.pool, outbox: createOutbox({ maxAttempts: 3 }) },
      fleet.tenantId,
      device.id,
      { enabled: false },
    );
    const before = await countOf(db.pool, 'SELECT count(*) FROM device_messages');
    await publishMessages(publisher, [
      { deviceId: deviceId!, type: 'gps', ts: 0, payload: { ts: new Date().toISOString(), lat: 51.9, lon: 4.0 } },
    ]);
    await waitFor(
      () => countOf(db.pool, 'SELECT count(*) FROM device_messages'),
      (count) => count > before,
      30_000,
      'bronze row',
    );
    const result = await replay([
      '--from',
      new Date(Date.now() - 60_000).toISOString(),
      '--to',
      new Date(Date.now() + 1000).toISOString(),
      '--device',
      deviceId!,
    ]);
    expect(result.code, result.stderr).toBe(0);
    expect(await countOf(db.pool, 'SELECT count(*) FROM telemetry_readings WHERE device_id = $1', [device.id])).toBe(0);
    const { rows } = await db.pool.query('SELECT status, error FROM device_messages WHERE device_key = $1', [deviceId]);
    expect(rows).toEqual([{ status: 'rejected', error: 'device_disabled' }]);
  });
});
