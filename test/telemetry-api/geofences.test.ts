import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { json, startTestApi, type TestApi } from '../support/api.ts';
import { createFleet, createGeofence, insertAlert, insertMembership, type Fleet } from './fixtures.ts';

let db: TestDatabase;
let api: TestApi;
let fleet: Fleet;
let quay: { id: string };
let yard: { id: string };
const alerts: Record<string, string> = {};

beforeAll(async () => {
  db = await createTestDatabase('telemetry_geofences');
  api = await startTestApi(db.pool, db.url);
  fleet = await createFleet(db.pool, [
    ['SC 01', 'Acme'],
    ['SC 02', 'Acme'],
    ['SC 03', 'Globex'],
  ]);
  const t = fleet.tenantId;
  const { byName } = fleet;
  quay = await createGeofence(db.pool, t, 'Quay edge', 'forbidden');
  yard = await createGeofence(db.pool, t, 'Yard', 'allowed', 4.2, 51.9);
  await insertMembership(db.pool, t, quay.id, byName['SC 01']!, true);
  await insertMembership(db.pool, t, quay.id, byName['SC 03']!, true);
  await insertMembership(db.pool, t, yard.id, byName['SC 02']!, true);
  await insertMembership(db.pool, t, yard.id, byName['SC 01']!, false);

  alerts.old = await insertAlert(db.pool, t, quay.id, byName['SC 01']!, {
    createdAt: '2026-04-01T08:00:00Z',
    resolvedAt: '2026-04-01T08:20:00Z',
  });
  alerts.long = await insertAlert(db.pool, t, yard.id, byName['SC 01']!, {
    createdAt: '2026-04-02T22:00:00Z',
    alertType: 'allowed_exit',
    resolvedAt: '2026-04-03T02:00:00Z',
  });
  alerts.acme = await insertAlert(db.pool, t, quay.id, byName['SC 01']!, { createdAt: '2026-04-03T10:00:00Z' });
  alerts.globex = await insertAlert(db.pool, t, quay.id, byName['SC 03']!, { createdAt: '2026-04-03T11:00:00Z' });
  alerts.acked = await insertAlert(db.pool, t, yard.id, byName['SC 02']!, {
    createdAt: '2026-04-03T12:00:00Z',
    alertType: 'allowed_exit',
    status: 'acknowledged',
  });
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

const names = (body: any) =>
  body.items.map((item: any) => Object.entries(alerts).find(([, id]) => id === item.id)?.[0]);

describe('GET /telemetry/geofences', () => {
  it('lists the zones with their active alerts and the assets inside', async () => {
    const body = await get('/telemetry/geofences');
    expect(body.items.map((item: any) => item.name)).toEqual(['Quay edge', 'Yard']);
    expect(body.items[0]).toEqual({
      id: quay.id,
      name: 'Quay edge',
      type: 'forbidden',
      enabled: true,
      geometry: {
        type: 'Polygon',
        coordinates: [
          [
            [4, 51.9],
            [4.1, 51.9],
            [4.1, 52],
            [4, 52],
            [4, 51.9],
          ],
        ],
      },
      activeAlertCount: 2,
      assetCount: 2,
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
    });
    expect(body.items[1]).toMatchObject({ type: 'allowed', activeAlertCount: 1, assetCount: 1 });
  });

  it('counts only a customer key’s own assets, and filters by type and name', async () => {
    const globex = await get('/telemetry/geofences', fleet.globexKey);
    expect(globex.items.map((item: any) => [item.name, item.activeAlertCount, item.assetCount])).toEqual([
      ['Quay edge', 1, 1],
      ['Yard', 0, 0],
    ]);
    expect((await get('/telemetry/geofences?type=allowed')).items.map((item: any) => item.name)).toEqual(['Yard']);
    expect((await get('/telemetry/geofences?q=QUAY')).items.map((item: any) => item.name)).toEqual(['Quay edge']);
    expect((await api.external('/telemetry/geofences?type=round', fleet.tenantKey)).status).toBe(400);
  });
});

describe('GET /telemetry/geofence-alerts', () => {
  it('lists alerts active at some time in the range, newest first', async () => {
    const day = await get('/telemetry/geofence-alerts?from=2026-04-03&to=2026-04-03');
    expect(names(day)).toEqual(['acked', 'globex', 'acme', 'long']);
    expect(day.range).toEqual({ from: '2026-04-03T00:00:00.000Z', to: '2026-04-03T23:59:59.999Z' });
    expect(day.items.find((item: any) => item.id === alerts.acme)).toEqual({
      id: alerts.acme,
      geofenceId: quay.id,
      geofenceName: 'Quay edge',
      assetId: fleet.byName['SC 01']!.id,
      asset: expect.objectContaining({ id: fleet.byName['SC 01']!.id, name: 'SC 01', customerName: 'Acme' }),
      alertType: 'forbidden_enter',
      status: 'open',
      isActive: true,
      createdAt: '2026-04-03T10:00:00.000Z',
      acknowledgedAt: null,
      resolvedAt: null,
    });
    expect(day.items.find((item: any) => item.id === alerts.long)).toMatchObject({
      isActive: false,
      resolvedAt: '2026-04-03T02:00:00.000Z',
    });
    // An alert still active today although opened days ago is in today's list.
    expect(names(await get('/telemetry/geofence-alerts?from=2026-04-10&to=2026-04-10'))).toEqual([
      'acked',
      'globex',
      'acme',
    ]);
    expect(names(await get('/telemetry/geofence-alerts?from=2026-04-01&to=2026-04-01'))).toEqual(['old']);
  });

  it('filters by status, activity, type, geofence, asset and search, and scopes customer keys', async () => {
    const range = 'from=2026-04-01&to=2026-04-30';
    expect(names(await get(`/telemetry/geofence-alerts?${range}&status=acknowledged`))).toEqual(['acked']);
    expect(names(await get(`/telemetry/geofence-alerts?${range}&active=false`))).toEqual(['long', 'old']);
    expect(names(await get(`/telemetry/geofence-alerts?${range}&alertType=allowed_exit`))).toEqual(['acked', 'long']);
    expect(names(await get(`/telemetry/geofence-alerts?${range}&geofenceId=${yard.id}`))).toEqual(['acked', 'long']);
    expect(names(await get(`/telemetry/geofence-alerts?${range}&assetId=${fleet.byName['SC 03']!.id}`))).toEqual([
      'globex',
    ]);
    expect(names(await get(`/telemetry/geofence-alerts?${range}&q=quay`))).toEqual(['globex', 'acme', 'old']);
    expect(names(await get(`/telemetry/geofence-alerts?${range}`, fleet.globexKey))).toEqual(['globex']);
    expect(names(await get(`/telemetry/geofence-alerts?${range}&limit=2&offset=1`))).toEqual(['globex', 'acme']);
    for (const query of [
      'status=closed',
      'active=yes',
      'alertType=forbidden_exit',
      'geofenceId=x',
      'from=2026-04-31',
    ]) {
      const response = await api.external(`/telemetry/geofence-alerts?${query}`, fleet.tenantKey);
      expect(response.status, query).toBe(400);
      expect((await json(response)).error).toContain(query.split('=')[0]);
    }
  });
});

describe('POST /telemetry/geofence-alerts/{id}/acknowledge', () => {
  async function events(alertId: string) {
    const { rows } = await db.pool.query(
      `SELECT event_type, entity_type, customer_name, data FROM webhook_events WHERE entity_id = $1 ORDER BY created_at`,
      [alertId],
    );
    return rows;
  }

  it('acknowledges an alert and writes telemetry.geofence_alert.acknowledged to the outbox', async () => {
    const before = Date.now();
    const response = await api.external(`/telemetry/geofence-alerts/${alerts.acme}/acknowledge`, fleet.acmeKey, {
      method: 'POST',
    });
    const body = await json(response);
    expect(response.status, JSON.stringify(body)).toBe(200);
    expect(body).toMatchObject({ id: alerts.acme, status: 'acknowledged', isActive: true, resolvedAt: null });
    expect(Date.parse(body.acknowledgedAt)).toBeGreaterThanOrEqual(before - 1000);

    const listed = await get(`/telemetry/geofence-alerts?from=2026-04-03&to=2026-04-03&status=acknowledged`);
    expect(listed.items.find((item: any) => item.id === alerts.acme)).toMatchObject({
      acknowledgedAt: body.acknowledgedAt,
    });

    const written = await events(alerts.acme!);
    expect(written).toHaveLength(1);
    expect(written[0]).toMatchObject({
      event_type: 'telemetry.geofence_alert.acknowledged',
      entity_type: 'geofence_alert',
      customer_name: 'Acme',
      data: {
        id: alerts.acme,
        status: 'acknowledged',
        acknowledgedAt: body.acknowledgedAt,
        geofenceName: 'Quay edge',
        acknowledgedBy: 'Acme key',
        latitude: 51.95,
        longitude: 4.05,
      },
    });
  });

  it('is idempotent: a second acknowledge returns the alert unchanged and sends no second event', async () => {
    const first = await json(
      await api.external(`/telemetry/geofence-alerts/${alerts.acme}/acknowledge`, fleet.tenantKey, { method: 'POST' }),
    );
    const again = await api.external(`/telemetry/geofence-alerts/${alerts.acme}/acknowledge`, fleet.tenantKey, {
      method: 'POST',
    });
    expect(again.status).toBe(200);
    expect(await json(again)).toEqual(first);
    expect(await events(alerts.acme!)).toHaveLength(1);
  });

  it('answers 404 for an alert of another customer or none at all, and 400 for a malformed id', async () => {
    const other = await api.external(`/telemetry/geofence-alerts/${alerts.globex}/acknowledge`, fleet.acmeKey, {
      method: 'POST',
    });
    expect(other.status).toBe(404);
    expect(await events(alerts.globex!)).toHaveLength(0);
    const list = await get(
      `/telemetry/geofence-alerts?from=2026-04-03&to=2026-04-03&assetId=${fleet.byName['SC 03']!.id}`,
    );
    expect(list.items[0]).toMatchObject({ status: 'open', acknowledgedAt: null });
    const none = await api.external(
      '/telemetry/geofence-alerts/00000000-0000-4000-8000-000000000000/acknowledge',
      fleet.tenantKey,
      { method: 'POST' },
    );
    expect(none.status).toBe(404);
    const bad = await api.external('/telemetry/geofence-alerts/abc/acknowledge', fleet.tenantKey, { method: 'POST' });
    expect(bad.status).toBe(400);
    expect((await json(bad)).error).toContain('id');
  });
});
