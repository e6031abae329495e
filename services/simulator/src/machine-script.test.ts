import { describe, expect, it } from 'vitest';
import { haversineM } from './geo.ts';
import { MachineScript } from './machine-script.ts';
import { toBatches } from './messages.ts';

const start = Date.parse('2026-03-10T08:00:00Z');
const yard = { lat: 51.9542, lon: 4.0529 };

describe('MachineScript ground truth', () => {
  it('counts a container shuttle: distance, loaded and empty time, cycles, sessions', () => {
    const pickup = { lat: 51.9562, lon: 4.0529 };
    const script = new MachineScript({ deviceId: 'sc-01', start, position: yard })
      .ignitionOn()
      .login('OP-001')
      .drive(pickup, 18)
      .lift()
      .idle(30)
      .drive(yard, 12)
      .drop()
      .logout()
      .ignitionOff();
    const truth = script.truth();
    const leg = haversineM(yard, pickup);

    expect(truth.distanceM).toBeCloseTo(2 * leg, 0);
    expect(truth.emptyDistanceM).toBeCloseTo(leg, 0);
    expect(truth.loadedDistanceM).toBeCloseTo(leg, 0);
    expect(truth.movingSeconds).toBeCloseTo(leg / (18 / 3.6) + leg / (12 / 3.6), 0);
    // 30 s idle, and the second before the switch-off: the last fix of the drive holds
    // that millisecond, so the ignition-off readings come a second later.
    expect(truth.stationaryRunningSeconds).toBe(31);
    expect(truth.loadedSeconds).toBeCloseTo(30 + leg / (12 / 3.6), 0);
    expect(truth.runningSeconds).toBeCloseTo(truth.movingSeconds + truth.stationaryRunningSeconds, 6);
    expect(truth.containerCycleCount).toBe(1);
    expect(truth.hourmeterDelta).toBe(Math.round(truth.runningSeconds));
    expect(truth.usageSessions).toEqual([
      {
        start,
        end: start + Math.round(truth.runningSeconds * 1000),
        startReason: 'ignition_on',
        endReason: 'ignition_off',
        distanceM: truth.distanceM,
        containerCycles: 1,
      },
    ]);
    expect(truth.identifierSessions).toEqual([
      // Logged out at the drop, a second before the switch-off.
      { identifier: 'OP-001', start, end: truth.usageSessions[0]!.end! - 1000, endReason: 'logout' },
    ]);
  });

  it('publishes distinct keys in device-time order, every reading carrying ignition', () => {
    const script = new MachineScript({ deviceId: 'sc-02', start, position: yard })
      .ignitionOn()
      .drive({ lat: 51.955, lon: 4.054 }, 15)
      .lift()
      .lift()
      .shock(3.1)
      .shock(1.2)
      .ignitionOff();
    const messages = script.messages();
    const keys = messages.map((message) => `${message.type}|${message.ts}`);
    expect(new Set(keys).size).toBe(keys.length);
    expect(messages.map((message) => message.ts)).toEqual(
      [...messages.map((message) => message.ts)].sort((a, b) => a - b),
    );
    expect(messages.every((message) => typeof (message.payload as { ignition?: unknown }).ignition === 'boolean')).toBe(
      true,
    );
    expect(script.truth().imuAnomalyCount).toBe(1);
    expect(script.truth().readings.adcin).toBe(2);
    expect(script.truth().containerCycleCount).toBe(1);
  });

  it('treats a silence over 10 minutes as a gap that ends the sessions with timeout', () => {
    const script = new MachineScript({ deviceId: 'sc-03', start, position: yard })
      .ignitionOn()
      .login('OP-002')
      .idle(60)
      .silence(900)
      .idle(60);
    const truth = script.truth();
    expect(truth.gaps).toEqual([{ start: start + 60_000, end: start + 960_000 }]);
    expect(truth.runningSeconds).toBe(120);
    expect(truth.usageSessions[0]).toMatchObject({ end: start + 60_000, endReason: 'timeout' });
    expect(truth.identifierSessions[0]).toMatchObject({ end: start + 60_000, endReason: 'timeout' });
    expect(script.messages().some((message) => message.ts > start + 60_000 && message.ts < start + 960_000)).toBe(
      false,
    );
  });

  it('packs readings into batch uploads that carry every reading once', () => {
    const readings = new MachineScript({ deviceId: 'sc-04', start, position: yard })
      .ignitionOn()
      .idle(600)
      .ignitionOff()
      .messages();
    const batches = toBatches(readings, { size: 50, uploadAt: start + 86_400_000 });
    expect(batches.every((batch) => batch.type === 'batch' && batch.ts === start + 86_400_000)).toBe(true);
    expect(batches.flatMap((batch) => batch.payload as unknown[])).toHaveLength(readings.length);
    expect((batches[0]!.payload as Array<{ type: string }>)[0]).toMatchObject({ type: readings[0]!.type });
  });
});
