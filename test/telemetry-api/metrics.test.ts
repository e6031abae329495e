import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { provisioning } from '@gantry/api';
import { availableStorageModes, createTestDatabase, type TestDatabase } from '../support/database.ts';
import { json, startTestApi, type TestApi } from '../support/api.ts';
import { provisioner } from '../support/fixtures.ts';
import { createFleet, insertSegments, insertServiceRequest, type Fleet } from './fixtures.ts';
import { materializeGold } from './gold.ts';

describe.each(availableStorageModes())('utilization and container work (%s mode)', (mode) => {
  let db: TestDatabase;
  let api: TestApi;
  let fleet: Fleet;

  beforeAll(async () => {
    db = await createTestDatabase(`telemetry_metrics_${mode}`, mode);
    api = await startTestApi(db.pool, db.url);
    fleet = await createFleet(db.pool, [
      ['SC 01', 'Acme'],
      ['SC 02', 'Acme'],
      ['SC 03', 'Globex'],
    ]);
    // An Acme asset without a device: no telemetry, so not part of the fleet's capacity.
    await provisioning.createAsset(provisioner(db.pool), fleet.tenantId, {
      name: 'SC 09',
      identifier: 'SC-09',
      customerName: 'Acme',
    });
    const t = fleet.tenantId;
    const { byName } = fleet;
    await insertSegments(db.pool, t, byName['SC 01']!, [
      {
        start: '2026-05-04T08:00:00Z',
        seconds: 1200,
        moving: true,
        loaded: true,
        distanceM: 3000,
        cycles: 2,
        hourmeterDelta: 1200,
      },
      { start: '2026-05-04T08:20:00Z', seconds: 1800, hourmeterDelta: 1800 },
      { start: '2026-05-04T08:50:00Z', seconds: 600, running: false },
      { start: '2026-05-05T10:00:00Z', seconds: 1800, loaded: true, cycles: 1, hourmeterDelta: 1800 },
    ]);
    await insertSegments(db.pool, t, byName['SC 02']!, [
      { start: '2026-05-04T09:00:00Z', seconds: 3600, moving: true, distanceM: 5000, cycles: 1, hourmeterDelta: 3600 },
      // Parked until the end of the 5th: TimescaleDB's watermark follows the newest bucket with data.
      { start: '2026-05-05T23:00:00Z', seconds: 3600, running: false },
    ]);
    await insertSegments(db.pool, t, byName['SC 03']!, [
      {
        start: '2026-05-04T08:00:00Z',
        seconds: 3600,
        moving: true,
        loaded: true,
        distanceM: 4000,
        cycles: 3,
        hourmeterDelta: 3600,
      },
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

  const at = (body: any, start: string, assetName?: string) =>
    body.items.find(
      (item: any) => item.bucketStart === start && (assetName === undefined || item.asset?.name === assetName),
    );

  it('answers live while gold has never been refreshed, with every hour of a whole-day range for the fleet', async () => {
    const body = await get('/telemetry/utilization?from=2026-05-04&to=2026-05-04&bucket=hour&groupBy=fleet');
    expect(body).toMatchObject({ bucket: 'hour', groupBy: 'fleet', source: 'live', paging: { limit: 100, offset: 0 } });
    expect(body.aggregateRefresh).toMatchObject({ status: 'pending', coverageTo: null });
    expect(body.range).toEqual({ from: '2026-05-04T00:00:00.000Z', to: '2026-05-04T23:59:59.999Z' });
    expect(body.items).toHaveLength(24);
    expect(body.items[0]).toMatchObject({
      bucketStart: '2026-05-04T00:00:00.000Z',
      bucketEnd: '2026-05-04T01:00:00.000Z',
      groupType: 'fleet',
      asset: null,
      runningSeconds: 0,
      utilizationPercent: 0,
    });
    expect(at(body, '2026-05-04T08:00:00.000Z')).toEqual({
      bucketStart: '2026-05-04T08:00:00.000Z',
      bucketEnd: '2026-05-04T09:00:00.000Z',
      groupType: 'fleet',
      asset: null,
      distanceM: 7000,
      hourmeterDelta: 6600,
      idlePercent: 27.27,
      runningSeconds: 6600,
      stationaryRunningSeconds: 1800,
      utilizationPercent: 61.11,
      containerWork: {
        containerCycleCount: 5,
        emptyDistanceM: 0,
        emptySeconds: 1800,
        loadedDistanceM: 7000,
        loadedPercent: 72.73,
        loadedSeconds: 4800,
      },
    });
    expect(at(body, '2026-05-04T09:00:00.000Z')).toMatchObject({
      runningSeconds: 3600,
      utilizationPercent: 33.33,
      idlePercent: 0,
    });
  });

  it('sums only a customer key’s own telemetry assets in the fleet series', async () => {
    const body = await get('/telemetry/utilization?from=2026-05-04&to=2026-05-04&groupBy=fleet', fleet.acmeKey);
    expect(at(body, '2026-05-04T08:00:00.000Z')).toMatchObject({
      runningSeconds: 3000,
      utilizationPercent: 41.67,
      idlePercent: 60,
      distanceM: 3000,
      containerWork: { containerCycleCount: 2, loadedSeconds: 1200, emptySeconds: 1800, loadedPercent: 40 },
    });
    expect(at(body, '2026-05-04T09:00:00.000Z')).toMatchObject({ runningSeconds: 3600, utilizationPercent: 50 });
    const globex = await get('/telemetry/container-work?from=2026-05-04&to=2026-05-04', fleet.globexKey);
    expect(at(globex, '2026-05-04T08:00:00.000Z')).toMatchObject({
      containerCycleCount: 3,
      loadedSeconds: 3600,
      loadedPercent: 100,
    });
    expect(at(globex, '2026-05-04T09:00:00.000Z')).toMatchObject({ containerCycleCount: 0, loadedSeconds: 0 });
    const other = await api.external(`/telemetry/utilization?assetId=${fleet.byName['SC 03']!.id}`, fleet.acmeKey);
    expect(other.status).toBe(404);
  });

  it('narrows the fleet to the assets q finds (name, identifier, display code or device id)', async () => {
    const byName = await get('/telemetry/utilization?from=2026-05-04&to=2026-05-04&groupBy=fleet&q=sc%2003');
    // One asset found: its own hour, at its own capacity.
    expect(at(byName, '2026-05-04T08:00:00.000Z')).toMatchObject({
      runningSeconds: 3600,
      utilizationPercent: 100,
      distanceM: 4000,
    });
    expect(at(byName, '2026-05-04T09:00:00.000Z')).toMatchObject({ runningSeconds: 0 });
    const byDevice = await get(
      `/telemetry/container-work?from=2026-05-04&to=2026-05-04&groupBy=asset&q=${fleet.byName['SC 02']!.deviceId.toUpperCase()}`,
    );
    expect(byDevice.items.map((item: any) => [item.asset.name, item.bucketStart])).toEqual([
      ['SC 02', '2026-05-04T09:00:00.000Z'],
    ]);
    const none = await get('/telemetry/utilization?from=2026-05-04&to=2026-05-04&groupBy=asset&q=nothing-like-this');
    expect(none.items).toEqual([]);
    // A customer key's search stays inside its scope.
    const acme = await get('/telemetry/utilization?from=2026-05-04&to=2026-05-04&groupBy=asset&q=SC-03', fleet.acmeKey);
    expect(acme.items).toEqual([]);
  });

  it('lists per-asset buckets with their asset, and per-day buckets', async () => {
    const body = await get('/telemetry/utilization?from=2026-05-04&to=2026-05-04&groupBy=asset');
    expect(body.items.map((item: any) => [item.bucketStart.slice(11, 16), item.asset.name])).toEqual(
      [
        ['08:00', 'SC 01'],
        ['08:00', 'SC 03'],
      ]
        .sort((a, b) => (fleet.byName[a[1]!]!.id < fleet.byName[b[1]!]!.id ? -1 : 1))
        .concat([['09:00', 'SC 02']]),
    );
    expect(at(body, '2026-05-04T08:00:00.000Z', 'SC 01')).toMatchObject({
      groupType: 'asset',
      asset: {
        id: fleet.byName['SC 01']!.id,
        name: 'SC 01',
        identifier: 'SC-01',
        assetType: 'Straddle carrier',
        customerName: 'Acme',
      },
      runningSeconds: 3000,
      utilizationPercent: 83.33,
      idlePercent: 60,
      containerWork: { loadedPercent: 40, containerCycleCount: 2 },
    });
    const days = await get('/telemetry/utilization?from=2026-05-04&to=2026-05-05&bucket=day', fleet.acmeKey);
    expect(days.items.map((item: any) => [item.bucketStart, item.runningSeconds, item.utilizationPercent])).toEqual([
      ['2026-05-04T00:00:00.000Z', 6600, 3.82],
      ['2026-05-05T00:00:00.000Z', 1800, 1.04],
    ]);
    const work = await get(
      '/telemetry/container-work?from=2026-05-04&to=2026-05-05&bucket=day&groupBy=asset&assetId=' +
        fleet.byName['SC 01']!.id,
    );
    expect(work.items).toEqual([
      expect.objectContaining({
        bucketStart: '2026-05-04T00:00:00.000Z',
        containerCycleCount: 2,
        loadedSeconds: 1200,
        emptySeconds: 1800,
        loadedDistanceM: 3000,
        emptyDistanceM: 0,
        loadedPercent: 40,
      }),
      expect.objectContaining({
        bucketStart: '2026-05-05T00:00:00.000Z',
        containerCycleCount: 1,
        loadedSeconds: 1800,
        emptySeconds: 0,
        loadedPercent: 100,
      }),
    ]);
  });

  it('widens an RFC 3339 range to whole buckets and pages the series', async () => {
    const body = await get('/telemetry/utilization?from=2026-05-04T08:30:00Z&to=2026-05-04T09:15:00Z');
    expect(body.range).toEqual({ from: '2026-05-04T08:00:00.000Z', to: '2026-05-04T10:00:00.000Z' });
    expect(body.items.map((item: any) => item.bucketStart)).toEqual([
      '2026-05-04T08:00:00.000Z',
      '2026-05-04T09:00:00.000Z',
    ]);
    const page = await get('/telemetry/utilization?from=2026-05-04&to=2026-05-04&limit=5&offset=5');
    expect(page.paging).toEqual({ limit: 5, offset: 5 });
    expect(page.items.map((item: any) => item.bucketStart.slice(11, 13))).toEqual(['05', '06', '07', '08', '09']);
    expect(page.items[3].runningSeconds).toBe(6600);
  });

  it('says gold once gold is built, with the same numbers, up to the current hour', async () => {
    const live = await get('/telemetry/utilization?from=2026-05-04&to=2026-05-05&groupBy=asset');
    const liveDays = await get('/telemetry/container-work?from=2026-05-04&to=2026-05-05&bucket=day');
    expect(live.source).toBe('live');
    await materializeGold(
      db,
      ['utilization_hourly', 'utilization_daily'],
      '2026-05-01T00:00:00Z',
      '2026-05-06T00:00:00Z',
    );

    const gold = await get('/telemetry/utilization?from=2026-05-04&to=2026-05-05&groupBy=asset');
    expect(gold.source).toBe('gold');
    expect(gold.aggregateRefresh.status).toBe('ok');
    expect(gold.aggregateRefresh.coverageFrom).toBe('2026-05-01T00:00:00.000Z');
    expect(Date.parse(gold.aggregateRefresh.coverageTo)).toBeGreaterThanOrEqual(Date.parse('2026-05-05T11:00:00Z'));
    expect(gold.aggregateRefresh.updatedAt).not.toBeNull();
    expect(gold.items).toEqual(live.items);
    const goldDays = await get('/telemetry/container-work?from=2026-05-04&to=2026-05-05&bucket=day');
    expect(goldDays.source).toBe('gold');
    expect(goldDays.items).toEqual(liveDays.items);

    // Utilization gold is kept by differences as derivation commits: once built, it covers
    // everything up to the current hour, so no past range lies beyond it.
    const beyond = await get('/telemetry/utilization?from=2026-05-04&to=2026-05-08');
    expect(beyond.source).toBe('gold');

    // A segment written other than by derivation (as here) is not in gold until a rebuild.
    await insertSegments(db.pool, fleet.tenantId, fleet.byName['SC 02']!, [
      { start: '2026-05-04T11:00:00Z', seconds: 900 },
    ]);
    const stale = await get('/telemetry/utilization?from=2026-05-04&to=2026-05-04');
    expect(stale.source).toBe('gold');
    expect(at(stale, '2026-05-04T11:00:00.000Z').runningSeconds).toBe(0);
  });

  it('a key’s fleet series follows an asset moved to another customer and an asset deleted', async () => {
    // Gold (and the fleet rollup) hold the 4th and 5th since the previous test.
    const series = async (key: string) => {
      const fleetBody = await get('/telemetry/utilization?from=2026-05-04&to=2026-05-05&groupBy=fleet&limit=500', key);
      const assets = await get('/telemetry/utilization?from=2026-05-04&to=2026-05-05&groupBy=asset&limit=500', key);
      // Every fleet bucket is the sum of the key's asset rows of that bucket.
      for (const item of fleetBody.items) {
        const rows = assets.items.filter((row: any) => row.bucketStart === item.bucketStart);
        expect(item.runningSeconds).toBe(rows.reduce((sum: number, row: any) => sum + row.runningSeconds, 0));
        expect(item.containerWork.containerCycleCount).toBe(
          rows.reduce((sum: number, row: any) => sum + row.containerWork.containerCycleCount, 0),
        );
      }
      return fleetBody;
    };
    expect(at(await series(fleet.acmeKey), '2026-05-04T09:00:00.000Z').runningSeconds).toBe(3600);
    expect(at(await series(fleet.globexKey), '2026-05-04T09:00:00.000Z').runningSeconds).toBe(0);

    await db.pool.query(`UPDATE assets SET customer_name = 'Globex' WHERE id = $1`, [fleet.byName['SC 02']!.id]);
    expect(at(await series(fleet.acmeKey), '2026-05-04T09:00:00.000Z').runningSeconds).toBe(0);
    expect(at(await series(fleet.globexKey), '2026-05-04T09:00:00.000Z').runningSeconds).toBe(3600);
    expect(at(await series(fleet.tenantKey), '2026-05-04T09:00:00.000Z').runningSeconds).toBe(3600);

    await db.pool.query(`DELETE FROM assets WHERE id = $1`, [fleet.byName['SC 03']!.id]);
    expect(at(await series(fleet.globexKey), '2026-05-04T08:00:00.000Z').runningSeconds).toBe(0);
    expect(at(await series(fleet.tenantKey), '2026-05-04T08:00:00.000Z').runningSeconds).toBe(3000);
  });

  it('answers 400 naming the parameter for bad input', async () => {
    for (const [path, expected] of [
      ['/telemetry/utilization?bucket=week', 'bucket'],
      ['/telemetry/utilization?groupBy=team', 'groupBy'],
      ['/telemetry/container-work?from=2026-01-01&to=2026-05-01&bucket=hour', 'at most 93 days'],
      ['/telemetry/container-work?from=2026-05-01&to=2026-04-01', 'from must be before to'],
      ['/telemetry/utilization?assetId=abc', 'assetId'],
      ['/telemetry/utilization?limit=600', 'limit'],
      ['/telemetry/utilization?to=05/04/2026', 'to'],
    ] as const) {
      const response = await api.external(path, fleet.tenantKey);
      expect(response.status, path).toBe(400);
      expect((await json(response)).error, path).toContain(expected);
    }
    expect(
      (await api.external('/telemetry/utilization?from=2026-01-01&to=2026-05-01&bucket=day', fleet.tenantKey)).status,
    ).toBe(200);
  });
});

describe('GET /telemetry/service-request-metrics', () => {
  let db: TestDatabase;
  let api: TestApi;
  let fleet: Fleet;

  beforeAll(async () => {
    db = await createTestDatabase('telemetry_sr_metrics');
    api = await startTestApi(db.pool, db.url);
    fleet = await createFleet(db.pool, [
      ['SC 01', 'Acme'],
      ['SC 02', 'Acme'],
      ['SC 03', 'Globex'],
    ]);
    const t = fleet.tenantId;
    const { byName } = fleet;
    await insertServiceRequest(db.pool, t, {
      createdAt: '2026-05-04T08:10:00Z',
      status: 'new',
      priority: 'high',
      asset: byName['SC 01'],
    });
    await insertServiceRequest(db.pool, t, {
      createdAt: '2026-05-04T08:40:00Z',
      status: 'resolved',
      priority: 'urgent',
      asset: byName['SC 03'],
    });
    await insertServiceRequest(db.pool, t, {
      createdAt: '2026-05-04T09:05:00Z',
      status: 'closed',
      asset: byName['SC 01'],
    });
    await insertServiceRequest(db.pool, t, {
      createdAt: '2026-05-04T09:30:00Z',
      status: 'cancelled',
      customerName: 'Acme',
    });
    await insertServiceRequest(db.pool, t, {
      createdAt: '2026-05-05T12:00:00Z',
      status: 'in_progress',
      priority: 'high',
      asset: byName['SC 02'],
    });
    await insertServiceRequest(db.pool, t, {
      createdAt: '2026-05-05T13:00:00Z',
      status: 'waiting_customer',
      priority: 'urgent',
      asset: byName['SC 02'],
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

  const counts = (item: any) => [
    item.totalCount,
    item.openCount,
    item.resolvedCount,
    item.closedCount,
    item.highPriorityCount,
    item.urgentPriorityCount,
  ];

  it('counts requests by creation bucket for the fleet, every bucket listed, always live', async () => {
    const body = await get('/telemetry/service-request-metrics?from=2026-05-04&to=2026-05-04');
    expect(body).toMatchObject({
      bucket: 'hour',
      groupBy: 'fleet',
      source: 'live',
      aggregateRefresh: { status: 'not_aggregated', coverageFrom: null, coverageTo: null, updatedAt: null },
    });
    expect(body.range).toEqual({ from: '2026-05-04T00:00:00.000Z', to: '2026-05-04T23:59:59.999Z' });
    expect(body.items).toHaveLength(24);
    expect(body.items[8]).toEqual({
      bucketStart: '2026-05-04T08:00:00.000Z',
      bucketEnd: '2026-05-04T09:00:00.000Z',
      groupType: 'fleet',
      asset: null,
      totalCount: 2,
      openCount: 1,
      resolvedCount: 1,
      closedCount: 0,
      highPriorityCount: 1,
      urgentPriorityCount: 1,
    });
    expect(counts(body.items[9])).toEqual([2, 0, 0, 1, 0, 0]);
    expect(counts(body.items[10])).toEqual([0, 0, 0, 0, 0, 0]);
  });

  it('counts for a customer key only its own requests', async () => {
    const acme = await get(
      '/telemetry/service-request-metrics?from=2026-05-04&to=2026-05-05&bucket=day',
      fleet.acmeKey,
    );
    expect(acme.items.map(counts)).toEqual([
      [3, 1, 0, 1, 1, 0],
      [2, 2, 0, 0, 1, 1],
    ]);
    const globex = await get(
      '/telemetry/service-request-metrics?from=2026-05-04&to=2026-05-05&bucket=day',
      fleet.globexKey,
    );
    expect(globex.items.map(counts)).toEqual([
      [1, 0, 1, 0, 0, 1],
      [0, 0, 0, 0, 0, 0],
    ]);
  });

  it('narrows requests by q over their own text and their asset', async () => {
    const byAsset = await get('/telemetry/service-request-metrics?from=2026-05-04&to=2026-05-05&bucket=day&q=sc-02');
    expect(byAsset.items.map((item: any) => item.totalCount)).toEqual([0, 2]);
    const byCode = await get('/telemetry/service-request-metrics?from=2026-05-04&to=2026-05-05&bucket=day&q=leak');
    expect(byCode.items.map((item: any) => item.totalCount)).toEqual([4, 2]);
    const acme = await get(
      '/telemetry/service-request-metrics?from=2026-05-04&to=2026-05-05&bucket=day&q=sc-03',
      fleet.acmeKey,
    );
    expect(acme.items.map((item: any) => item.totalCount)).toEqual([0, 0]);
  });

  it('groups by asset (requests without an asset last, with a null asset) and filters by asset', async () => {
    const body = await get('/telemetry/service-request-metrics?from=2026-05-04&to=2026-05-05&bucket=day&groupBy=asset');
    const day1 = body.items.filter((item: any) => item.bucketStart === '2026-05-04T00:00:00.000Z');
    expect(day1.map((item: any) => item.asset?.name ?? null)).toEqual([
      ...['SC 01', 'SC 03'].sort((a, b) => (fleet.byName[a]!.id < fleet.byName[b]!.id ? -1 : 1)),
      null,
    ]);
    expect(day1.every((item: any) => item.groupType === 'asset')).toBe(true);
    expect(counts(day1.find((item: any) => item.asset?.name === 'SC 01'))).toEqual([2, 1, 0, 1, 1, 0]);
    expect(
      body.items
        .filter((item: any) => item.bucketStart === '2026-05-05T00:00:00.000Z')
        .map((item: any) => [item.asset.name, item.totalCount]),
    ).toEqual([['SC 02', 2]]);
    const one = await get(
      `/telemetry/service-request-metrics?from=2026-05-04&to=2026-05-05&bucket=day&assetId=${fleet.byName['SC 02']!.id}`,
    );
    expect(one.items.map((item: any) => item.totalCount)).toEqual([0, 2]);
    expect(
      (await api.external(`/telemetry/service-request-metrics?assetId=${fleet.byName['SC 03']!.id}`, fleet.acmeKey))
        .status,
    ).toBe(404);
    expect((await api.external('/telemetry/service-request-metrics?bucket=month', fleet.tenantKey)).status).toBe(400);
  });
});
