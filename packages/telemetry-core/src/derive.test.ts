import { describe, expect, it } from 'vitest';
import { derive, replaceFromOf, type Carry, type DeriveResult } from './derive.ts';
import { defaultDerivationOptions, type GeofenceZone, type Reading } from './types.ts';

const ASSET = 'asset-1';
const T0 = Date.UTC(2024, 2, 4, 8, 0, 0);
const S = 1000;
const MIN = 60 * S;
// One degree of latitude along a meridian, on the sphere the haversine uses.
const M_PER_DEG_LAT = (Math.PI / 180) * 6_371_008.8;

type Partial = Omit<Reading, 'ts' | 'type' | 'assetId'>;
const r = (ts: number, type: Reading['type'], fields: Partial = {}): Reading => ({
  ts,
  type,
  assetId: ASSET,
  ...fields,
});
const hb = (ts: number, ignition: boolean) => r(ts, 'heartbeat', { ignition });
const fix = (ts: number, lat: number, lon = 10, valid = true) =>
  r(ts, 'gps', { latitude: lat, longitude: lon, gpsValid: valid });
const adc = (ts: number, on: boolean) => r(ts, 'adcin', { adcOn: on });
const hm = (ts: number, value: number) => r(ts, 'hourmeter', { hourmeter: value });
const imu = (ts: number, peakG: number) => r(ts, 'imu', { peakG });
const login = (ts: number, identifier: string) => r(ts, 'identifier', { identifier, identifierEvent: 'login' });
const logout = (ts: number, identifier: string) => r(ts, 'identifier', { identifier, identifierEvent: 'logout' });

/** Fixes every `every` ms from `from` for `ms`, moving north at `speed` m/s from `lat`. */
function drive(from: number, ms: number, speed: number, lat = 50, every = 10 * S): Reading[] {
  const out: Reading[] = [];
  for (let t = 0; t <= ms; t += every) out.push(fix(from + t, lat + (speed * (t / 1000)) / M_PER_DEG_LAT));
  return out;
}

/** Heartbeats every `every` ms in [from, to]. */
function beats(from: number, to: number, ignition: boolean, every = 10 * S): Reading[] {
  const out: Reading[] = [];
  for (let t = from; t <= to; t += every) out.push(hb(t, ignition));
  return out;
}

const order = ['adcin', 'gps', 'heartbeat', 'hourmeter', 'identifier', 'imu'];
const sorted = (readings: Reading[]) =>
  [...readings].sort((a, b) => a.ts - b.ts || order.indexOf(a.type) - order.indexOf(b.type));

function run(
  readings: Reading[],
  options: { now?: number; carry?: Carry | null; geofences?: GeofenceZone[] } = {},
): DeriveResult {
  const list = sorted(readings);
  const last = list[list.length - 1]?.ts ?? T0;
  return derive({
    deviceId: 'device-1',
    carry: options.carry ?? null,
    readings: list,
    geofences: options.geofences ?? [],
    now: options.now ?? last + 60 * MIN,
    carryAt: last,
    options: defaultDerivationOptions,
  });
}

const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);
const running = (result: DeriveResult) => sum(result.segments.filter((s) => s.running).map((s) => s.seconds));

