import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { liveDefinition, readGoldCoverage } from '@gantry/db';
import { MachineScript, destination, randomSource, type LatLon, type SimulatedMessage } from '@gantry/simulator';
import { deriveDirtyDevices } from '../../services/worker/src/features/derivation/service.ts';
import { availableStorageModes } from '../support/database.ts';
import {
  createDerivationFixture,
  markDirty,
  refreshAll,
  storeReadings,
  type DerivationFixture,
  type FixtureDevice,
} from './helpers.ts';

const HOUR = 3_600_000;
const MINUTE = 60_000;
const YARD: LatLon = { lat: 53.5461, lon: 9.9661 };

/** 20–40 minutes of work: drives, lifts, idling, a shock, switched off at the end or not. */
function work(device: FixtureDevice, start: number, rnd: () => number): SimulatedMessage[] {
  let here = destination(YARD, rnd() * 2000, rnd() * 360);
  const script = new MachineScript({
    deviceId: device.deviceId,
    start,
    position: here,
    gpsEveryS: 10,
    hourmeterEveryS: 60,
  });
  script.ignitionOn();
  for (let leg = 0; leg < 2 + Math.floor(rnd() * 3); leg += 1) {
    here = destination(here, 200 + rnd() * 600, rnd() * 360);
    script.drive(here, 6 + rnd() * 10);
    if (rnd() < 0.5)
      script
        .lift()
        .idle(30 + rnd() * 200)
        .drop();
    script.idle(20 + rnd() * 300);
  }
  if (rnd() < 0.3) script.shock(2.6 + rnd());
  if (rnd() < 0.7) script.ignitionOff();
  return script.messages();
}

/** A relation's rows, next to its definition computed again from segments now (full recompute). */
async function storedVersusDefinition(fixture: DerivationFixture, relation: string) {
  const stored = await fixture.pool.query(`SELECT * FROM ${relation} ORDER BY asset_id, bucket`);
  const live = await fixture.pool.query(`SELECT * FROM (${liveDefinition(relation)}) d ORDER BY asset_id, bucket`);
  return { stored: stored.rows, live: live.rows };
}

/** The fleet rollup's rows next to the same sums taken from the recomputed definition over the fleet's assets now. */
async function fleetVersusDefinition(fixture: DerivationFixture, grain: 'hourly' | 'daily') {
  const sums = `running_seconds, moving_seconds, stationary_running_seconds, loaded_seconds, empty_seconds, distance_m,
    loaded_distance_m, empty_distance_m, hourmeter_delta, container_cycle_count, imu_anomaly_count, imu_sample_count, data_seconds`
    .split(',')
    .map((c) => c.trim());
  const stored = await fixture.pool.query(
    `SELECT all_customers, customer_name, bucket, asset_count, ${sums.map((c) => `${c}::float8 AS ${c}`).join(', ')}
       FROM utilization_fleet_${grain} WHERE tenant_id = $1 ORDER BY all_customers, customer_name, bucket`,
    [fixture.tenantId],
  );
  const expected = await fixture.pool.query(
    `SELECT GROUPING(a.customer_name) = 1 AS all_customers,
            CASE WHEN GROUPING(a.customer_name) = 1 THEN '' ELSE a.customer_name END AS customer_name,
            g.bucket, count(*)::int AS asset_count, ${sums.map((c) => `coalesce(sum(g.${c}), 0)::float8 AS ${c}`).join(', ')}
       FROM (${liveDefinition(`utilization_${grain}`)}) g JOIN assets a ON a.id = g.asset_id
      WHERE g.tenant_id = $1 AND EXISTS (SELECT 1 FROM devices d WHERE d.asset_id = a.id)
      GROUP BY GROUPING SETS ((g.bucket, a.customer_name), (g.bucket))
      ORDER BY 1, 2, 3`,
    [fixture.tenantId],
  );
  return { stored: stored.rows, expected: expected.rows };
}

