import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readUtilization } from '@gantry/db';
import { MachineScript, destination, type LatLon, type SimulatedMessage } from '@gantry/simulator';
import { queueDueRechecks } from '../../services/worker/src/features/derivation/repository.ts';
import { availableStorageModes } from '../support/database.ts';
import {
  createDerivationFixture,
  deriveAll,
  readOutputs,
  refreshAll,
  storeReadings,
  type DerivationFixture,
  type FixtureDevice,
  type StoredOutputs,
} from './helpers.ts';

const HOUR = 3_600_000;
const MINUTE = 60_000;
const YARD: LatLon = { lat: 51.9496, lon: 4.1453 };

/** A shift: work, a lift, an operator, switched off. */
function shift(deviceId: string, start: number, operator: string): SimulatedMessage[] {
  let here = YARD;
  const leg = (distanceM: number, bearing: number) => (here = destination(here, distanceM, bearing));
  const script = new MachineScript({
    deviceId,
    start,
    position: YARD,
    gpsEveryS: 5,
    hourmeterEveryS: 60,
    heartbeatEveryS: 60,
  });
  script.ignitionOn().login(operator).drive(leg(600, 80), 15).lift().idle(90).drive(leg(300, 200), 9).drop().idle(150);
  script.drive(leg(800, 10), 18).idle(600).drive(leg(400, 190), 12).ignitionOff();
  return script.messages();
}

const forDevice = (messages: SimulatedMessage[], device: FixtureDevice) =>
  messages.map((m) => ({ ...m, deviceId: device.deviceId }));

/** The stored outputs without ids that differ between devices (session ids are per device by design). */
function comparable(outputs: StoredOutputs) {
  const strip = (rows: Array<Record<string, unknown>>) =>
    rows.map(({ id: _id, device_id: _d, asset_id: _a, tenant_id: _t, ...rest }) => rest);
  return {
    segments: strip(outputs.segments),
    usageSessions: strip(outputs.usageSessions),
    identifierSessions: strip(outputs.identifierSessions),
  };
}