describe('segments', () => {
  const cases: Array<{ name: string; readings: Reading[]; expect: Record<string, number> }> = [
    {
      name: 'ignition on for 10 minutes without moving is 600 s stationary running',
      readings: [...beats(T0, T0 + 10 * MIN, true), hb(T0 + 10 * MIN + 10 * S, false)],
      expect: { running: 610, moving: 0, distance: 0 },
    },
    {
      name: 'driving north at 5 m/s for 20 minutes is 6000 m and 1200 s moving',
      readings: [...beats(T0, T0 + 20 * MIN, true), ...drive(T0, 20 * MIN, 5), hb(T0 + 20 * MIN + 1, false)],
      expect: { running: 1200.001, moving: 1200, distance: 6000 },
    },
    {
      name: 'jitter of 3 m per fix is not movement',
      readings: [
        ...beats(T0, T0 + 5 * MIN, true),
        ...Array.from({ length: 31 }, (_, i) => fix(T0 + i * 10 * S, 50 + ((i % 2) * 3) / M_PER_DEG_LAT)),
      ],
      expect: { running: 300, moving: 0, distance: 0 },
    },
    {
      name: 'invalid fixes are ignored for distance',
      readings: [
        ...beats(T0, T0 + 60 * S, true),
        fix(T0, 50),
        fix(T0 + 30 * S, 51, 10, false),
        fix(T0 + 60 * S, 50 + 300 / M_PER_DEG_LAT),
      ],
      expect: { running: 60, moving: 60, distance: 300 },
    },
    {
      name: 'a gap longer than 10 minutes is neither running nor moving',
      readings: [...beats(T0, T0 + 5 * MIN, true), ...beats(T0 + 20 * MIN, T0 + 25 * MIN, true)],
      expect: { running: 600, moving: 0, distance: 0 },
    },
  ];
  it.each(cases)('$name', ({ readings, expect: wanted }) => {
    const result = run(readings);
    const moving = sum(result.segments.filter((s) => s.running && s.moving).map((s) => s.seconds));
    const distance = sum(result.segments.map((s) => s.distanceM));
    expect(running(result)).toBeCloseTo(wanted.running!, 3);
    expect(moving).toBeCloseTo(wanted.moving!, 3);
    expect(distance).toBeCloseTo(wanted.distance!, 3);
  });

  it('splits at hour boundaries and sends distance to each hour in proportion to time', () => {
    const start = T0 + 50 * MIN;
    const result = run([
      ...beats(start, start + 20 * MIN, true),
      ...drive(start, 20 * MIN, 4),
      hb(start + 20 * MIN + 1, false),
    ]);
    const byHour = new Map<number, { seconds: number; distance: number }>();
    for (const s of result.segments) {
      expect(Math.floor(s.start / 3_600_000)).toBe(Math.floor((s.end - 1) / 3_600_000));
      const hour = Math.floor(s.start / 3_600_000) * 3_600_000;
      const entry = byHour.get(hour) ?? { seconds: 0, distance: 0 };
      if (s.running) entry.seconds += s.seconds;
      entry.distance += s.distanceM;
      byHour.set(hour, entry);
    }
    expect(byHour.get(T0)?.seconds).toBeCloseTo(600, 6);
    expect(byHour.get(T0)?.distance).toBeCloseTo(2400, 6);
    expect(byHour.get(T0 + 60 * MIN)?.seconds).toBeCloseTo(600.001, 6);
    expect(byHour.get(T0 + 60 * MIN)?.distance).toBeCloseTo(2400, 6);
  });

  it('counts off→on spreader changes as cycles and loaded time while running', () => {
    const readings = [...beats(T0, T0 + 30 * MIN, true)];
    // Three lifts: loaded 2, 3 and 4 minutes.
    let t = T0 + MIN;
    readings.push(adc(T0, false));
    for (const minutes of [2, 3, 4]) {
      readings.push(adc(t, true), adc(t + minutes * MIN, false));
      t += minutes * MIN + 2 * MIN;
    }
    const result = run(readings);
    expect(sum(result.segments.map((s) => s.containerCycles))).toBe(3);
    expect(sum(result.segments.filter((s) => s.running && s.loaded).map((s) => s.seconds))).toBeCloseTo(9 * 60, 6);
  });

  it('sums positive hourmeter increments and ignores a reset', () => {
    const result = run([
      hm(T0, 1000),
      hm(T0 + MIN, 1060),
      hm(T0 + 2 * MIN, 5),
      hm(T0 + 3 * MIN, 65),
      hm(T0 + 4 * MIN, 65),
    ]);
    expect(sum(result.segments.map((s) => s.hourmeterDelta))).toBe(120);
  });

  it('spreads an hourmeter increment over the hours of its reading pair', () => {
    const start = T0 + 59 * MIN;
    const result = run([
      ...beats(start, start + 2 * MIN, true),
      hm(start, 0),
      hm(start + 2 * MIN, 120),
      hb(start + 2 * MIN + 1, false),
    ]);
    const byHour = (hour: number) =>
      sum(
        result.segments
          .filter((s) => Math.floor(s.start / 3_600_000) * 3_600_000 === hour)
          .map((s) => s.hourmeterDelta),
      );
    expect(byHour(T0)).toBeCloseTo(60, 6);
    expect(byHour(T0 + 60 * MIN)).toBeCloseTo(60, 6);
  });

  it('counts IMU messages with peakG ≥ 2.5 as anomalies', () => {
    const result = run([...beats(T0, T0 + MIN, true), imu(T0, 1.2), imu(T0 + 10 * S, 2.5), imu(T0 + 20 * S, 3.1)]);
    expect(sum(result.segments.map((s) => s.imuAnomalies))).toBe(2);
    expect(sum(result.segments.map((s) => s.imuSamples))).toBe(3);
  });
});

