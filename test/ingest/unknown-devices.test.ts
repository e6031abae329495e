import mqtt from 'mqtt';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { replayBronze } from '@gantry/ingest';
import { json, startTestApi, type TestApi } from '../support/api.ts';
import { startTestBroker, type TestBroker } from '../support/broker.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import {
  countOf,
  provisionFleet,
  startTestIngest,
  uniqueDeviceIds,
  waitFor,
  type ProvisionedFleet,
  type TestIngest,
} from '../support/ingest.ts';

// Devices nobody registered yet: ingest keeps their ids (bounded), the admin API lists
// them and registers one onto an asset, after which its messages are accepted.

const CAP = 1000;

let db: TestDatabase;
let broker: TestBroker;
let ingest: TestIngest;
let api: TestApi;
let client: mqtt.MqttClient;
let fleet: ProvisionedFleet;
let published = 0;

beforeAll(async () => {
  db = await createTestDatabase('unknown_devices');
  broker = await startTestBroker();
  ingest = await startTestIngest({ pool: db.pool, databaseUrl: db.url, mqttUrl: broker.url });
  api = await startTestApi(db.pool, db.url);
  client = await mqtt.connectAsync(broker.url, { clientId: `unknown-devices-test-${process.pid}` });
  fleet = await provisionFleet(db.pool, uniqueDeviceIds(1, 'known'), 'Unknown devices terminal');
});

afterAll(async () => {
  await client?.endAsync();
  await api?.close();
  await ingest?.stop();
  await broker?.stop();
  await db?.drop();
});

/** Publishes (QoS 1) and waits until bronze holds every message published so far. */
async function publish(messages: Array<{ topic: string; payload: string }>): Promise<void> {
  for (let start = 0; start < messages.length; start += 200) {
    await Promise.all(
      messages.slice(start, start + 200).map((m) => client.publishAsync(m.topic, m.payload, { qos: 1 })),
    );
  }
  published += messages.length;
  await waitFor(
    () => countOf(db.pool, 'SELECT count(*) FROM device_messages'),
    (count) => count >= published,
    60_000,
    'bronze rows',
  );
}

const gps = (deviceId: string, ts: Date, lat = 51.95, lon = 4.05) => ({
  topic: `gantry/v1/devices/${deviceId}/gps`,
  payload: JSON.stringify({ ts: ts.toISOString(), lat, lon, speedKmh: 3 }),
});

interface Listed {
  deviceId: string;
  firstSeenAt: string;
  lastSeenAt: string;
  messageCount: number;
  sample: { topic: string; payload: string; sizeBytes: number; truncated: boolean };
}

async function listed(query = ''): Promise<{ items: Listed[]; total: number }> {
  const response = await api.admin(`/unknown-devices${query}`);
  expect(response.status).toBe(200);
  return json(response);
}

