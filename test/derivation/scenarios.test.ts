import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readUtilization, type StorageMode, type UtilizationRow } from '@gantry/db';
import { MachineScript, destination, type LatLon, type MachineTruth } from '@gantry/simulator';
import { availableStorageModes } from '../support/database.ts';
import {
  createDerivationFixture,
  deriveAll,
  markDirty,
  readOutputs,
  refreshAll,
  storeReadings,
  type DerivationFixture,
  type StoredOutputs,
} from './helpers.ts';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const YARD: LatLon = { lat: 53.5409, lon: 9.9707 };
/** Yesterday 00:00 UTC: every scenario lies in the past, so open sessions have timed out. */
const DAY0 = Math.floor(Date.now() / DAY) * DAY - DAY;

type Figures = Pick<
  MachineTruth,
  | 'runningSeconds'
  | 'movingSeconds'
  | 'stationaryRunningSeconds'
  | 'distanceM'
  | 'loadedSeconds'
  | 'emptySeconds'
  | 'loadedDistanceM'
  | 'emptyDistanceM'
  | 'containerCycleCount'
  | 'hourmeterDelta'
  | 'imuAnomalyCount'
>;
const FIELDS: Array<keyof Figures> = [
  'runningSeconds',
  'movingSeconds',
  'stationaryRunningSeconds',
  'distanceM',
  'loadedSeconds',
  'emptySeconds',
  'loadedDistanceM',
  'emptyDistanceM',
  'containerCycleCount',
  'hourmeterDelta',
  'imuAnomalyCount',
];
const COUNTS = new Set<keyof Figures>(['containerCycleCount', 'imuAnomalyCount']);

const figuresOf = (truth: MachineTruth): Figures =>
  Object.fromEntries(FIELDS.map((field) => [field, truth[field]])) as Figures;
const minus = (a: Figures, b: Figures): Figures =>
  Object.fromEntries(FIELDS.map((field) => [field, a[field] - b[field]])) as Figures;

function fromGold(row: UtilizationRow | undefined): Figures {
  return {
    runningSeconds: row?.runningSeconds ?? 0,
    movingSeconds: row?.movingSeconds ?? 0,
    stationaryRunningSeconds: row?.stationaryRunningSeconds ?? 0,
    distanceM: row?.distanceM ?? 0,
    loadedSeconds: row?.loadedSeconds ?? 0,
    emptySeconds: row?.emptySeconds ?? 0,
    loadedDistanceM: row?.loadedDistanceM ?? 0,
    emptyDistanceM: row?.emptyDistanceM ?? 0,
    containerCycleCount: row?.containerCycleCount ?? 0,
    hourmeterDelta: row?.hourmeterDelta ?? 0,
    imuAnomalyCount: row?.imuAnomalyCount ?? 0,
  };
}

/** Counts exact, everything else within 1 % of the truth (or 0.5 of a unit near zero). */
function expectNear(actual: Figures, truth: Figures, label: string): void {
  for (const field of FIELDS) {
    const want = truth[field];
    const got = actual[field];
    if (COUNTS.has(field)) expect(got, `${label} ${field}`).toBe(want);
    else
      expect(Math.abs(got - want), `${label} ${field}: ${got} vs truth ${want}`).toBeLessThanOrEqual(
        Math.max(0.5, Math.abs(want) * 0.01),
      );
  }
}

/** Idles (running or parked) until the script's clock is exactly at `at`. */
function idleUntil(script: MachineScript, at: number): MachineScript {
  if (script.now < at) script.idle((at - script.now) / 1000);
  expect(script.now).toBe(at);
  return script;
}

/**
 * A working morning in three hours with ground truth per hour: a measured route,
 * container lifts with known loaded time, shocks, an operator, a parked stretch.
 */