describe.each(availableStorageModes())('utilization gold kept by differences (%s)', (mode) => {
  let fixture: DerivationFixture;
  const start = Math.floor((Date.now() - 30 * HOUR) / HOUR) * HOUR;

  beforeAll(async () => {
    fixture = await createDerivationFixture('deltas', mode, 5);
    await refreshAll(fixture);
  });
  afterAll(async () => fixture?.drop());

  async function deriveConcurrently(): Promise<void> {
    const one = {
      ...fixture.derivationDeps,
      config: { ...fixture.config, worker: { ...fixture.config.worker, deviceBatch: 2 } },
    };
    const drain = async () => {
      for (let guard = 0; guard < 1000; guard += 1) if ((await deriveDirtyDevices(one)).devices === 0) return;
    };
    await Promise.all([drain(), drain(), drain()]);
  }

  async function expectGoldEqualsRecompute(): Promise<void> {
    for (const relation of ['utilization_hourly', 'utilization_daily']) {
      const { stored, live } = await storedVersusDefinition(fixture, relation);
      expect(stored).toEqual(live);
    }
    for (const grain of ['hourly', 'daily'] as const) {
      const { stored, expected } = await fleetVersusDefinition(fixture, grain);
      expect(stored).toEqual(expected);
    }
    const { rows } = await fixture.pool.query(
      `SELECT (SELECT count(*) FROM utilization_hourly_counts WHERE segments <= 0)
              + (SELECT count(*) FROM utilization_daily_counts WHERE segments <= 0)
              + (SELECT count(*) FROM utilization_fleet_hourly WHERE asset_count <= 0)
              + (SELECT count(*) FROM utilization_fleet_daily WHERE asset_count <= 0) AS empty`,
    );
    expect(rows[0].empty).toBe(0);
  }

  it('after random new data, late data, re-derivations, removed readings and assets changed under them, hourly, daily and fleet gold equal a full recompute from the definition', async () => {
    const rnd = randomSource(20261126);
    const devices = fixture.devices;
    const pick = <T>(items: T[]) => items[Math.floor(rnd() * items.length)]!;
    let vanished = 0;
    for (let round = 0; round < 14; round += 1) {
      for (let step = 0; step < 4; step += 1) {
        const device = pick(devices);
        const at = start + Math.floor(rnd() * 28 * 60) * MINUTE;
        const { rows: span } = await fixture.pool.query<{ first: Date | null; last: Date | null }>(
          `SELECT min(ts) AS first, max(ts) AS last FROM telemetry_readings WHERE device_id = $1`,
          [device.id],
        );
        const first = span[0]?.first?.getTime();
        const last = span[0]?.last?.getTime();
        // Changes to what a device has need it to have something (ingest marks devices with readings only).
        const kind = first === undefined || last === undefined ? 0 : rnd();
        if (kind < 0.45 || first === undefined || last === undefined) {
          // New or late work (a checkpoint re-derivation replaces what followed it).
          await storeReadings(fixture, work(device, at, rnd));
        } else if (kind < 0.6) {
          // Re-derivation of what is there (replaces segments with identical ones).
          await markDirty(fixture, device, Math.max(first, at));
        } else if (kind < 0.8) {
          // A device's newest readings removed: its last hours can lose every segment.
          const from = Math.max(first + 5 * MINUTE, last - Math.floor(rnd() * 90) * MINUTE);
          await fixture.pool.query(`DELETE FROM telemetry_readings WHERE device_id = $1 AND ts >= $2`, [
            device.id,
            new Date(from),
          ]);
          await fixture.pool.query(`DELETE FROM derivation_checkpoints WHERE device_id = $1 AND at >= $2`, [
            device.id,
            new Date(from - HOUR),
          ]);
          await markDirty(fixture, device, from - HOUR);
        } else if (kind < 0.92) {
          // Readings restamped to another asset: segments move between assets' buckets.
          const other = pick(devices);
          await fixture.pool.query(
            `UPDATE telemetry_readings SET asset_id = $2 WHERE device_id = $1 AND ts >= $3 AND ts < $4`,
            [device.id, other.assetId, new Date(at), new Date(at + 40 * MINUTE)],
          );
          await markDirty(fixture, device, at);
        } else {
          // The asset changes customer: its gold moves between fleet rows (triggers, migration 0100).
          await fixture.pool.query(
            `UPDATE assets SET customer_name = CASE customer_name WHEN 'Customer A' THEN 'Customer B' ELSE 'Customer A' END WHERE id = $1`,
            [device.assetId],
          );
        }
      }
      const before = await fixture.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM utilization_hourly`);
      await deriveConcurrently();
      const after = await fixture.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM utilization_hourly`);
      if (after.rows[0]!.n < before.rows[0]!.n) vanished += 1;
      await expectGoldEqualsRecompute();
    }
    // The sequence did exercise what it is about.
    const { rows } = await fixture.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM utilization_hourly`);
    expect(rows[0]!.n).toBeGreaterThan(10);
    expect(vanished).toBeGreaterThan(0);
    const { rows: log } = await fixture.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM gold_invalidations WHERE relation = 'utilization_hourly'`,
    );
    expect(log[0]!.n).toBe(0);
  });

  it('a rebuild gives the same gold (to the digit as stored), counts and rollup as the differences kept', async () => {
    const snapshot = async () => ({
      // As text: the stored numerics, scale included, do not depend on the history that led to them.
      hourly: (await fixture.pool.query(`SELECT h::text FROM utilization_hourly h ORDER BY asset_id, bucket`)).rows,
      daily: (await fixture.pool.query(`SELECT d::text FROM utilization_daily d ORDER BY asset_id, bucket`)).rows,
      hourlyCounts: (await fixture.pool.query(`SELECT * FROM utilization_hourly_counts ORDER BY asset_id, bucket`))
        .rows,
      dailyCounts: (await fixture.pool.query(`SELECT * FROM utilization_daily_counts ORDER BY asset_id, bucket`)).rows,
      fleet: (await fleetVersusDefinition(fixture, 'hourly')).stored,
    });
    const kept = await snapshot();
    await fixture.pool.query(
      `UPDATE gold_coverage SET status = 'rebuild' WHERE relation IN ('utilization_hourly', 'utilization_daily')`,
    );
    await refreshAll(fixture);
    expect(await snapshot()).toEqual(kept);
  });

  it('the coverage of gold kept by differences reaches the end of the current bucket, is as fresh as the read and starts at late data before it', async () => {
    const late = start - 5 * HOUR;
    await storeReadings(fixture, work(fixture.devices[0]!, late + 10 * MINUTE, randomSource(7)));
    await deriveConcurrently();
    const before = Date.now();
    const coverage = await readGoldCoverage(fixture.pool, 'utilization_hourly');
    expect(coverage.status).toBe('ok');
    expect(coverage.coverageTo!.getTime()).toBe(Math.floor(before / HOUR) * HOUR + HOUR);
    expect(coverage.updatedAt!.getTime()).toBeGreaterThanOrEqual(before - 1000);
    expect(coverage.coverageFrom!.getTime()).toBe(late);
    const daily = await readGoldCoverage(fixture.pool, 'utilization_daily');
    expect(daily.coverageFrom!.getTime()).toBe(Math.floor(late / (24 * HOUR)) * 24 * HOUR);
    await expectGoldEqualsRecompute();
  });
});