describe('devices nobody registered yet', () => {
  const [tracker, garbled] = uniqueDeviceIds(2, 'new');

  it('lists ids seen on the broker but registered nowhere, with first/last seen, message count and the latest payload', async () => {
    const known = fleet.devices[0]!.deviceId;
    const now = Date.now();
    await publish([gps(tracker!, new Date(now - 3000), 51.1), gps(known, new Date(now - 2500))]);
    await publish([gps(tracker!, new Date(now - 2000), 51.2)]);
    await publish([
      gps(tracker!, new Date(now - 1000), 51.3),
      { topic: `gantry/v1/devices/${garbled}/gps`, payload: '{not json' },
    ]);

    const list = await listed();
    const byId = new Map(list.items.map((item) => [item.deviceId, item]));
    expect(byId.has(known)).toBe(false);
    const entry = byId.get(tracker!)!;
    expect(entry).toMatchObject({
      messageCount: 3,
      sample: { topic: `gantry/v1/devices/${tracker}/gps`, truncated: false },
    });
    expect(JSON.parse(entry.sample.payload)).toMatchObject({ lat: 51.3 });
    expect(Date.parse(entry.firstSeenAt)).toBeLessThan(Date.parse(entry.lastSeenAt));
    // A device whose message does not even parse is still a device seen on the broker.
    expect(byId.get(garbled!)).toMatchObject({ messageCount: 1, sample: { payload: '{not json' } });
    // Most recently seen first.
    expect(
      list.items
        .map((item) => item.deviceId)
        .slice(0, 2)
        .sort(),
    ).toEqual([tracker, garbled].sort());

    // What happens to their messages: kept in bronze, rejected as unknown_device, with no tenant.
    const { rows } = await db.pool.query(
      `SELECT status, error, tenant_id FROM device_messages WHERE device_key = $1 ORDER BY id`,
      [tracker],
    );
    expect(rows).toEqual(Array(3).fill({ status: 'rejected', error: 'unknown_device', tenant_id: null }));
  });

  it('registers a listed device onto an asset in one step; its next messages are accepted and its earlier ones can be replayed', async () => {
    const asset = fleet.devices[0]!.assetId;
    // A second asset on the same tenant for the new tracker.
    const created = await api.admin(`/tenants/${fleet.tenantId}/assets`, {
      method: 'POST',
      json: { name: 'Reach stacker 7', identifier: `RS-${tracker}` },
    });
    expect(created.status).toBe(201);
    const newAsset = (await json(created)).id as string;
    expect(newAsset).not.toBe(asset);

    const response = await api.admin(`/unknown-devices/${tracker}/register`, {
      method: 'POST',
      json: { assetId: newAsset, displayName: 'Tracker on RS 7' },
    });
    const body = await json(response);
    expect(response.status, JSON.stringify(body)).toBe(201);
    expect(body).toMatchObject({
      tenantId: fleet.tenantId,
      device: { deviceId: tracker, assetId: newAsset, displayName: 'Tracker on RS 7', enabled: true },
      seen: { messageCount: 3 },
    });
    expect((await listed()).items.map((item) => item.deviceId)).not.toContain(tracker);

    // Registering it again: it is no longer in the list.
    const again = await api.admin(`/unknown-devices/${tracker}/register`, {
      method: 'POST',
      json: { assetId: newAsset },
    });
    expect(again.status).toBe(404);
    // An asset that does not exist is a clear 400.
    const noAsset = await api.admin(`/unknown-devices/${garbled}/register`, {
      method: 'POST',
      json: { assetId: '00000000-0000-4000-8000-000000000000' },
    });
    expect(noAsset.status).toBe(400);
    expect(await json(noAsset)).toMatchObject({ code: 'invalid_body' });
    const missing = await api.admin(`/unknown-devices/${garbled}/register`, { method: 'POST', json: {} });
    expect(await json(missing)).toMatchObject({ error: 'invalid body field assetId: is required' });

    await publish([gps(tracker!, new Date(Date.now() - 500), 51.4)]);
    const { rows } = await db.pool.query(
      `SELECT status, tenant_id, asset_id FROM device_messages WHERE device_key = $1 ORDER BY id DESC LIMIT 1`,
      [tracker],
    );
    expect(rows[0]).toEqual({ status: 'accepted', tenant_id: fleet.tenantId, asset_id: newAsset });
    expect((await listed()).items.map((item) => item.deviceId)).not.toContain(tracker);

    const replay = await replayBronze(
      { pool: db.pool, config: ingest.config },
      { from: new Date(body.seen.firstSeenAt), to: new Date(Date.now() + 1000), deviceKey: tracker },
    );
    expect(replay.statuses.accepted).toBe(3);
    const readings = await countOf(
      db.pool,
      `SELECT count(*) FROM telemetry_readings r JOIN devices d ON d.id = r.device_id WHERE d.device_id = $1`,
      [tracker],
    );
    expect(readings).toBe(4);
  });

  it(`keeps at most ${CAP} ids: a flood of random ids evicts the least recently seen, and a device that keeps publishing stays`, async () => {
    const flood = uniqueDeviceIds(CAP, 'flood');
    const installed = uniqueDeviceIds(1, 'installed')[0]!;
    const ts = new Date(Date.now() - 5000);
    await publish([gps(installed, ts)]);
    await publish(flood.slice(0, CAP / 2).map((id) => gps(id, ts)));
    // The installed tracker publishes again: it is recent once more.
    await publish([gps(installed, new Date(ts.getTime() + 1000))]);
    await publish(flood.slice(CAP / 2).map((id) => gps(id, ts)));
    // A last id alone: its batch sees every row committed before it and trims to the cap.
    const last = uniqueDeviceIds(1, 'last')[0]!;
    await publish([gps(last, ts)]);

    expect(await countOf(db.pool, 'SELECT count(*) FROM unknown_devices')).toBe(CAP);
    const list = await listed('?limit=500');
    expect(list.total).toBe(CAP);
    expect(list.items[0]!.deviceId).toBe(last);
    const { rows } = await db.pool.query<{ device_key: string; message_count: string }>(
      'SELECT device_key, message_count FROM unknown_devices',
    );
    const kept = new Map(rows.map((row) => [row.device_key, Number(row.message_count)]));
    expect(kept.get(installed)).toBe(2);
    expect(kept.has(last)).toBe(true);
    // The id seen before the flood and not since went first.
    expect(kept.has(garbled!)).toBe(false);
    // Least recently seen evicted: every flood id kept was received no earlier than any evicted.
    const received = await db.pool.query<{ device_key: string; at: Date }>(
      'SELECT device_key, max(received_at) AS at FROM device_messages WHERE device_key = ANY($1::text[]) GROUP BY device_key',
      [flood],
    );
    const at = new Map(received.rows.map((row) => [row.device_key, row.at.getTime()]));
    const evicted = flood.filter((id) => !kept.has(id));
    expect(evicted.length).toBe(2);
    const newestEvicted = Math.max(...evicted.map((id) => at.get(id)!));
    const oldestKept = Math.min(...flood.filter((id) => kept.has(id)).map((id) => at.get(id)!));
    expect(newestEvicted).toBeLessThanOrEqual(oldestKept);
  });
});