function workingMorning(deviceId: string, start: number) {
  const script = new MachineScript({
    deviceId,
    start,
    position: YARD,
    gpsEveryS: 5,
    hourmeterEveryS: 60,
    heartbeatEveryS: 60,
  });
  const hours: MachineTruth[] = [script.truth()];
  let here = YARD;
  const leg = (distanceM: number, bearing: number) => (here = destination(here, distanceM, bearing));
  script.ignitionOn().login('OP-7').idle(300);
  script.driveRoute([leg(420, 90), leg(310, 0)], 14);
  for (const [loadedIdle, bearing] of [
    [150, 180],
    [240, 270],
    [90, 90],
  ] as const) {
    script.lift().idle(20).drive(leg(220, bearing), 9).idle(loadedIdle).drop().idle(40);
  }
  script.shock(3.2).shock(1.1).shock(2.6);
  idleUntil(script, start + HOUR);
  hours.push(script.truth());
  script.drive(leg(650, 45), 18).lift().drive(leg(300, 225), 8).idle(60).drop();
  script.drive(leg(300, 135), 12).idle(200).ignitionOff();
  idleUntil(script, start + 2 * HOUR);
  hours.push(script.truth());
  script.idle(300).ignitionOn().login('OP-9').drive(leg(500, 300), 16).lift().idle(130).drive(leg(250, 120), 10).drop();
  script.idle(45).logout().drive(leg(400, 0), 15).ignitionOff();
  idleUntil(script, start + 3 * HOUR);
  hours.push(script.truth());
  return { script, hours };
}

async function utilization(
  fixture: DerivationFixture,
  from: number,
  to: number,
  bucket: 'hour' | 'day',
  forceSource?: 'gold' | 'live',
) {
  return readUtilization(fixture.pool, {
    tenantId: fixture.tenantId,
    assetIds: fixture.devices.map((device) => device.assetId),
    from: new Date(from),
    to: new Date(to),
    bucket,
    forceSource,
  });
}

const outputsByMode = new Map<StorageMode, { outputs: StoredOutputs; hourly: unknown; daily: unknown }>();

