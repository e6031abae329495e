import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOutbox, createPool, readUtilization } from '@gantry/db';
import { silentLogger } from '@gantry/logger';
import {
  toContainerWorkItem,
  toUtilizationItem,
} from '../../services/api/src/features/telemetry/utilization.service.ts';
import { deriveDirtyDevices } from '../../services/worker/src/features/derivation/service.ts';
import { refreshGold } from '../../services/worker/src/features/gold/refresh.ts';
import { parseCsv } from '../reporting/files.ts';
import { json, startTestApi, testConfig, type TestApi } from '../support/api.ts';
import { availableStorageModes, createTestDatabase, type TestDatabase } from '../support/database.ts';
import { countOf } from '../support/ingest.ts';
import { lateHistory, uploadLate } from '../support/late-upload.ts';
import { createFleet, type Fleet } from '../telemetry-api/fixtures.ts';

// A month that two machines' trackers buffered, uploaded late as store-and-forward batch
// messages through ingest's own write path, derived and refreshed into gold by the
// worker's own steps (deriveDirtyDevices until nothing is dirty, then refreshGold — the
// gold loop's step — until the log is applied). Right then the API answers the whole
// month from gold, in both storage modes: every minute of the position history, and
// utilization and container work (kept by derivation itself) equal to the live
// computation from segments.

const MINUTE = 60_000;
const DAY = 86_400_000;
const DAYS = 31;