describe('usage sessions', () => {
  it('ignition on → off is one session of confidence 1 with ignition reasons', () => {
    const result = run([...beats(T0, T0 + 30 * MIN, true), hb(T0 + 30 * MIN + 10 * S, false)]);
    expect(result.usageSessions).toHaveLength(1);
    const [session] = result.usageSessions;
    expect(session).toMatchObject({
      startReason: 'ignition_on',
      endReason: 'ignition_off',
      confidence: 1,
      isOpen: false,
    });
    expect(session!.end - session!.start).toBe(30 * MIN + 10 * S);
    expect(session!.stopCount).toBe(1);
    expect(session!.tripCount).toBe(0);
  });

  it('drive, stop 3 min, drive, pause 30 s, drive: two trips and one stop', () => {
    const readings = [...beats(T0, T0 + 20 * MIN, true), hb(T0 + 20 * MIN + 10 * S, false)];
    const lat1 = 50 + (5 * 300) / M_PER_DEG_LAT;
    readings.push(...drive(T0, 5 * MIN, 5));
    readings.push(...Array.from({ length: 18 }, (_, i) => fix(T0 + 5 * MIN + (i + 1) * 10 * S, lat1)));
    readings.push(...drive(T0 + 8 * MIN + 10 * S, 5 * MIN, 5, lat1).slice(1));
    const lat2 = lat1 + (5 * 300) / M_PER_DEG_LAT;
    readings.push(
      fix(T0 + 13 * MIN + 20 * S, lat2),
      fix(T0 + 13 * MIN + 30 * S, lat2),
      fix(T0 + 13 * MIN + 40 * S, lat2),
    );
    readings.push(...drive(T0 + 13 * MIN + 50 * S, 6 * MIN, 5, lat2).slice(1));
    const result = run(readings);
    expect(result.usageSessions).toHaveLength(1);
    expect(result.usageSessions[0]).toMatchObject({ stopCount: 1, tripCount: 2 });
  });

  it('a silence longer than the gap ends the session with timeout and the next data starts another', () => {
    const result = run([
      ...beats(T0, T0 + 10 * MIN, true),
      ...beats(T0 + 30 * MIN, T0 + 40 * MIN, true),
      hb(T0 + 41 * MIN, false),
    ]);
    expect(result.usageSessions.map((s) => [s.endReason, (s.end - s.start) / MIN])).toEqual([
      ['timeout', 10],
      ['ignition_off', 11],
    ]);
  });

  it('without ignition, movement is running: an inferred session of lower confidence', () => {
    const result = run([
      ...drive(T0, 10 * MIN, 5),
      ...Array.from({ length: 30 }, (_, i) => fix(T0 + 10 * MIN + (i + 1) * 10 * S, 50 + 3000 / M_PER_DEG_LAT)),
    ]);
    expect(result.usageSessions).toHaveLength(1);
    expect(result.usageSessions[0]).toMatchObject({
      startReason: 'movement',
      endReason: 'movement',
      confidence: 0.6,
      isOpen: false,
    });
    expect(result.usageSessions[0]!.runningSeconds).toBeCloseTo(600, 6);
    expect(result.usageSessions[0]!.end - result.usageSessions[0]!.start).toBe(10 * MIN);
  });

  it('without ignition, a rising hourmeter is running', () => {
    const readings = Array.from({ length: 31 }, (_, i) => hm(T0 + i * 10 * S, 1000 + (i <= 20 ? i * 10 : 200)));
    const result = run(readings);
    expect(running(result)).toBeCloseTo(200, 6);
    expect(result.usageSessions[0]).toMatchObject({ confidence: 0.8, hourmeterDelta: 200 });
  });

  it('a session still receiving data is open; after the gap it ends with timeout at the last message', () => {
    const readings = beats(T0, T0 + 10 * MIN, true);
    expect(run(readings, { now: T0 + 11 * MIN }).usageSessions[0]).toMatchObject({ isOpen: true, endReason: null });
    const closed = run(readings, { now: T0 + 21 * MIN }).usageSessions[0]!;
    expect(closed).toMatchObject({ isOpen: false, endReason: 'timeout', end: T0 + 10 * MIN });
  });

  it('a session switched off at the newest reading is closed at once, before the hourmeter pair after it completes', () => {
    const readings = [...beats(T0, T0 + 5 * MIN, true), hm(T0, 100), hm(T0 + 5 * MIN, 400), hb(T0 + 5 * MIN, false)];
    const session = run(readings, { now: T0 + 6 * MIN }).usageSessions[0]!;
    expect(session).toMatchObject({ isOpen: false, endReason: 'ignition_off', end: T0 + 5 * MIN, hourmeterDelta: 300 });
  });

  it('container work inside the session: cycles, loaded and empty time and distance', () => {
    const readings = [...beats(T0, T0 + 10 * MIN, true), hb(T0 + 10 * MIN + 10 * S, false), adc(T0, false)];
    readings.push(...drive(T0, 10 * MIN, 2));
    readings.push(adc(T0 + 2 * MIN, true), adc(T0 + 6 * MIN, false));
    const session = run(readings).usageSessions[0]!;
    expect(session.containerCycleCount).toBe(1);
    expect(session.loadedSeconds).toBeCloseTo(240, 6);
    expect(session.emptySeconds).toBeCloseTo(370, 6);
    expect(session.loadedDistanceM).toBeCloseTo(480, 3);
    expect(session.emptyDistanceM).toBeCloseTo(720, 3);
  });
});