describe.each(availableStorageModes())('derivation scenarios (%s)', (mode) => {
  let fixture: DerivationFixture;
  const start = DAY0 + 7 * HOUR;
  const morning = workingMorning('dev-morning-1', start);

  beforeAll(async () => {
    fixture = await createDerivationFixture('scenario', mode, 1);
    const messages = morning.script.messages().map((m) => ({ ...m, deviceId: fixture.devices[0]!.deviceId }));
    // In slices, with derivation between, as a live device would arrive.
    for (let index = 0; index < messages.length; index += 400) {
      await storeReadings(fixture, messages.slice(index, index + 400));
      await deriveAll(fixture);
    }
    await refreshAll(fixture);
  });
  afterAll(async () => fixture?.drop());

  it('gives each hour its distance, running, stationary, loaded/empty time and distance, cycles, hourmeter and shocks', async () => {
    const result = await utilization(fixture, start, start + 3 * HOUR, 'hour');
    expect(result.source).toBe('gold');
    for (let hour = 0; hour < 3; hour += 1) {
      const row = result.rows.find((r) => r.bucketStart.getTime() === start + hour * HOUR);
      const truth = minus(figuresOf(morning.hours[hour + 1]!), figuresOf(morning.hours[hour]!));
      expectNear(fromGold(row), truth, `hour ${hour + 7}`);
    }
  });

  it('gives the day the whole morning', async () => {
    const result = await utilization(fixture, DAY0, DAY0 + DAY, 'day');
    expect(result.rows).toHaveLength(1);
    expectNear(fromGold(result.rows[0]), figuresOf(morning.script.truth()), 'day');
  });

  it('answers the same from gold and live, per asset and for the fleet', async () => {
    for (const bucket of ['hour', 'day'] as const) {
      for (const groupBy of ['asset', 'fleet'] as const) {
        const query = {
          tenantId: fixture.tenantId,
          assetIds: [fixture.devices[0]!.assetId],
          from: new Date(DAY0),
          to: new Date(DAY0 + DAY),
          bucket,
          groupBy,
        };
        const gold = await readUtilization(fixture.pool, { ...query, forceSource: 'gold' });
        const live = await readUtilization(fixture.pool, { ...query, forceSource: 'live' });
        expect(gold.rows.length).toBeGreaterThan(0);
        expect(live.rows).toEqual(gold.rows);
      }
    }
  });

  it('finds two usage sessions with ignition reasons and the operators of each', async () => {
    const { usageSessions, identifierSessions } = await readOutputs(fixture, fixture.devices[0]!);
    expect(usageSessions.map((s) => [s.start_reason, s.end_reason, s.identifier])).toEqual([
      ['ignition_on', 'ignition_off', 'OP-7'],
      ['ignition_on', 'ignition_off', 'OP-9'],
    ]);
    const truth = morning.script.truth();
    for (const [index, session] of usageSessions.entries()) {
      expect((session.start_ts as Date).getTime()).toBe(truth.usageSessions[index]!.start);
      expect((session.end_ts as Date).getTime()).toBe(truth.usageSessions[index]!.end);
      expect(session.container_cycle_count).toBe(truth.usageSessions[index]!.containerCycles);
      expect(Math.abs((session.distance_m as number) - truth.usageSessions[index]!.distanceM)).toBeLessThan(
        truth.usageSessions[index]!.distanceM * 0.01,
      );
    }
    expect(
      identifierSessions.map((s) => [
        s.identifier,
        s.end_reason,
        (s.start_ts as Date).getTime(),
        (s.end_ts as Date).getTime(),
      ]),
    ).toEqual(truth.identifierSessions.map((s) => [s.identifier, s.endReason, s.start, s.end]));
  });

  it('counts stops of two minutes or more and the trips between them', async () => {
    const { usageSessions } = await readOutputs(fixture, fixture.devices[0]!);
    // Session 1: idle 300 s (stop 1); route and first loaded drive (trip 1); idle 150 + 40 + 20 s
    // (stop 2); drive (trip 2); idle 240 + 40 + 20 s (stop 3); drive (trip 3); idle 90 + 40 s and on
    // to 08:00 (stop 4); drives with a 60 s pause (trip 4); idle 200 s before switching off (stop 5).
    // Session 2: drive (trip 1); idle 130 s (stop); drives with a 45 s pause (trip 2).
    expect(usageSessions.map((s) => [s.stop_count, s.trip_count])).toEqual([
      [5, 4],
      [1, 2],
    ]);
  });

  it('stores the same figures again when duplicates arrive and the device is marked dirty', async () => {
    const before = await readOutputs(fixture, fixture.devices[0]!);
    const messages = morning.script.messages().map((m) => ({ ...m, deviceId: fixture.devices[0]!.deviceId }));
    expect(await storeReadings(fixture, messages.slice(100, 900))).toBe(0);
    await markDirty(fixture, fixture.devices[0]!, messages[100]!.ts);
    await deriveAll(fixture);
    await refreshAll(fixture);
    expect(await readOutputs(fixture, fixture.devices[0]!)).toEqual(before);
    const hourly = await utilization(fixture, DAY0, DAY0 + DAY, 'hour');
    const daily = await utilization(fixture, DAY0, DAY0 + DAY, 'day');
    // Ids differ between the two databases; every figure must not.
    const strip = (rows: Array<Record<string, unknown>>) =>
      rows.map(({ id: _id, tenant_id: _t, device_id: _d, asset_id: _a, assetId: _aid, ...rest }) => rest);
    outputsByMode.set(mode, {
      outputs: {
        segments: strip(before.segments),
        usageSessions: strip(before.usageSessions),
        identifierSessions: strip(before.identifierSessions),
      },
      hourly: strip(hourly.rows as unknown as Array<Record<string, unknown>>),
      daily: strip(daily.rows as unknown as Array<Record<string, unknown>>),
    });
  });
});

describe('storage modes', () => {
  // Needs both modes: skipped where the server has no TimescaleDB.
  it.skipIf(availableStorageModes().length < 2)(
    'PostgreSQL and TimescaleDB give identical segments, sessions and gold',
    () => {
      const postgres = outputsByMode.get('postgres');
      const timescale = outputsByMode.get('timescaledb');
      expect(postgres).toBeDefined();
      expect(timescale).toEqual(postgres);
    },
  );
});
