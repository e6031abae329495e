import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { provisioning } from '@gantry/api';
import { availableStorageModes, createTestDatabase, type TestDatabase } from '../support/database.ts';
import { json, startTestApi, type TestApi } from '../support/api.ts';
import { provisioner } from '../support/fixtures.ts';
import {
  createFleet,
  createGeofence,
  createOperator,
  insertAlert,
  insertDeviceState,
  insertMembership,
  insertReadings,
  minutesAgo,
  type Fleet,
} from './fixtures.ts';
import { materializeGold } from './gold.ts';

describe.each(availableStorageModes())('capabilities, asset state and positions (%s mode)', (mode) => {
  let db: TestDatabase;
  let api: TestApi;
  let fleet: Fleet;

  beforeAll(async () => {
    db = await createTestDatabase(`telemetry_assets_${mode}`, mode);
    api = await startTestApi(db.pool, db.url);
    fleet = await createFleet(db.pool, [
      ['SC 01', 'Acme'],
      ['SC 02', 'Acme'],
      ['SC 03', 'Globex'],
    ]);
    await provisioning.createAsset(provisioner(db.pool), fleet.tenantId, {
      name: 'Spare',
      identifier: 'SPARE',
      customerName: 'Acme',
    });
    const t = fleet.tenantId;
    const { byName } = fleet;
    await createOperator(db.pool, t, 'OP-7', 'Gus Grant');
    await insertDeviceState(db.pool, t, byName['SC 01']!, {
      lastSeenAt: minutesAgo(1),
      latitude: 51.95,
      longitude: 4.05,
      adcOn: true,
      ignition: true,
      hourmeter: 7200,
      identifier: 'OP-7',
      heartbeat: true,
    });
    await insertDeviceState(db.pool, t, byName['SC 03']!, { lastSeenAt: minutesAgo(3), latitude: 52, longitude: 4.1 });
    const zone = await createGeofence(db.pool, t, 'Quay', 'forbidden');
    await insertMembership(db.pool, t, zone.id, byName['SC 01']!, true);
    await insertAlert(db.pool, t, zone.id, byName['SC 01']!, { createdAt: minutesAgo(5).toISOString() });

    // Recent readings for messageTypesLast7d, and a morning of positions for SC 01.
    await insertReadings(db.pool, t, byName['SC 01']!, [
      { type: 'gps', ts: minutesAgo(60) },
      { type: 'gps', ts: minutesAgo(30) },
      { type: 'adcin', ts: minutesAgo(20) },
      { type: 'heartbeat', ts: minutesAgo(10) },
      { type: 'gps', ts: minutesAgo(8 * 24 * 60) },
    ]);
    await insertReadings(db.pool, t, byName['SC 03']!, [{ type: 'gps', ts: minutesAgo(50) }]);
    await insertReadings(db.pool, t, byName['SC 01']!, [
      { type: 'gps', ts: '2026-06-01T10:00:10Z', latitude: 51.9, longitude: 4.0 },
      { type: 'gps', ts: '2026-06-01T10:00:40Z', latitude: 51.91, longitude: 4.01 },
      { type: 'gps', ts: '2026-06-01T10:01:05Z', latitude: 51.92, longitude: 4.02 },
      { type: 'gps', ts: '2026-06-01T10:02:00Z', latitude: 0, longitude: 0, gpsValid: false },
      { type: 'gps', ts: '2026-06-01T10:20:00Z', latitude: 51.93, longitude: 4.03 },
      { type: 'gps', ts: '2026-06-02T09:00:00Z', latitude: 51.94, longitude: 4.04 },
    ]);
  });
  afterAll(async () => {
    await api?.close();
    await db?.drop();
  });

  async function get(path: string, key = fleet.tenantKey) {
    const response = await api.external(path, key);
    const body = await json(response);
    expect(response.status, `${path}: ${JSON.stringify(body)}`).toBe(200);
    return body;
  }

  describe('GET /telemetry/capabilities', () => {
    it('tells which kinds of telemetry the key’s assets report, with last week’s readings per type', async () => {
      const body = await get('/telemetry/capabilities');
      expect(body).toEqual({
        telemetryEnabled: true,
        gpsEnabled: true,
        heartbeatEnabled: true,
        hourmeterEnabled: true,
        identifierEnabled: true,
        imuEnabled: false,
        containerWorkStateEnabled: true,
        geofenceAlertsEnabled: true,
        telemetryAssets: 3,
        totalAssets: 4,
        messageTypesLast7d: { gps: 3, adcin: 1, heartbeat: 1, hourmeter: 0, imu: 0, identifier: 0 },
        scope: { customerName: null, customerScoped: false },
      });
    });

    it('sees for a customer key only its own assets', async () => {
      const body = await get('/telemetry/capabilities', fleet.globexKey);
      expect(body).toMatchObject({
        telemetryEnabled: true,
        gpsEnabled: true,
        heartbeatEnabled: false,
        containerWorkStateEnabled: false,
        telemetryAssets: 1,
        totalAssets: 1,
        messageTypesLast7d: { gps: 1, adcin: 0, heartbeat: 0, hourmeter: 0, imu: 0, identifier: 0 },
        scope: { customerName: 'Globex', customerScoped: true },
      });
    });
  });

  describe('GET /telemetry/assets/{assetId}/state', () => {
    it('returns the asset and its latest state', async () => {
      const body = await get(`/telemetry/assets/${fleet.byName['SC 01']!.id}/state`);
      expect(body.asset).toEqual({
        id: fleet.byName['SC 01']!.id,
        identifier: 'SC-01',
        name: 'SC 01',
        displayCode: 'SC-01',
        assetType: 'Straddle carrier',
        location: 'Yard 1',
        customerName: 'Acme',
      });
      expect(body.state).toMatchObject({
        telemetry: true,
        deviceId: fleet.byName['SC 01']!.deviceId,
        onlineStatus: 'online',
        position: { latitude: 51.95, longitude: 4.05 },
        ignition: true,
        adcState: 'on',
        workState: 'loaded',
        containerAttached: true,
        hourmeterValue: 7200,
        identifier: 'OP-7',
        operatorName: 'Gus Grant',
        heartbeat: { batteryV: 12.6 },
        imu: null,
        geofences: [{ name: 'Quay', type: 'forbidden' }],
        activeAlertCount: 1,
        devices: [{ deviceId: fleet.byName['SC 01']!.deviceId, onlineStatus: 'online', enabled: true }],
      });
    });

    it('answers for an asset never heard from, and 404 outside the key’s scope', async () => {
      const quiet = await get(`/telemetry/assets/${fleet.byName['SC 02']!.id}/state`, fleet.acmeKey);
      expect(quiet.state).toMatchObject({ onlineStatus: 'unknown', lastSeenAt: null, position: null, geofences: [] });
      const other = await api.external(`/telemetry/assets/${fleet.byName['SC 03']!.id}/state`, fleet.acmeKey);
      expect(other.status).toBe(404);
      expect(await json(other)).toMatchObject({ code: 'not_found' });
      expect(
        (await api.external('/telemetry/assets/00000000-0000-4000-8000-000000000000/state', fleet.tenantKey)).status,
      ).toBe(404);
      const bad = await api.external('/telemetry/assets/sc-01/state', fleet.tenantKey);
      expect(bad.status).toBe(400);
      expect((await json(bad)).error).toContain('assetId');
    });
  });

  describe('GET /telemetry/assets/{assetId}/positions', () => {
    const path = () => `/telemetry/assets/${fleet.byName['SC 01']!.id}/positions`;

    it('comes from gold only: nothing before the buckets are materialized', async () => {
      const body = await get(`${path()}?from=2026-06-01T10:00:00Z&to=2026-06-01T11:00:00Z`);
      expect(body).toMatchObject({ items: [], source: 'gold', resolution: '1min' });
    });

    it('lists minute buckets for short ranges and quarter hours beyond a day, oldest first', async () => {
      await materializeGold(db, ['positions_1min', 'positions_15min'], '2026-06-01T00:00:00Z', '2026-06-03T00:00:00Z');
      const body = await get(`${path()}?from=2026-06-01T10:00:00Z&to=2026-06-01T11:00:00Z`);
      expect(body).toMatchObject({
        source: 'gold',
        resolution: '1min',
        paging: { limit: 100, offset: 0 },
        range: { from: '2026-06-01T10:00:00.000Z', to: '2026-06-01T11:00:00.000Z' },
        asset: { id: fleet.byName['SC 01']!.id, name: 'SC 01' },
      });
      expect(body.items).toEqual([
        {
          bucketTs: '2026-06-01T10:00:00.000Z',
          lastEventTs: '2026-06-01T10:00:40.000Z',
          latitude: 51.91,
          longitude: 4.01,
          pointCount: 2,
        },
        {
          bucketTs: '2026-06-01T10:01:00.000Z',
          lastEventTs: '2026-06-01T10:01:05.000Z',
          latitude: 51.92,
          longitude: 4.02,
          pointCount: 1,
        },
        {
          bucketTs: '2026-06-01T10:20:00.000Z',
          lastEventTs: '2026-06-01T10:20:00.000Z',
          latitude: 51.93,
          longitude: 4.03,
          pointCount: 1,
        },
      ]);
      const quarter = await get(`${path()}?from=2026-06-01T10:00:00Z&to=2026-06-01T11:00:00Z&resolution=15min`);
      expect(quarter.items.map((item: any) => [item.bucketTs.slice(11, 16), item.pointCount, item.latitude])).toEqual([
        ['10:00', 3, 51.92],
        ['10:15', 1, 51.93],
      ]);
      const twoDays = await get(`${path()}?from=2026-06-01&to=2026-06-02`);
      expect(twoDays.resolution).toBe('15min');
      expect(twoDays.range).toEqual({ from: '2026-06-01T00:00:00.000Z', to: '2026-06-02T23:59:59.999Z' });
      expect(twoDays.items.map((item: any) => item.bucketTs)).toEqual([
        '2026-06-01T10:00:00.000Z',
        '2026-06-01T10:15:00.000Z',
        '2026-06-02T09:00:00.000Z',
      ]);
      const page = await get(`${path()}?from=2026-06-01T10:00:00Z&to=2026-06-01T11:00:00Z&limit=1&offset=2`);
      expect(page.items.map((item: any) => item.bucketTs)).toEqual(['2026-06-01T10:20:00.000Z']);
    });

    it('keeps customers apart and rejects bad parameters', async () => {
      expect((await api.external(`${path()}?from=2026-06-01&to=2026-06-01`, fleet.globexKey)).status).toBe(404);
      expect((await get(`${path()}?from=2026-06-01&to=2026-06-01`, fleet.acmeKey)).items).toHaveLength(3);
      for (const [query, expected] of [
        ['resolution=5min', 'resolution'],
        ['from=2026-01-01&to=2026-03-01', 'at most 31 days'],
        ['limit=0', 'limit'],
        ['to=2026-06-01T10:00:00+0200', 'to'],
      ] as const) {
        const response = await api.external(`${path()}?${query}`, fleet.tenantKey);
        expect(response.status, query).toBe(400);
        expect((await json(response)).error, query).toContain(expected);
      }
    });
  });
});