describe.each(availableStorageModes())('a month uploaded late (%s mode)', (mode) => {
  // Whole days: the month's first and last day are then complete in day buckets too.
  const end = Math.floor(Date.now() / DAY) * DAY;
  const start = end - DAYS * DAY;
  let db: TestDatabase;
  let api: TestApi;
  let fleet: Fleet;
  /** Gold log rows left when derivation had caught up (utilization's apart), and the batches the refresh materialized. */
  let logged = 0;
  let utilizationLogged = 0;
  let batches = 0;

  beforeAll(async () => {
    db = await createTestDatabase('late_upload', mode);
    api = await startTestApi(db.pool, db.url);
    fleet = await createFleet(db.pool, [
      ['SC 01', 'Acme'],
      ['SC 02', 'Acme'],
    ]);
    const config = testConfig(db.url);
    const logger = silentLogger();
    // Gold materialized once while empty, as a running installation has it.
    await refreshGold({ pool: db.pool, logger, storageMode: mode });
    const history = lateHistory({ deviceIds: fleet.assets.map((asset) => asset.deviceId), end, days: DAYS });
    await uploadLate(db.pool, config, history, { uploadAt: Date.now() });
    const derivation = { pool: db.pool, outbox: createOutbox({ maxAttempts: 3 }), logger, config };
    while ((await deriveDirtyDevices(derivation)).devices > 0);
    logged = await countOf(db.pool, 'SELECT count(*) AS count FROM gold_invalidations');
    utilizationLogged = await countOf(
      db.pool,
      `SELECT count(*) AS count FROM gold_invalidations WHERE relation LIKE 'utilization%'`,
    );
    // The refresh on connections that hear TimescaleDB's LOG line for each materialized batch.
    const url = new URL(db.url);
    url.searchParams.set('options', '-c client_min_messages=log');
    const refreshPool = createPool(url.toString(), { max: 2, applicationName: 'gantry-test-refresh' });
    refreshPool.on('connect', (client) => {
      client.on('notice', (notice) => {
        if (/^inserted \d+ row\(s\) into materialization table/.test(notice.message ?? '')) batches += 1;
      });
    });
    try {
      for (let step = 0; ; step += 1) {
        const result = await refreshGold({ pool: refreshPool, logger, storageMode: mode });
        expect(result.failed).toEqual([]);
        if (!result.more || step > 100) break;
      }
    } finally {
      await refreshPool.end();
    }
  }, 300_000);

  afterAll(async () => {
    await api?.close();
    await db?.drop();
  });

  it(
    mode === 'timescaledb'
      ? 'refreshes the logged month in a few dozen batches, a day of minutes each, not ten buckets at a time'
      : 'has gold complete as derivation commits: nothing is left in the log to refresh',
    () => {
      expect(utilizationLogged).toBe(0);
      if (mode === 'timescaledb') {
        expect(logged).toBeGreaterThan(0);
        // Positions over 31 days: a slice per day of minutes and its quarter hours.
        expect(batches).toBeGreaterThan(0);
        expect(batches).toBeLessThan(200);
      } else expect(logged).toBe(0);
    },
  );

  const get = async (path: string) => {
    const response = await api.external(path, fleet.tenantKey);
    expect(response.status).toBe(200);
    return json(response);
  };

  it('holds every minute of the month in the position history, and every quarter hour', async () => {
    const asset = fleet.byName['SC 01']!;
    const range = `from=${new Date(start).toISOString()}&to=${new Date(end).toISOString()}`;
    const minutes = await api.external(
      `/telemetry/positions/export.csv?assetId=${asset.id}&${range}&resolution=1min`,
      fleet.tenantKey,
    );
    expect(minutes.status).toBe(200);
    const rows = parseCsv(await minutes.text());
    const bucket = rows[0]!.indexOf('bucketTs');
    const counted = rows[0]!.indexOf('pointCount');
    const expected = Array.from({ length: DAYS * 1440 }, (_, i) => new Date(start + i * MINUTE).toISOString());
    expect(rows.slice(1).map((row) => new Date(row[bucket]!).toISOString())).toEqual(expected);
    expect(rows.slice(1).every((row) => row[counted] === '1')).toBe(true);

    const quarters = await get(`/telemetry/assets/${asset.id}/positions?${range}&resolution=15min&limit=500`);
    expect(quarters.source).toBe('gold');
    expect(quarters.items).toHaveLength(500);
    expect(quarters.items.every((item: { pointCount: number }) => item.pointCount === 15)).toBe(true);
  });

  it('answers utilization and container work from gold, equal to the live computation from segments', async () => {
    const days = `from=${new Date(start).toISOString().slice(0, 10)}&to=${new Date(end - DAY).toISOString().slice(0, 10)}`;
    const live = await readUtilization(db.pool, {
      tenantId: fleet.tenantId,
      assetIds: fleet.assets.map((asset) => asset.id),
      from: new Date(start),
      to: new Date(end),
      bucket: 'day',
      groupBy: 'asset',
      forceSource: 'live',
    });
    expect(live.rows).toHaveLength(2 * DAYS);
    // The live rows shaped as the API shapes its items (bucket fields aside), keyed by asset.
    const expected = (toItem: typeof toUtilizationItem | typeof toContainerWorkItem) =>
      live.rows.map((row) => {
        const {
          asset: _a,
          groupType: _g,
          bucketEnd: _e,
          ...figures
        } = toItem({
          ...row,
          asset: null,
          capacitySeconds: 86_400,
        });
        return { ...figures, assetId: row.assetId };
      });
    const answered = (items: Array<{ asset: { id: string }; groupType: string; bucketEnd: string }>) =>
      items.map(({ asset, groupType: _g, bucketEnd: _e, ...figures }) => ({ ...figures, assetId: asset.id }));

    const utilization = await get(`/telemetry/utilization?${days}&bucket=day&groupBy=asset&limit=500`);
    expect(utilization.source).toBe('gold');
    expect(utilization.aggregateRefresh.status).toBe('ok');
    expect(answered(utilization.items)).toEqual(expected(toUtilizationItem));

    const work = await get(`/telemetry/container-work?${days}&bucket=day&groupBy=asset&limit=500`);
    expect(work.source).toBe('gold');
    expect(answered(work.items)).toEqual(expected(toContainerWorkItem));
    // A lift in each of the 16 running hours of every day, per machine.
    expect(work.items.every((item: { containerCycleCount: number }) => item.containerCycleCount === 16)).toBe(true);
  });
});