describe('identifier sessions', () => {
  const cases: Array<{ name: string; readings: Reading[]; sessions: Array<[string, string | null, number]> }> = [
    {
      name: 'login then logout',
      readings: [...beats(T0, T0 + 20 * MIN, true), login(T0 + MIN, 'A'), logout(T0 + 11 * MIN, 'A')],
      sessions: [['A', 'logout', 10]],
    },
    {
      name: 'another identifier logging in ends the first with identifier_change',
      readings: [
        ...beats(T0, T0 + 20 * MIN, true),
        login(T0 + MIN, 'A'),
        login(T0 + 5 * MIN, 'B'),
        logout(T0 + 9 * MIN, 'B'),
      ],
      sessions: [
        ['A', 'identifier_change', 4],
        ['B', 'logout', 4],
      ],
    },
    {
      name: 'ignition off ends the session',
      readings: [
        ...beats(T0, T0 + 10 * MIN, true),
        login(T0 + MIN, 'A'),
        ...beats(T0 + 10 * MIN + 10 * S, T0 + 12 * MIN, false),
      ],
      sessions: [['A', 'ignition_off', 9 + 1 / 6]],
    },
    {
      name: 'a repeated login of the same identifier continues the session',
      readings: [
        ...beats(T0, T0 + 20 * MIN, true),
        login(T0, 'A'),
        login(T0 + 5 * MIN, 'A'),
        logout(T0 + 10 * MIN, 'A'),
      ],
      sessions: [['A', 'logout', 10]],
    },
    {
      name: '30 minutes without data ends it with timeout; a 15 minute silence does not',
      readings: [
        ...beats(T0, T0 + 5 * MIN, false),
        login(T0, 'A'),
        ...beats(T0 + 20 * MIN, T0 + 25 * MIN, false),
        ...beats(T0 + 60 * MIN, T0 + 61 * MIN, false),
      ],
      sessions: [['A', 'timeout', 25]],
    },
  ];
  it.each(cases)('$name', ({ readings, sessions }) => {
    const result = run(readings);
    expect(result.identifierSessions.map((s) => [s.identifier, s.endReason, (s.end - s.start) / MIN])).toEqual(
      sessions,
    );
  });

  it('counts the readings and fixes inside the session and gives the usage session its operator', () => {
    const readings = [
      ...beats(T0, T0 + 10 * MIN, true),
      ...drive(T0, 10 * MIN, 3),
      login(T0 + MIN, 'A'),
      logout(T0 + 2 * MIN, 'A'),
    ];
    const result = run(readings);
    expect(result.identifierSessions[0]).toMatchObject({
      gpsPointCount: 7,
      eventCount: 16,
      distanceM: expect.closeTo(180, 3),
    });
    expect(result.usageSessions[0]!.identifier).toBe('A');
  });
});

describe('geofences', () => {
  const square: GeofenceZone = {
    id: 'zone-1',
    type: 'forbidden',
    geometry: {
      type: 'Polygon',
      coordinates: [
        [
          [9.99, 50.001],
          [10.01, 50.001],
          [10.01, 50.002],
          [9.99, 50.002],
          [9.99, 50.001],
        ],
      ],
    },
    bbox: [9.99, 50.001, 10.01, 50.002],
  };
  it('reports the first evaluation, then each crossing, at the fix that shows it', () => {
    const result = run([...beats(T0, T0 + 10 * MIN, true), ...drive(T0, 10 * MIN, 0.5)], { geofences: [square] });
    const crossings = result.geofenceTransitions.map((t) => [t.inside, t.initial, (t.ts - T0) / S]);
    // 0.5 m/s north: 111.2 m takes 222 s to reach 50.001 and 444.8 s to leave 50.002.
    expect(crossings).toEqual([
      [false, true, 0],
      [true, false, 230],
      [false, false, 450],
    ]);
  });
});