/** A deterministic shuffle (xorshift) so a failure can be replayed. */
function shuffled<T>(items: T[], seed: number): T[] {
  const out = [...items];
  let x = seed;
  for (let i = out.length - 1; i > 0; i -= 1) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    const j = Math.abs(x) % (i + 1);
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

describe.each(availableStorageModes())('late and duplicate data (%s)', (mode) => {
  let fixture: DerivationFixture;
  const today = Math.floor((Date.now() - 6 * HOUR) / HOUR) * HOUR;
  const yesterday = today - 24 * HOUR;
  const todayShift = shift('x', today, 'OP-2');
  const yesterdayShift = shift('x', yesterday, 'OP-1');

  beforeAll(async () => {
    fixture = await createDerivationFixture('late', mode, 3);
  });
  afterAll(async () => fixture?.drop());

  it("a device uploading yesterday's data today gets yesterday right and leaves today alone", async () => {
    const [late, reference] = fixture.devices as [FixtureDevice, FixtureDevice, FixtureDevice];
    // The reference device sent both days in order; the late one sent today first.
    await storeReadings(fixture, forDevice([...yesterdayShift, ...todayShift], reference));
    await storeReadings(fixture, forDevice(todayShift, late));
    await deriveAll(fixture);
    await refreshAll(fixture);
    const todayBefore = await readOutputs(fixture, late);
    const sessionIds = todayBefore.usageSessions.map((s) => s.id);
    expect(sessionIds).toHaveLength(1);

    await storeReadings(fixture, forDevice(yesterdayShift, late));
    await deriveAll(fixture);
    await refreshAll(fixture);
    const after = await readOutputs(fixture, late);
    expect(comparable(after)).toEqual(comparable(await readOutputs(fixture, reference)));
    // Today's session keeps its id: API clients see the same session.
    expect(after.usageSessions.map((s) => s.id)).toEqual([expect.any(String), ...sessionIds]);

    const query = {
      tenantId: fixture.tenantId,
      from: new Date(yesterday - 24 * HOUR),
      to: new Date(today + 2 * HOUR),
      groupBy: 'asset' as const,
    };
    for (const bucket of ['hour', 'day'] as const) {
      const lateGold = await readUtilization(fixture.pool, { ...query, bucket, assetIds: [late.assetId] });
      const referenceGold = await readUtilization(fixture.pool, { ...query, bucket, assetIds: [reference.assetId] });
      expect(lateGold.source).toBe('gold');
      expect(lateGold.rows.length).toBeGreaterThan(0);
      expect(lateGold.rows.map(({ assetId: _a, ...rest }) => rest)).toEqual(
        referenceGold.rows.map(({ assetId: _a, ...rest }) => rest),
      );
    }
  });

  it('readings arriving out of order, in random slices with derivation between, count exactly once', async () => {
    const [, reference, shuffledDevice] = fixture.devices as [FixtureDevice, FixtureDevice, FixtureDevice];
    const messages = shuffled(forDevice([...yesterdayShift, ...todayShift], shuffledDevice), 7);
    for (let index = 0; index < messages.length; ) {
      const size = 50 + ((index * 7919) % 450);
      await storeReadings(fixture, messages.slice(index, index + size));
      await deriveAll(fixture);
      index += size;
    }
    await refreshAll(fixture);
    expect(comparable(await readOutputs(fixture, shuffledDevice))).toEqual(
      comparable(await readOutputs(fixture, reference)),
    );
    const query = {
      tenantId: fixture.tenantId,
      from: new Date(yesterday),
      to: new Date(today + 24 * HOUR),
      bucket: 'hour' as const,
    };
    const a = await readUtilization(fixture.pool, { ...query, assetIds: [shuffledDevice.assetId] });
    const b = await readUtilization(fixture.pool, { ...query, assetIds: [reference.assetId] });
    expect(a.rows.map(({ assetId: _a, ...rest }) => rest)).toEqual(b.rows.map(({ assetId: _a, ...rest }) => rest));
  });
});

describe.each(availableStorageModes())('silence and operators (%s)', (mode) => {
  let fixture: DerivationFixture;
  beforeAll(async () => {
    fixture = await createDerivationFixture('silence', mode, 2);
  });
  afterAll(async () => fixture?.drop());

  it('a device going silent while running: the gap is no data, ends the session with timeout, and the next data starts another', async () => {
    const device = fixture.devices[0]!;
    const start = Math.floor((Date.now() - 30 * HOUR) / HOUR) * HOUR;
    const script = new MachineScript({ deviceId: device.deviceId, start, position: YARD, gpsEveryS: 5 });
    script
      .ignitionOn()
      .drive(destination(YARD, 900, 45), 15)
      .idle(60)
      .silence(20 * 60)
      .idle(240)
      .ignitionOff();
    await storeReadings(fixture, script.messages());
    await deriveAll(fixture);
    const { usageSessions } = await readOutputs(fixture, device);
    const truth = script.truth();
    expect(usageSessions.map((s) => [s.start_reason, s.end_reason])).toEqual([
      ['ignition_on', 'timeout'],
      ['ignition_on', 'ignition_off'],
    ]);
    expect((usageSessions[0]!.end_ts as Date).getTime()).toBe(truth.gaps[0]!.start);
    // The device reports as it comes back (the script's truth opens the new session there).
    expect(truth.usageSessions.map((s) => [s.start, s.end])).toEqual([
      [start, truth.gaps[0]!.start],
      [truth.gaps[0]!.end, truth.end],
    ]);
    expect((usageSessions[1]!.start_ts as Date).getTime()).toBe(truth.gaps[0]!.end);
    expect((usageSessions[1]!.end_ts as Date).getTime()).toBe(truth.usageSessions[1]!.end);
    await refreshAll(fixture);
    const gold = await readUtilization(fixture.pool, {
      tenantId: fixture.tenantId,
      assetIds: [device.assetId],
      from: new Date(start),
      to: new Date(start + 2 * HOUR),
      bucket: 'day',
    });
    const running = gold.rows.reduce((sum, row) => sum + row.runningSeconds, 0);
    expect(Math.abs(running - truth.runningSeconds)).toBeLessThan(truth.runningSeconds * 0.01);
  });

  it('a running device that stops sending is open until the gap passes, then closed with timeout by the recheck', async () => {
    const device = fixture.devices[1]!;
    const start = Math.floor((Date.now() - 3 * HOUR) / HOUR) * HOUR;
    const script = new MachineScript({ deviceId: device.deviceId, start, position: YARD, gpsEveryS: 5 });
    script
      .ignitionOn()
      .login('OP-5')
      .drive(destination(YARD, 500, 90), 12)
      .idle(30);
    await storeReadings(fixture, script.messages());
    const last = script.now;
    await deriveAll(fixture, last + 5 * MINUTE);
    let outputs = await readOutputs(fixture, device);
    expect(outputs.usageSessions.map((s) => [s.is_open, s.end_reason])).toEqual([[true, null]]);
    expect(outputs.identifierSessions.map((s) => [s.is_open, s.end_reason])).toEqual([[true, null]]);

    // The recheck time has passed (the readings are hours old): the sweep queues the device.
    expect(await queueDueRechecks(fixture.pool)).toBeGreaterThanOrEqual(1);
    await deriveAll(fixture, last + 11 * MINUTE);
    outputs = await readOutputs(fixture, device);
    expect(outputs.usageSessions.map((s) => [s.is_open, s.end_reason, (s.end_ts as Date).getTime()])).toEqual([
      [false, 'timeout', last],
    ]);
    // Identifier sessions wait 30 minutes without data.
    expect(outputs.identifierSessions.map((s) => [s.is_open, s.end_reason])).toEqual([[true, null]]);

    await queueDueRechecks(fixture.pool);
    await deriveAll(fixture, last + 31 * MINUTE);
    outputs = await readOutputs(fixture, device);
    expect(outputs.identifierSessions.map((s) => [s.is_open, s.end_reason, (s.end_ts as Date).getTime()])).toEqual([
      [false, 'timeout', last],
    ]);

    // Buffered readings from the silent minutes arrive: the session continues under the same id.
    const id = outputs.usageSessions[0]!.id;
    // 117 s: the switch-off must not share its millisecond with a periodic heartbeat (the
    // simulator would drop the switch-off readings as duplicates).
    script.idle(117).ignitionOff();
    await storeReadings(fixture, script.messages());
    await deriveAll(fixture, script.now + MINUTE);
    outputs = await readOutputs(fixture, device);
    expect(outputs.usageSessions.map((s) => [s.id, s.is_open, s.end_reason, (s.end_ts as Date).getTime()])).toEqual([
      [id, false, 'ignition_off', script.now],
    ]);
  });

  it('identifier sessions end at logout, at another login, at ignition off and after 30 minutes without data', async () => {
    const device = fixture.devices[0]!;
    const start = Math.floor((Date.now() - 20 * HOUR) / HOUR) * HOUR;
    const script = new MachineScript({
      deviceId: device.deviceId,
      start,
      position: YARD,
      gpsEveryS: 5,
      heartbeatEveryS: 60,
    });
    script.ignitionOn().login('A').idle(300).login('B').idle(200).logout().idle(100).login('C').idle(100).ignitionOff();
    script
      .idle(300)
      .login('D')
      .idle(120)
      .silence(40 * 60)
      .idle(120);
    await storeReadings(fixture, script.messages());
    await deriveAll(fixture);
    const { identifierSessions } = await readOutputs(fixture, device);
    const fromStart = identifierSessions.filter((s) => (s.start_ts as Date).getTime() >= start);
    expect(
      fromStart.map((s) => [
        s.identifier,
        s.end_reason,
        ((s.end_ts as Date).getTime() - (s.start_ts as Date).getTime()) / 1000,
      ]),
    ).toEqual([
      ['A', 'identifier_change', 300],
      ['B', 'logout', 200],
      // The switch-off comes a second after the idle's last fix (MachineScript#clearInstant).
      ['C', 'ignition_off', 101],
      ['D', 'timeout', 120],
    ]);
  });
});
