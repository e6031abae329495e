import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { goldDefinition, goldRelation, readGoldCoverage, readUtilization } from '@gantry/db';
import { MachineScript, destination, type LatLon, type SimulatedMessage } from '@gantry/simulator';
import { deriveDirtyDevices } from '../../services/worker/src/features/derivation/service.ts';
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
const YARD: LatLon = { lat: 43.2965, lon: 5.3698 };

function work(device: FixtureDevice, start: number, seed: number): SimulatedMessage[] {
  let here = destination(YARD, seed * 37, seed * 41);
  const script = new MachineScript({ deviceId: device.deviceId, start, position: here, gpsEveryS: 10 });
  script.ignitionOn().login(`OP-${seed}`);
  for (let leg = 0; leg < 4; leg += 1) {
    here = destination(here, 300 + seed * 13 + leg * 50, (seed * 60 + leg * 95) % 360);
    script
      .drive(here, 10 + ((seed + leg) % 5) * 2)
      .lift()
      .idle(60 + leg * 40)
      .drop()
      .idle(30);
  }
  script.shock(2.8).idle(121).ignitionOff();
  return script.messages();
}

/** Rows of a gold relation next to the same definition computed from its source now. */
async function materializedVersusDefinition(fixture: DerivationFixture, relation: string, before?: Date) {
  const meta = goldRelation(relation);
  const order = meta.key.join(', ');
  const bound = before ? `bucket < '${before.toISOString()}'` : 'TRUE';
  const stored = await fixture.pool.query(`SELECT * FROM ${relation} WHERE ${bound} ORDER BY ${order}`);
  const live = await fixture.pool.query(
    `SELECT * FROM (${goldDefinition(relation)}) d WHERE ${bound} ORDER BY ${order}`,
  );
  return { stored: stored.rows, live: live.rows };
}

describe.each(availableStorageModes())('gold (%s)', (mode) => {
  let fixture: DerivationFixture;
  const day = Math.floor((Date.now() - 26 * HOUR) / HOUR) * HOUR;

  beforeAll(async () => {
    fixture = await createDerivationFixture('gold', mode, 6);
  });
  afterAll(async () => fixture?.drop());

  it('is pending and answered live before the first refresh, gold after it', async () => {
    const [first] = fixture.devices;
    await storeReadings(fixture, work(first!, day, 1));
    await deriveAll(fixture);
    const query = {
      tenantId: fixture.tenantId,
      assetIds: [first!.assetId],
      from: new Date(day),
      to: new Date(day + 3 * HOUR),
      bucket: 'hour' as const,
    };

    expect(await readGoldCoverage(fixture.pool, 'utilization_hourly')).toMatchObject({
      status: 'pending',
      coverageTo: null,
    });
    const live = await readUtilization(fixture.pool, query);
    expect(live.source).toBe('live');
    expect(live.rows.length).toBeGreaterThan(0);

    await refreshAll(fixture);
    const coverage = await readGoldCoverage(fixture.pool, 'utilization_hourly');
    expect(coverage.status).toBe('ok');
    expect(coverage.coverageTo!.getTime()).toBeGreaterThanOrEqual(Math.ceil(Date.now() / HOUR) * HOUR - HOUR);
    expect(coverage.coverageFrom!.getTime()).toBe(day);
    expect(coverage.updatedAt!.getTime()).toBeGreaterThan(Date.now() - 60_000);
    const gold = await readUtilization(fixture.pool, query);
    expect(gold.source).toBe('gold');
    expect(gold.rows).toEqual(live.rows);
  });

  it('answers the newly derived buckets of an asset from gold with the new numbers as soon as they are derived', async () => {
    const [first, second] = fixture.devices;
    await storeReadings(fixture, work(second!, day + HOUR, 2));
    await deriveAll(fixture);
    const query = {
      tenantId: fixture.tenantId,
      assetIds: [first!.assetId, second!.assetId],
      from: new Date(day),
      to: new Date(day + 4 * HOUR),
      bucket: 'hour' as const,
    };
    const before = await readUtilization(fixture.pool, query);
    // Utilization gold is kept in the derivation transaction: nothing waits for a refresh.
    expect(before.source).toBe('gold');
    expect(before.rows.some((row) => row.assetId === second!.assetId)).toBe(true);
    await refreshAll(fixture);
    const after = await readUtilization(fixture.pool, query);
    expect(after.source).toBe('gold');
    expect(after.rows).toEqual(before.rows);
    const fleet = await readUtilization(fixture.pool, { ...query, groupBy: 'fleet', limit: 2, offset: 1 });
    const all = await readUtilization(fixture.pool, { ...query, groupBy: 'fleet' });
    expect(fleet.rows).toEqual(all.rows.slice(1, 3));
    const firstBucket = all.rows[0]!;
    const perAsset = after.rows.filter((row) => row.bucketStart.getTime() === firstBucket.bucketStart.getTime());
    expect(firstBucket.runningSeconds).toBeCloseTo(
      perAsset.reduce((sum, row) => sum + row.runningSeconds, 0),
      9,
    );
  });

  it('two workers deriving at once count every reading exactly once', async () => {
    const rest = fixture.devices.slice(2);
    for (const [index, device] of rest.entries()) await storeReadings(fixture, work(device, day + 2 * HOUR, index + 3));
    const one = {
      ...fixture.derivationDeps,
      config: { ...fixture.config, worker: { ...fixture.config.worker, deviceBatch: 1 } },
    };
    const drain = async () => {
      while ((await deriveDirtyDevices(one)).devices > 0);
    };
    await Promise.all([drain(), drain()]);
    await refreshAll(fixture);
    const { rows } = await fixture.pool.query(
      `SELECT device_id, count(*)::int AS sessions FROM usage_sessions WHERE device_id = ANY ($1::uuid[]) GROUP BY device_id`,
      [rest.map((device) => device.id)],
    );
    expect(rows.map((row) => row.sessions)).toEqual(rest.map(() => 1));
    const { stored, live } = await materializedVersusDefinition(fixture, 'utilization_hourly');
    expect(stored).toEqual(live);
  });

  it.each(['utilization_daily', 'positions_1min', 'positions_15min'])(
    '%s holds exactly what its definition gives',
    async (relation) => {
      await refreshAll(fixture);
      const { stored, live } = await materializedVersusDefinition(fixture, relation);
      expect(stored.length).toBeGreaterThan(0);
      expect(stored).toEqual(live);
    },
  );
});