describe('resuming', () => {
  /** Applies runs the way the worker stores them: replace from replaceFrom, by start. */
  function store(results: DeriveResult[]) {
    const segments = new Map<number, unknown>();
    const usage = new Map<number, unknown>();
    const ident = new Map<number, unknown>();
    for (const result of results) {
      for (const [map, from] of [
        [segments, result.replaceFrom.segments],
        [usage, result.replaceFrom.usageSessions],
        [ident, result.replaceFrom.identifierSessions],
      ] as const) {
        for (const key of [...map.keys()]) if (key >= from) map.delete(key);
      }
      for (const s of result.segments) segments.set(s.start, s);
      for (const s of result.usageSessions) usage.set(s.start, s);
      for (const s of result.identifierSessions) ident.set(s.start, s);
    }
    const values = (map: Map<number, unknown>) => [...map.entries()].sort((a, b) => a[0] - b[0]).map(([, v]) => v);
    return { segments: values(segments), usage: values(usage), ident: values(ident) };
  }

  const day = sorted([
    ...beats(T0, T0 + 50 * MIN, true),
    hb(T0 + 50 * MIN + 5 * S, false),
    ...beats(T0 + 70 * MIN, T0 + 150 * MIN, true),
    hb(T0 + 150 * MIN + 5 * S, false),
    ...drive(T0 + 5 * MIN, 30 * MIN, 4),
    ...drive(T0 + 80 * MIN, 60 * MIN, 3, 50.01, 7 * S),
    ...Array.from({ length: 40 }, (_, i) => adc(T0 + i * 3 * MIN + 7 * S, i % 2 === 0)),
    ...Array.from({ length: 30 }, (_, i) => hm(T0 + i * 5 * MIN + 3 * S, 5000 + i * 290)),
    ...Array.from({ length: 50 }, (_, i) => imu(T0 + i * 3 * MIN + 11 * S, (i % 7) * 0.5)),
    login(T0 + 2 * MIN, 'A'),
    login(T0 + 90 * MIN, 'B'),
    logout(T0 + 140 * MIN, 'B'),
  ]);
  const now = T0 + 10 * 60 * MIN;
  const once = derive({
    deviceId: 'device-1',
    carry: null,
    readings: day,
    geofences: [],
    now,
    carryAt: now,
    options: defaultDerivationOptions,
  });

  it('in chunks with a lagging carry gives exactly what one run gives', () => {
    for (const lagMs of [0, 30 * S, 5 * MIN]) {
      const results: DeriveResult[] = [];
      let carry: Carry | null = null;
      for (let index = 0; index < day.length; ) {
        const end = Math.min(day.length, index + 37);
        const chunkEnd = day[end - 1]!.ts;
        const next = day.filter((reading) => reading.ts >= (carry?.at ?? -Infinity) && reading.ts <= chunkEnd);
        const result = derive({
          deviceId: 'device-1',
          carry,
          readings: next,
          geofences: [],
          now,
          carryAt: chunkEnd - lagMs,
          options: defaultDerivationOptions,
        });
        results.push(result);
        // The carry is stored as jsonb between runs.
        carry = JSON.parse(JSON.stringify(result.carry)) as Carry;
        index = day.findIndex((reading) => reading.ts > chunkEnd);
        if (index === -1) break;
      }
      // The chunked runs used `now` late in the day, so the last one closes like `once`.
      expect(store(results)).toEqual(store([once]));
    }
  });

  it('from an hourly checkpoint after late data gives exactly a fresh derivation of everything', () => {
    const late = new Set(day.filter((reading) => reading.ts > T0 + 75 * MIN).filter((_, i) => i % 97 === 5));
    const early = day.filter((reading) => !late.has(reading));
    const first = derive({
      deviceId: 'device-1',
      carry: null,
      readings: early,
      geofences: [],
      now,
      carryAt: now,
      options: defaultDerivationOptions,
    });
    const earliestLate = Math.min(...[...late].map((reading) => reading.ts));
    const checkpoint = [...first.checkpoints].reverse().find((c) => c.at <= earliestLate)!;
    expect(checkpoint).toBeDefined();
    const again = derive({
      deviceId: 'device-1',
      carry: checkpoint,
      readings: day.filter((reading) => reading.ts >= checkpoint.at),
      geofences: [],
      now,
      carryAt: now,
      options: defaultDerivationOptions,
    });
    expect(again.replaceFrom.segments).toBeLessThanOrEqual(checkpoint.at);
    expect(store([first, again])).toEqual(store([once]));
  });

  it('replaceFrom of a fresh carry replaces everything', () => {
    expect(replaceFromOf(null).segments).toBe(-Infinity);
  });
});
