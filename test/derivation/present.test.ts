import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createOutbox,
  readGoldCoverage,
  readUtilization,
  utilizationStatement,
  type UtilizationQuery,
} from '@gantry/db';
import { provisioning } from '@gantry/api';
import { MachineScript, destination, type LatLon, type SimulatedMessage } from '@gantry/simulator';
import { workerLoops } from '../../services/worker/src/loops.ts';
import { availableStorageModes } from '../support/database.ts';
import {
  createDerivationFixture,
  deriveAll,
  refreshAll,
  storeReadings,
  type DerivationFixture,
  type FixtureDevice,
} from './helpers.ts';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const YARD: LatLon = { lat: 43.2965, lon: 5.3698 };

function work(device: FixtureDevice, start: number, seed: number): SimulatedMessage[] {
  let here = destination(YARD, seed * 37, seed * 41);
  const script = new MachineScript({ deviceId: device.deviceId, start, position: here, gpsEveryS: 10 });
  script.ignitionOn().login(`OP-${seed}`);
  for (let leg = 0; leg < 3; leg += 1) {
    here = destination(here, 250 + seed * 11 + leg * 40, (seed * 50 + leg * 95) % 360);
    script
      .drive(here, 10 + ((seed + leg) % 4) * 2)
      .lift()
      .idle(60 + leg * 30)
      .drop()
      .idle(30);
  }
  script.shock(2.9).idle(90).ignitionOff();
  return script.messages();
}

/**
 * The fleet rollup's rows next to the same sums taken from per-asset gold over the
 * assets that are the fleet now (an asset with a device), tenant-wide and per customer.
 * Numbers as float8: the rollup's numeric sums keep the scale of what was added and
 * taken away, the values are the same.
 */
async function fleetVersusGold(fixture: DerivationFixture, grain: 'hourly' | 'daily') {
  const columns = `asset_count, running_seconds, moving_seconds, stationary_running_seconds, loaded_seconds, empty_seconds,
    distance_m, loaded_distance_m, empty_distance_m, hourmeter_delta, container_cycle_count, imu_anomaly_count,
    imu_sample_count, data_seconds`;
  const asFloat = columns
    .split(',')
    .map((c) => `${c.trim()}::float8 AS ${c.trim()}`)
    .join(', ');
  const stored = await fixture.pool.query(
    `SELECT all_customers, customer_name, bucket, ${asFloat} FROM utilization_fleet_${grain}
      WHERE tenant_id = $1 ORDER BY all_customers, customer_name, bucket`,
    [fixture.tenantId],
  );
  const sums = columns
    .split(',')
    .slice(1)
    .map((c) => `coalesce(sum(g.${c.trim()}), 0)::float8 AS ${c.trim()}`)
    .join(', ');
  const expected = await fixture.pool.query(
    `SELECT GROUPING(a.customer_name) = 1 AS all_customers,
            CASE WHEN GROUPING(a.customer_name) = 1 THEN '' ELSE a.customer_name END AS customer_name,
            g.bucket, count(*)::float8 AS asset_count, ${sums}
       FROM utilization_${grain} g JOIN assets a ON a.id = g.asset_id
      WHERE g.tenant_id = $1 AND EXISTS (SELECT 1 FROM devices d WHERE d.asset_id = a.id)
      GROUP BY GROUPING SETS ((g.bucket, a.customer_name), (g.bucket))
      ORDER BY 1, 2, 3`,
    [fixture.tenantId],
  );
  return { stored: stored.rows, expected: expected.rows };
}

/** The telemetry assets a key of that scope sees, as the API lists them. */
async function fleetAssets(fixture: DerivationFixture, customerName: string | null): Promise<string[]> {
  const { rows } = await fixture.pool.query<{ id: string }>(
    `SELECT a.id FROM assets a WHERE a.tenant_id = $1 AND ($2::text IS NULL OR a.customer_name = $2)
        AND EXISTS (SELECT 1 FROM devices d WHERE d.asset_id = a.id) ORDER BY a.id`,
    [fixture.tenantId, customerName],
  );
  return rows.map((row) => row.id);
}

