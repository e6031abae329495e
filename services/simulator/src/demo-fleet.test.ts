import { afterEach, describe, expect, it, vi } from 'vitest';
import { demoHistory, historyBatches } from './demo-fleet.ts';
import { startSimulator } from './fleet.ts';
import { boxAround, haversineM, inBox, type LatLon } from './geo.ts';
import type { Publisher } from './publisher.ts';
import { DEMO_YARD } from './traffic.ts';
import { zoneCrossing } from './yard.ts';

const HOUR = 3_600_000;
const end = Date.parse('2026-03-10T14:00:00Z');
const deviceIds = Array.from(
  { length: 20 },
  (_, index) => `demo-${['sc', 'rs', 'fl'][index % 3]}-${String(index + 1).padStart(2, '0')}`,
);
const operators = Array.from({ length: 40 }, (_, index) => `OP-${String(index + 1).padStart(3, '0')}`);
/** The demo's "Quay crane exclusion zone" (provisioning/demo.ts). */
const zoneCenter = { lat: DEMO_YARD.lat + 0.003, lon: DEMO_YARD.lon + 0.004 };
const zone: LatLon[] = [
  [-1, -1],
  [1, -1],
  [1, 1],
  [-1, 1],
  [-1, -1],
].map(([lon, lat]) => ({ lat: zoneCenter.lat + lat! * 0.0006, lon: zoneCenter.lon + lon! * 0.001 }));
const crossing = zoneCrossing(zone);

function fixes(messages: Array<{ type: string; payload: unknown }>): LatLon[] {
  return messages.filter((message) => message.type === 'gps').map((message) => message.payload as LatLon);
}

describe('demo history', () => {
  const history = demoHistory({
    deviceIds,
    end,
    operators,
    avoid: [zone],
    endAt: { [deviceIds[0]!]: crossing.approach },
  });

  it('gives every machine ten hours of two shifts: closed usage and operator sessions, the current crew still at work', () => {
    for (const [index, truth] of history.truths.entries()) {
      expect(truth.start).toBeGreaterThanOrEqual(end - 10 * HOUR);
      expect(truth.end).toBeLessThanOrEqual(end);
      expect(truth.runningSeconds / 3600).toBeGreaterThan(7);
      expect(truth.containerCycleCount).toBeGreaterThan(30);
      const closed = truth.usageSessions.filter((session) => session.endReason !== null);
      expect(closed.length).toBeGreaterThanOrEqual(2);
      expect(truth.usageSessions.at(-1)).toMatchObject({ end: null });
      const crews = new Set(truth.identifierSessions.map((session) => session.identifier));
      expect(crews).toEqual(new Set([operators[index], operators[index + 20]]));
      expect(truth.identifierSessions.at(-1)).toMatchObject({ identifier: operators[index + 20], endReason: null });
      expect(history.machines[index]).toMatchObject({
        deviceId: deviceIds[index],
        operator: operators[index + 20],
        running: true,
      });
    }
    const reasons = new Set(
      history.truths.flatMap((truth) => truth.identifierSessions.map((session) => session.endReason)),
    );
    expect(reasons).toEqual(new Set(['logout', 'ignition_off', 'identifier_change', 'timeout', null]));
  });

  it('keeps every route out of the forbidden zone and parks the first machine where its crossing starts', () => {
    const box = boxAround(zone);
    expect(fixes(history.messages).filter((fix) => inBox(fix, box))).toEqual([]);
    const first = fixes(history.messages.filter((message) => message.deviceId === deviceIds[0]));
    expect(haversineM(first.at(-1)!, crossing.approach)).toBeLessThan(1);
    expect(haversineM(history.machines[0]!.position, crossing.approach)).toBeLessThan(1);
  });

  it('is the same every time for the same options', () => {
    const again = demoHistory({ deviceIds: deviceIds.slice(0, 2), end, operators });
    expect(demoHistory({ deviceIds: deviceIds.slice(0, 2), end, operators }).messages).toEqual(again.messages);
  });

  it('uploads as batch messages under the payload limit, every reading once, each device in time order', () => {
    const batches = historyBatches(history.messages, end + 5000);
    expect(Math.max(...batches.map((batch) => Buffer.byteLength(JSON.stringify(batch.payload))))).toBeLessThan(
      60 * 1024,
    );
    expect(batches.reduce((sum, batch) => sum + (batch.payload as unknown[]).length, 0)).toBe(history.messages.length);
    expect(batches.slice(0, 20).map((batch) => batch.deviceId)).toEqual(deviceIds);
    for (const deviceId of deviceIds) {
      const times = batches
        .filter((batch) => batch.deviceId === deviceId)
        .flatMap((batch) => (batch.payload as Array<{ ts: string }>).map((entry) => Date.parse(entry.ts)));
      expect(times).toEqual([...times].sort((a, b) => a - b));
    }
  });
});

