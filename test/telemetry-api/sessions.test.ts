import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { json, startTestApi, type TestApi } from '../support/api.ts';
import { createFleet, createOperator, insertIdentifierSession, insertUsageSession, type Fleet } from './fixtures.ts';

let db: TestDatabase;
let api: TestApi;
let fleet: Fleet;
const ids: Record<string, string> = {};

beforeAll(async () => {
  db = await createTestDatabase('telemetry_sessions');
  api = await startTestApi(db.pool, db.url);
  fleet = await createFleet(db.pool, [
    ['SC 01', 'Acme'],
    ['SC 03', 'Globex'],
  ]);
  const sc1 = fleet.byName['SC 01']!;
  const sc3 = fleet.byName['SC 03']!;
  const t = fleet.tenantId;
  await createOperator(db.pool, t, 'OP-1', 'Ana Costa');
  await createOperator(db.pool, t, 'OP-2', 'Ben Okafor');
  await createOperator(db.pool, t, 'OP-3', 'Idle Ivan');

  // A crosses midnight into the 10th; D is still open.
  ids.A = await insertUsageSession(db.pool, t, sc1, {
    start: '2026-03-09T23:00:00Z',
    end: '2026-03-10T01:00:00Z',
    identifier: 'OP-1',
    distanceM: 2000,
  });
  ids.B = await insertUsageSession(db.pool, t, sc1, {
    start: '2026-03-10T08:00:00Z',
    end: '2026-03-10T09:30:00Z',
    identifier: 'OP-1',
  });
  ids.C = await insertUsageSession(db.pool, t, sc1, { start: '2026-03-11T10:00:00Z', end: '2026-03-11T11:00:00Z' });
  ids.D = await insertUsageSession(db.pool, t, sc1, {
    start: '2026-03-12T06:00:00Z',
    end: '2026-03-12T06:30:00Z',
    isOpen: true,
    endReason: null,
    hourmeterDelta: null,
  });
  ids.E = await insertUsageSession(db.pool, t, sc3, {
    start: '2026-03-10T12:00:00Z',
    end: '2026-03-10T13:00:00Z',
    identifier: 'OP-2',
  });

  ids.i1 = await insertIdentifierSession(db.pool, t, sc1, {
    identifier: 'OP-1',
    start: '2026-03-09T23:00:00Z',
    end: '2026-03-10T01:00:00Z',
    distanceM: 500,
  });
  ids.i2 = await insertIdentifierSession(db.pool, t, sc1, {
    identifier: 'OP-1',
    start: '2026-03-10T08:00:00Z',
    end: '2026-03-10T09:00:00Z',
    distanceM: 300,
  });
  ids.i3 = await insertIdentifierSession(db.pool, t, sc1, {
    identifier: 'OP-2',
    start: '2026-03-11T10:00:00Z',
    end: '2026-03-11T11:00:00Z',
  });
  ids.i4 = await insertIdentifierSession(db.pool, t, sc3, {
    identifier: 'OP-2',
    start: '2026-03-10T12:00:00Z',
    end: '2026-03-10T13:00:00Z',
    distanceM: 700,
  });
  ids.i5 = await insertIdentifierSession(db.pool, t, sc3, {
    identifier: 'OP-9',
    start: '2026-03-10T14:00:00Z',
    end: '2026-03-10T14:30:00Z',
    isOpen: true,
    endReason: null,
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

const idsOf = (body: any) => body.items.map((item: any) => item.id);
const name = (id: string) => Object.entries(ids).find(([, value]) => value === id)?.[0];
const namesOf = (body: any) => idsOf(body).map(name);

describe('GET /telemetry/usage-sessions', () => {
  it('includes every session overlapping a whole-day range, newest first, with the range echoed', async () => {
    const body = await get('/telemetry/usage-sessions?from=2026-03-10&to=2026-03-10');
    expect(namesOf(body)).toEqual(['E', 'B', 'A']);
    expect(body.range).toEqual({ from: '2026-03-10T00:00:00.000Z', to: '2026-03-10T23:59:59.999Z' });
    expect(body.paging).toEqual({ limit: 100, offset: 0 });
  });

  it('takes an RFC 3339 to as given (exclusive) and drops sessions ending exactly at from', async () => {
    const body = await get('/telemetry/usage-sessions?from=2026-03-10T01:00:00Z&to=2026-03-10T08:00:00Z');
    expect(body.items).toEqual([]);
    expect(body.range).toEqual({ from: '2026-03-10T01:00:00.000Z', to: '2026-03-10T08:00:00.000Z' });
    const later = await get('/telemetry/usage-sessions?from=2026-03-10T00:59:59Z&to=2026-03-10T08:00:01Z');
    expect(namesOf(later)).toEqual(['B', 'A']);
  });

  it('maps every field of a session, with its operator, device, asset and container work', async () => {
    const body = await get('/telemetry/usage-sessions?from=2026-03-09&to=2026-03-10&identifier=OP-1');
    const a = body.items.find((item: any) => item.id === ids.A);
    expect(a).toEqual({
      id: ids.A,
      assetId: fleet.byName['SC 01']!.id,
      asset: {
        id: fleet.byName['SC 01']!.id,
        identifier: 'SC-01',
        name: 'SC 01',
        displayCode: 'SC-01',
        assetType: 'Straddle carrier',
        location: 'Yard 1',
        customerName: 'Acme',
      },
      deviceId: fleet.byName['SC 01']!.deviceId,
      identifier: 'OP-1',
      operatorName: 'Ana Costa',
      startReason: 'ignition_on',
      endReason: 'ignition_off',
      startTs: '2026-03-09T23:00:00.000Z',
      endTs: '2026-03-10T01:00:00.000Z',
      confidence: 1,
      distanceM: 2000,
      durationSeconds: 7200,
      movingSeconds: 3600,
      stationaryRunningSeconds: 3600,
      stopCount: 2,
      tripCount: 3,
      imuAnomalyCount: 1,
      imuSampleCount: 40,
      hourmeterDelta: 7200,
      containerWork: {
        containerCycleCount: 4,
        loadedSeconds: 1800,
        emptySeconds: 5400,
        loadedDistanceM: 500,
        emptyDistanceM: 1500,
        loadedPercent: 25,
      },
    });
  });

  it('shows an open session as ongoing with a null hourmeter delta', async () => {
    const body = await get('/telemetry/usage-sessions?from=2026-03-12&to=2026-03-12');
    expect(body.items).toHaveLength(1);
    expect(body.items[0]).toMatchObject({
      id: ids.D,
      endReason: 'ongoing',
      hourmeterDelta: null,
      endTs: '2026-03-12T06:30:00.000Z',
    });
  });

  it('filters by asset, identifier and search text, and pages', async () => {
    const range = 'from=2026-03-01&to=2026-03-31';
    expect(namesOf(await get(`/telemetry/usage-sessions?${range}&assetId=${fleet.byName['SC 03']!.id}`))).toEqual([
      'E',
    ]);
    expect(namesOf(await get(`/telemetry/usage-sessions?${range}&identifier=OP-1`))).toEqual(['B', 'A']);
    expect(namesOf(await get(`/telemetry/usage-sessions?${range}&q=ana`))).toEqual(['B', 'A']);
    expect(namesOf(await get(`/telemetry/usage-sessions?${range}&q=sc-03`))).toEqual(['E']);
    expect(
      namesOf(await get(`/telemetry/usage-sessions?${range}&q=${fleet.byName['SC 03']!.deviceId.toUpperCase()}`)),
    ).toEqual(['E']);
    const all = namesOf(await get(`/telemetry/usage-sessions?${range}`));
    expect(all).toEqual(['D', 'C', 'E', 'B', 'A']);
    const pages = [];
    for (let offset = 0; offset < 6; offset += 2) {
      const page = await get(`/telemetry/usage-sessions?${range}&limit=2&offset=${offset}`);
      expect(page.paging).toEqual({ limit: 2, offset });
      pages.push(...namesOf(page));
    }
    expect(pages).toEqual(all);
  });

  it('shows a customer key only sessions of its assets, and 404 for another customer’s asset', async () => {
    const range = 'from=2026-03-01&to=2026-03-31';
    expect(namesOf(await get(`/telemetry/usage-sessions?${range}`, fleet.acmeKey))).toEqual(['D', 'C', 'B', 'A']);
    expect(namesOf(await get(`/telemetry/usage-sessions?${range}`, fleet.globexKey))).toEqual(['E']);
    const other = await api.external(
      `/telemetry/usage-sessions?${range}&assetId=${fleet.byName['SC 03']!.id}`,
      fleet.acmeKey,
    );
    expect(other.status).toBe(404);
    const missing = await api.external(
      `/telemetry/usage-sessions?assetId=00000000-0000-4000-8000-000000000000`,
      fleet.tenantKey,
    );
    expect(missing.status).toBe(404);
  });

  it('answers 400 naming the parameter for bad input', async () => {
    for (const [query, expected] of [
      ['from=yesterday', 'from'],
      ['to=2026-02-30', 'to'],
      ['from=2026-03-10T10:00:00', 'from'],
      ['from=2026-03-11&to=2026-03-10', 'from must be before to'],
      ['from=2024-01-01&to=2026-01-01', 'at most 366 days'],
      ['limit=abc', 'limit'],
      ['offset=1.5', 'offset'],
      ['assetId=123', 'assetId'],
      [`identifier=${'x'.repeat(65)}`, 'identifier'],
      ['q=', 'q'],
      ['q=%00', 'q'],
      ['identifier=a%00b', 'identifier'],
    ] as const) {
      const response = await api.external(`/telemetry/usage-sessions?${query}`, fleet.tenantKey);
      const body = await json(response);
      expect(response.status, query).toBe(400);
      expect(body.error, query).toContain(expected);
    }
  });
});

describe('GET /telemetry/identifier-sessions', () => {
  it('lists identifier sessions overlapping the range, newest first, with operator names', async () => {
    const body = await get('/telemetry/identifier-sessions?from=2026-03-10&to=2026-03-10');
    expect(namesOf(body)).toEqual(['i5', 'i4', 'i2', 'i1']);
    const i1 = body.items.find((item: any) => item.id === ids.i1);
    expect(i1).toEqual({
      id: ids.i1,
      assetId: fleet.byName['SC 01']!.id,
      asset: expect.objectContaining({ name: 'SC 01', customerName: 'Acme' }),
      identifier: 'OP-1',
      operatorName: 'Ana Costa',
      endReason: 'logout',
      startTs: '2026-03-09T23:00:00.000Z',
      endTs: '2026-03-10T01:00:00.000Z',
      confidence: 1,
      distanceM: 500,
      durationSeconds: 7200,
      eventCount: 120,
      gpsPointCount: 100,
      stopCount: 1,
      tripCount: 2,
      containerWork: {
        containerCycleCount: 3,
        loadedSeconds: 3600,
        emptySeconds: 3600,
        loadedDistanceM: 250,
        emptyDistanceM: 250,
        loadedPercent: 50,
      },
    });
    const unregistered = body.items.find((item: any) => item.id === ids.i5);
    expect(unregistered).toMatchObject({ identifier: 'OP-9', operatorName: '', endReason: 'ongoing' });
  });

  it('filters by identifier (exact), search and asset, and keeps customers apart', async () => {
    const range = 'from=2026-03-01&to=2026-03-31';
    expect(namesOf(await get(`/telemetry/identifier-sessions?${range}&identifier=OP-2`))).toEqual(['i3', 'i4']);
    expect(namesOf(await get(`/telemetry/identifier-sessions?${range}&identifier=OP`))).toEqual([]);
    expect(namesOf(await get(`/telemetry/identifier-sessions?${range}&q=okafor`))).toEqual(['i3', 'i4']);
    expect(namesOf(await get(`/telemetry/identifier-sessions?${range}&identifier=OP-2`, fleet.globexKey))).toEqual([
      'i4',
    ]);
    const other = await api.external(
      `/telemetry/identifier-sessions?assetId=${fleet.byName['SC 01']!.id}`,
      fleet.globexKey,
    );
    expect(other.status).toBe(404);
  });
});

describe('GET /telemetry/operators', () => {
  it('sums each operator’s sessions overlapping the range; a tenant key also sees idle registered operators', async () => {
    const body = await get('/telemetry/operators?from=2026-03-10&to=2026-03-10');
    expect(body.range).toEqual({ from: '2026-03-10T00:00:00.000Z', to: '2026-03-10T23:59:59.999Z' });
    expect(body.items).toEqual([
      {
        identifier: 'OP-1',
        operatorName: 'Ana Costa',
        distanceM: 800,
        durationSeconds: 10800,
        sessionCount: 2,
        lastSeenAt: '2026-03-10T09:00:00.000Z',
      },
      {
        identifier: 'OP-2',
        operatorName: 'Ben Okafor',
        distanceM: 700,
        durationSeconds: 3600,
        sessionCount: 1,
        lastSeenAt: '2026-03-10T13:00:00.000Z',
      },
      {
        identifier: 'OP-3',
        operatorName: 'Idle Ivan',
        distanceM: 0,
        durationSeconds: 0,
        sessionCount: 0,
        lastSeenAt: null,
      },
      {
        identifier: 'OP-9',
        operatorName: '',
        distanceM: 500,
        durationSeconds: 1800,
        sessionCount: 1,
        lastSeenAt: '2026-03-10T14:30:00.000Z',
      },
    ]);
  });

  it('counts for a customer key only the work on its own assets', async () => {
    const acme = await get('/telemetry/operators?from=2026-03-10&to=2026-03-10', fleet.acmeKey);
    expect(acme.items.map((item: any) => [item.identifier, item.sessionCount])).toEqual([['OP-1', 2]]);
    const month = await get('/telemetry/operators?from=2026-03-01&to=2026-03-31', fleet.acmeKey);
    expect(month.items.map((item: any) => [item.identifier, item.sessionCount, item.durationSeconds])).toEqual([
      ['OP-1', 2, 10800],
      ['OP-2', 1, 3600],
    ]);
  });

  it('filters by identifier, search text and asset, and pages by identifier', async () => {
    const range = 'from=2026-03-10&to=2026-03-10';
    expect(
      (await get(`/telemetry/operators?${range}&identifier=OP-3`)).items.map((item: any) => item.identifier),
    ).toEqual(['OP-3']);
    expect((await get(`/telemetry/operators?${range}&q=ivan`)).items.map((item: any) => item.identifier)).toEqual([
      'OP-3',
    ]);
    expect(
      (await get(`/telemetry/operators?${range}&assetId=${fleet.byName['SC 03']!.id}`)).items.map(
        (item: any) => item.identifier,
      ),
    ).toEqual(['OP-2', 'OP-9']);
    const second = await get(`/telemetry/operators?${range}&limit=2&offset=2`);
    expect(second.items.map((item: any) => item.identifier)).toEqual(['OP-3', 'OP-9']);
    expect((await api.external('/telemetry/operators?to=nope', fleet.tenantKey)).status).toBe(400);
  });
});
