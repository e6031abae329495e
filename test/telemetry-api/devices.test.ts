import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { provisioning } from '@gantry/api';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { json, startTestApi, type TestApi } from '../support/api.ts';
import { provisioner } from '../support/fixtures.ts';
import { createFleet, insertDeviceState, minutesAgo, type Fleet } from './fixtures.ts';

let db: TestDatabase;
let api: TestApi;
let fleet: Fleet;

beforeAll(async () => {
  db = await createTestDatabase('telemetry_devices');
  api = await startTestApi(db.pool, db.url);
  fleet = await createFleet(db.pool, [
    ['SC 01', 'Acme'],
    ['SC 02', 'Acme'],
    ['SC 03', 'Globex'],
    ['SC 04', 'Globex'],
    ['SC 05', 'Acme'],
  ]);
  const { byName } = fleet;
  await insertDeviceState(db.pool, fleet.tenantId, byName['SC 01']!, {
    lastSeenAt: minutesAgo(2),
    latitude: 51.95,
    longitude: 4.05,
    adcOn: true,
    ignition: true,
    hourmeter: 123456,
    identifier: 'OP-001',
    lastMessageType: 'adcin',
  });
  await insertDeviceState(db.pool, fleet.tenantId, byName['SC 02']!, {
    lastSeenAt: minutesAgo(11),
    adcOn: false,
    ignition: true,
  });
  await insertDeviceState(db.pool, fleet.tenantId, byName['SC 03']!, {
    lastSeenAt: minutesAgo(25 * 60),
    ignition: false,
    adcOn: true,
  });
  await insertDeviceState(db.pool, fleet.tenantId, byName['SC 05']!, { lastSeenAt: minutesAgo(1) });
  await provisioning.updateDevice(provisioner(db.pool), fleet.tenantId, byName['SC 05']!.deviceUuid, {
    enabled: false,
  });
});
afterAll(async () => {
  await api?.close();
  await db?.drop();
});

async function devices(query: string, key = fleet.tenantKey) {
  const response = await api.external(`/telemetry/devices${query}`, key);
  const body = await json(response);
  expect(response.status, JSON.stringify(body)).toBe(200);
  return body;
}

describe('GET /telemetry/devices', () => {
  it('lists every device with its latest state and its online status', async () => {
    const body = await devices('');
    expect(body.paging).toEqual({ limit: 100, offset: 0 });
    const byAsset = Object.fromEntries(body.items.map((item: any) => [item.assetName, item]));
    expect(Object.keys(byAsset).sort()).toEqual(['SC 01', 'SC 02', 'SC 03', 'SC 04', 'SC 05']);
    expect(byAsset['SC 01']).toMatchObject({
      deviceId: fleet.byName['SC 01']!.deviceId,
      displayName: 'SC 01 tracker',
      assetId: fleet.byName['SC 01']!.id,
      assetIdentifier: 'SC-01',
      assetDisplayCode: 'SC-01',
      enabled: true,
      onlineStatus: 'online',
      adcState: 'on',
      workState: 'loaded',
      containerAttached: true,
      spreaderLocked: true,
      hourmeterValue: 123456,
      latitude: 51.95,
      longitude: 4.05,
      lastIdentifier: 'OP-001',
      lastMessageType: 'adcin',
    });
    expect(byAsset['SC 02']).toMatchObject({
      onlineStatus: 'silent',
      adcState: 'off',
      workState: 'empty',
      containerAttached: false,
    });
    expect(byAsset['SC 03']).toMatchObject({ onlineStatus: 'offline', workState: 'off' });
    expect(byAsset['SC 04']).toMatchObject({
      onlineStatus: 'unknown',
      adcState: 'unknown',
      workState: 'unknown',
      containerAttached: null,
      hourmeterValue: null,
      latitude: null,
      lastIdentifier: '',
      firstSeenAt: null,
      lastSeenAt: null,
    });
    expect(byAsset['SC 05']).toMatchObject({ onlineStatus: 'disabled', enabled: false });
  });

  it('filters by status, asset, enabled and search text, and pages in device-id order', async () => {
    expect((await devices('?status=silent')).items.map((item: any) => item.assetName)).toEqual(['SC 02']);
    expect((await devices(`?assetId=${fleet.byName['SC 04']!.id}`)).items.map((item: any) => item.assetName)).toEqual([
      'SC 04',
    ]);
    expect((await devices('?enabled=false')).items.map((item: any) => item.assetName)).toEqual(['SC 05']);
    expect((await devices('?q=sc-03')).items.map((item: any) => item.assetName)).toEqual(['SC 03']);
    expect((await devices('?q=SC%2003%20TRACKER')).items.map((item: any) => item.assetName)).toEqual(['SC 03']);
    const all = (await devices('')).items.map((item: any) => item.deviceId);
    expect(all).toEqual([...all].sort());
    const first = await devices('?limit=2');
    const second = await devices('?limit=2&offset=2');
    const third = await devices('?limit=2&offset=4');
    expect(first.paging).toEqual({ limit: 2, offset: 0 });
    expect([...first.items, ...second.items, ...third.items].map((item: any) => item.deviceId)).toEqual(all);
  });

  it('shows a customer key only the devices of its customer’s assets', async () => {
    const acme = await devices('', fleet.acmeKey);
    expect(acme.items.map((item: any) => item.assetName).sort()).toEqual(['SC 01', 'SC 02', 'SC 05']);
    const other = await api.external(`/telemetry/devices?assetId=${fleet.byName['SC 03']!.id}`, fleet.acmeKey);
    expect(other.status).toBe(404);
    expect((await json(other)).code).toBe('not_found');
  });

  it('takes the online and silent thresholds from the configuration', async () => {
    const strict = await startTestApi(db.pool, db.url, {
      GANTRY_DEVICE_ONLINE_SECONDS: '60',
      GANTRY_DEVICE_SILENT_SECONDS: '600',
    });
    try {
      const body = await json(await strict.external('/telemetry/devices', fleet.tenantKey));
      const status = Object.fromEntries(body.items.map((item: any) => [item.assetName, item.onlineStatus]));
      expect(status).toMatchObject({ 'SC 01': 'silent', 'SC 02': 'offline', 'SC 03': 'offline', 'SC 04': 'unknown' });
    } finally {
      await strict.close();
    }
  });

  it('answers 400 naming the parameter for bad input', async () => {
    for (const [query, parameter] of [
      ['?status=sleeping', 'status'],
      ['?limit=0', 'limit'],
      ['?limit=501', 'limit'],
      ['?offset=-1', 'offset'],
      ['?assetId=nope', 'assetId'],
      ['?enabled=maybe', 'enabled'],
    ] as const) {
      const response = await api.external(`/telemetry/devices${query}`, fleet.tenantKey);
      expect(response.status, query).toBe(400);
      expect((await json(response)).error).toContain(parameter);
    }
  });
});