function recordingPublisher(published: Array<{ topic: string; payload: unknown }>): Publisher {
  return {
    stats: { sent: 0, acked: 0 },
    publish: async (topic, payload) => void published.push({ topic, payload: JSON.parse(String(payload)) }),
    flush: async () => undefined,
    close: async () => undefined,
  };
}

describe('live demo fleet', () => {
  afterEach(() => void vi.useRealTimers());

  it('starts steady: no coverage gap and no break before steadyStartMs, then both as usual', async () => {
    vi.useFakeTimers({ now: end });
    const published: Array<{ topic: string; payload: unknown }> = [];
    const simulator = await startSimulator({
      mqttUrl: 'mqtt://unused',
      publisher: recordingPublisher(published),
      seed: 11,
      lateFraction: 0.05,
      duplicateFraction: 0,
      steadyStartMs: 5 * 60_000,
      devices: deviceIds.map((deviceId) => ({ deviceId })),
    });
    const types = (from: number) => published.slice(from).map((message) => message.topic.split('/')[4]);
    const logouts = (from: number) =>
      published.slice(from).filter((message) => (message.payload as { event?: string }).event === 'logout').length;

    await vi.advanceTimersByTimeAsync(5 * 60_000 - 2000);
    const steady = published.length;
    // Every machine sends a fix on every tick: nothing buffered, nobody on a break.
    expect(types(0).filter((type) => type === 'gps').length).toBeGreaterThan(20 * 140);
    expect(types(0)).not.toContain('batch');
    expect(logouts(0)).toBe(0);

    await vi.advanceTimersByTimeAsync(30 * 60_000);
    await simulator.stop();
    expect(types(steady)).toContain('batch');
    expect(logouts(steady)).toBeGreaterThan(0);
  });

  it('logs each operator in at the first tick, drives the first machine through the zone and keeps the others out', async () => {
    vi.useFakeTimers({ now: end });
    const published: Array<{ topic: string; payload: Record<string, unknown> }> = [];
    const simulator = await startSimulator({
      mqttUrl: 'mqtt://unused',
      publisher: recordingPublisher(published),
      seed: 7,
      lateFraction: 0,
      duplicateFraction: 0,
      avoid: [zone],
      devices: deviceIds.map((deviceId, index) => ({
        deviceId,
        operator: operators[index + 20]!,
        ...(index === 0 ? { position: crossing.approach, route: crossing.route, speedKmh: 15 } : {}),
      })),
    });
    await vi.advanceTimersByTimeAsync(2000);
    const logins = published.filter((message) => message.topic.endsWith('/identifier'));
    expect(
      logins.map((message) => [message.topic.split('/')[3], message.payload.identifier, message.payload.event]),
    ).toEqual(deviceIds.map((deviceId, index) => [deviceId, operators[index + 20], 'login']));

    await vi.advanceTimersByTimeAsync(70_000);
    await simulator.stop();
    const box = boxAround(zone);
    const inside = published.filter(
      (message) => message.topic.endsWith('/gps') && inBox(message.payload as unknown as LatLon, box),
    );
    expect(inside.length).toBeGreaterThan(0);
    expect(new Set(inside.map((message) => message.topic.split('/')[3]))).toEqual(new Set([deviceIds[0]]));
    // Through and out again in a little over a minute.
    const lastOfFirst = published
      .filter((message) => message.topic === `gantry/v1/devices/${deviceIds[0]}/gps`)
      .at(-1)!;
    expect(inBox(lastOfFirst.payload as unknown as LatLon, box)).toBe(false);
  });
});