describe.each(availableStorageModes())('the present and the fleet rollup (%s)', (mode) => {
  let fixture: DerivationFixture;
  const day = Math.floor((Date.now() - DAY) / DAY) * DAY;

  beforeAll(async () => {
    fixture = await createDerivationFixture('present', mode, 6);
    // Yesterday's work for every asset, gold built.
    for (const [index, device] of fixture.devices.entries()) {
      await storeReadings(fixture, work(device, day + (6 + index) * HOUR, index + 1));
    }
    await deriveAll(fixture);
    await refreshAll(fixture);
  });
  afterAll(async () => fixture?.drop());

  async function expectFleetEqualsGold(): Promise<void> {
    for (const grain of ['hourly', 'daily'] as const) {
      const { stored, expected } = await fleetVersusGold(fixture, grain);
      expect(expected.length).toBeGreaterThan(0);
      expect(stored).toEqual(expected);
    }
    // Through the read path too, for every scope: the rollup's answer is the per-asset sum.
    for (const customerName of [null, 'Customer A', 'Customer B']) {
      for (const bucket of ['hour', 'day'] as const) {
        const query: UtilizationQuery = {
          tenantId: fixture.tenantId,
          assetIds: await fleetAssets(fixture, customerName),
          from: new Date(day - DAY),
          to: new Date(day + 2 * DAY),
          bucket,
          groupBy: 'fleet',
        };
        const perAsset = await readUtilization(fixture.pool, query);
        const rollup = await readUtilization(fixture.pool, { ...query, fleetScope: { customerName } });
        expect((await utilizationStatement(fixture.pool, { ...query, fleetScope: { customerName } })).fleetRollup).toBe(
          true,
        );
        expect(rollup.rows).toEqual(perAsset.rows);
        expect(rollup.source).toBe(perAsset.source);
        // Named by its scope alone (the members read in the statement), gold or live, by
        // fleet or by asset a page at a time: the same rows and the same asset count.
        const { assetIds, ...byScope } = { ...query, fleetScope: { customerName } };
        for (const forceSource of [undefined, 'live'] as const) {
          const source = forceSource ? { forceSource } : {};
          const named = await readUtilization(fixture.pool, { ...query, ...source });
          const scoped = await readUtilization(fixture.pool, { ...byScope, ...source });
          expect(scoped.rows).toEqual(named.rows);
          expect(scoped.source).toBe(named.source);
          expect(scoped.assetCount).toBe(assetIds!.length);
          const page = { groupBy: 'asset' as const, limit: 3, offset: 1 };
          const namedPage = await readUtilization(fixture.pool, { ...query, ...source, ...page });
          if (customerName === null) expect(namedPage.rows.length).toBe(3);
          expect((await readUtilization(fixture.pool, { ...byScope, ...source, ...page })).rows).toEqual(
            namedPage.rows,
          );
        }
      }
    }
  }

  it('once the worker settles, the open hour and day in gold equal the live definition, answered as gold', async () => {
    const now = Date.now();
    // Each script ends a moment before now, so the open hour has every device's last segments.
    const recent = fixture.devices.slice(0, 3).flatMap((device, index) => {
      const script = work(device, 0, index + 20);
      const duration = script.at(-1)!.ts - script[0]!.ts;
      return work(device, now - duration - 1 - index, index + 20);
    });
    await storeReadings(fixture, recent);
    // The worker's own derivation loop: gold changes in each derivation transaction, and
    // nothing is left in the log for a refresher.
    const loops = workerLoops({ ...fixture.derivationDeps, config: fixture.config, storageMode: mode });
    const derive = loops.find((loop) => loop.name === 'derivation')!;
    while ((await derive.runOnce()) > 0);
    const { rows: log } = await fixture.pool.query(
      `SELECT count(*)::int AS n FROM gold_invalidations WHERE relation = 'utilization_hourly'`,
    );
    expect(log[0].n).toBe(0);

    const hour = Math.floor(now / HOUR) * HOUR;
    for (const bucket of ['hour', 'day'] as const) {
      for (const groupBy of ['asset', 'fleet'] as const) {
        const query: UtilizationQuery = {
          tenantId: fixture.tenantId,
          assetIds: await fleetAssets(fixture, null),
          from: new Date(hour - HOUR),
          to: new Date(now),
          bucket,
          groupBy,
          ...(groupBy === 'fleet' ? { fleetScope: { customerName: null } } : {}),
        };
        const gold = await readUtilization(fixture.pool, query);
        const live = await readUtilization(fixture.pool, { ...query, forceSource: 'live' });
        expect(gold.source).toBe('gold');
        expect(live.source).toBe('live');
        expect(gold.rows.length).toBeGreaterThan(0);
        expect(gold.rows).toEqual(live.rows);
        expect(
          gold.rows.some(
            (row) => row.bucketStart.getTime() === (bucket === 'hour' ? hour : Math.floor(now / DAY) * DAY),
          ),
        ).toBe(true);
      }
    }
    const coverage = await readGoldCoverage(fixture.pool, 'utilization_hourly');
    expect(coverage.coverageTo!.getTime()).toBeGreaterThan(now);
    expect(coverage.updatedAt!.getTime()).toBeGreaterThanOrEqual(Math.floor(now / 1000) * 1000 - 1000);
    await expectFleetEqualsGold();
  });

  /** Asset 4's evening of yesterday, derived (no gold refresh after it); the query of its hours. */
  async function deriveEvening(): Promise<UtilizationQuery> {
    const device = fixture.devices[3]!;
    await storeReadings(fixture, work(device, day + 20 * HOUR, 30));
    await deriveAll(fixture);
    return {
      tenantId: fixture.tenantId,
      assetIds: [device.assetId],
      from: new Date(day + 20 * HOUR),
      to: new Date(day + 22 * HOUR),
      bucket: 'hour',
    };
  }

  it('a bucket is in gold, per asset and in the rollup, as soon as the derivation that wrote it commits', async () => {
    const query = await deriveEvening();
    const gold = await readUtilization(fixture.pool, query);
    const live = await readUtilization(fixture.pool, { ...query, forceSource: 'live' });
    expect(gold.source).toBe('gold');
    expect(gold.rows.length).toBeGreaterThan(0);
    expect(gold.rows).toEqual(live.rows);
    const fleet = { ...query, assetIds: await fleetAssets(fixture, null), groupBy: 'fleet' as const };
    const rollup = await readUtilization(fixture.pool, { ...fleet, fleetScope: { customerName: null } });
    expect(rollup.source).toBe('gold');
    expect(rollup.rows).toEqual((await readUtilization(fixture.pool, { ...fleet, forceSource: 'live' })).rows);
    const { assetIds: _named, ...byScope } = { ...fleet, fleetScope: { customerName: null } };
    const scoped = await readUtilization(fixture.pool, byScope);
    expect(scoped.source).toBe('gold');
    expect(scoped.rows).toEqual(rollup.rows);
    await expectFleetEqualsGold();
  });

  it('the rollup equals the sum of per-asset gold after an asset moves to another customer', async () => {
    const moved = fixture.devices[0]!;
    await fixture.pool.query(`UPDATE assets SET customer_name = 'Customer B' WHERE id = $1`, [moved.assetId]);
    await expectFleetEqualsGold();
    // Late data for the moved asset lands under its new customer.
    await storeReadings(fixture, work(moved, day + 2 * HOUR, 40));
    await deriveAll(fixture);
    await refreshAll(fixture);
    await expectFleetEqualsGold();
  });

  it('the rollup equals the sum of per-asset gold after an asset is deleted and after a device moves', async () => {
    const deps = { pool: fixture.pool, outbox: createOutbox({ maxAttempts: 3 }) };
    await fixture.pool.query(`DELETE FROM assets WHERE id = $1`, [fixture.devices[1]!.assetId]);
    await expectFleetEqualsGold();
    // The device of asset 3 moves to asset 5: asset 3 leaves the fleet, its gold with it.
    await provisioning.updateDevice(deps, fixture.tenantId, fixture.devices[2]!.id, {
      assetId: fixture.devices[4]!.assetId,
    });
    await expectFleetEqualsGold();
    // A new asset with a device joins with no gold; its first derived hours join the rollup.
    const asset = await provisioning.createAsset(deps, fixture.tenantId, {
      name: 'Reach stacker',
      identifier: 'RS-1',
      customerName: 'Customer A',
    });
    const device = await provisioning.createDevice(deps, fixture.tenantId, {
      deviceId: 'dev-present-new',
      assetId: asset.id,
    });
    fixture.devices.push({ id: device.id, deviceId: 'dev-present-new', assetId: asset.id });
    await storeReadings(fixture, work(fixture.devices.at(-1)!, day + 3 * HOUR, 50));
    await deriveAll(fixture);
    await refreshAll(fixture);
    await expectFleetEqualsGold();
  });

  it('a fleet asked with assets that differ from the rollup (a move between two reads) is still their exact sum', async () => {
    const members = await fleetAssets(fixture, 'Customer A');
    const others = await fleetAssets(fixture, 'Customer B');
    const assetIds = [...members.slice(1), others[0]!];
    const query: UtilizationQuery = {
      tenantId: fixture.tenantId,
      assetIds,
      from: new Date(day - DAY),
      to: new Date(day + 2 * DAY),
      bucket: 'hour',
      groupBy: 'fleet',
    };
    const rollup = await readUtilization(fixture.pool, { ...query, fleetScope: { customerName: 'Customer A' } });
    expect(
      (await utilizationStatement(fixture.pool, { ...query, fleetScope: { customerName: 'Customer A' } })).fleetRollup,
    ).toBe(true);
    const perAsset = await readUtilization(fixture.pool, query);
    expect(perAsset.rows.length).toBeGreaterThan(0);
    expect(rollup.rows).toEqual(perAsset.rows);
  });

  it('a rebuild of the rollup gives the rows kept by differences', async () => {
    const before = await fleetVersusGold(fixture, 'hourly');
    await fixture.pool.query(`UPDATE gold_coverage SET status = 'rebuild' WHERE relation = 'utilization_fleet'`);
    await refreshAll(fixture);
    const { rows } = await fixture.pool.query(`SELECT status FROM gold_coverage WHERE relation = 'utilization_fleet'`);
    expect(rows[0].status).toBe('ok');
    const after = await fleetVersusGold(fixture, 'hourly');
    expect(after.stored).toEqual(before.stored);
  });
});
