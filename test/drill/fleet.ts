import type { ReadingType } from '@gantry/contracts';
import type { Pool } from '@gantry/db';
import {
  DEMO_YARD,
  MachineScript,
  destination,
  haversineM,
  randomSource,
  type LatLon,
  type SimulatedMessage,
} from '@gantry/simulator';

/**
 * The drills' traffic: one scripted machine per device (MachineScript), so derivation
 * has real work — ignition on and off, driving between stacks, lifting and dropping
 * containers, operators logging in, out and changing, shocks, bad fixes, coverage gaps
 * — and every (device, type, ts) is distinct, so the readings silver must end up with
 * are exactly the messages published.
 *
 * Scripts are rebuilt from a seed instead of kept: planFleet() runs them once to learn
 * their length and every key (typed arrays, a few bytes per reading), and
 * fleetMessages() builds them again a group of devices at a time while publishing, so
 * a million messages never sit in memory as objects.
 */
export interface FleetPlan {
  deviceIds: string[];
  /** Readings each device publishes. */
  quotas: number[];
  /** Device time of every script's start (epoch ms). */
  start: number;
  /** Device time of the newest reading. */
  end: number;
  seed: number;
  total: number;
  /** Every published key, as device index, type code and ts offset from `start`. */
  keys: { device: Uint32Array; type: Uint8Array; offsetMs: Float64Array };
  /** Readings by type over the whole fleet. */
  byType: Record<ReadingType, number>;
}

export const READING_TYPES: ReadingType[] = ['gps', 'adcin', 'hourmeter', 'imu', 'identifier', 'heartbeat'];
const OPERATORS = Array.from({ length: 24 }, (_, index) => `OP-${String(index + 1).padStart(3, '0')}`);

/** One device's script from `start`, cut to `quota` readings (a prefix in device time). */
export function machineMessages(
  deviceId: string,
  index: number,
  start: number,
  quota: number,
  seed: number,
): SimulatedMessage[] {
  const random = randomSource(seed * 100_003 + index * 7919 + 1);
  const between = (low: number, high: number) => Math.round(low + random() * (high - low));
  const pick = <T>(list: readonly T[]) => list[Math.floor(random() * list.length)]!;
  const spot = (): LatLon => destination(DEMO_YARD, 80 + random() * 900, random() * 360);
  let here = spot();
  const script = new MachineScript({
    deviceId,
    start,
    position: here,
    gpsEveryS: 5,
    hourmeterEveryS: 60,
    heartbeatEveryS: 60,
  });
  const driveSomewhere = (lowKmh: number, highKmh: number) => {
    let to = spot();
    while (haversineM(here, to) < 60) to = spot();
    script.drive(to, lowKmh + random() * (highKmh - lowKmh));
    here = to;
  };

  let messages = script.messages();
  while (messages.length < quota) {
    script.ignitionOn();
    if (random() < 0.8) script.login(pick(OPERATORS));
    script.idle(between(20, 200));
    const moves = between(2, 5);
    for (let move = 0; move < moves; move += 1) {
      driveSomewhere(8, 25);
      script.lift().idle(between(10, 60));
      if (random() < 0.3) script.shock(Math.round((1 + random() * 2.5) * 100) / 100);
      driveSomewhere(6, 18);
      script.drop().idle(between(20, 260));
      if (random() < 0.2) script.badFix(pick(['no_fix', 'poor_hdop', 'null_island'] as const));
      if (random() < 0.1) script.login(pick(OPERATORS));
      // Out of coverage with the engine running: a gap that ends the sessions by timeout.
      if (random() < 0.06) script.silence(between(660, 1500));
    }
    if (random() < 0.6) script.logout();
    script.ignitionOff();
    script.idle(between(120, 600));
    if (random() < 0.3) script.silence(between(700, 2400));
    messages = script.messages();
  }
  return messages.slice(0, quota);
}

/**
 * Plans `total` readings over the devices, with device time ending `endBeforeNowMs`
 * before now: far enough back that every timeout (gap, identifier) has fallen due
 * and every hour has closed, so a derivation done now and one done later agree.
 */
export function planFleet(options: {
  deviceIds: string[];
  total: number;
  seed?: number;
  endBeforeNowMs?: number;
}): FleetPlan {
  const { deviceIds, total } = options;
  const seed = options.seed ?? 11;
  const quotas = deviceIds.map(
    (_, index) => Math.floor(total / deviceIds.length) + (index < total % deviceIds.length ? 1 : 0),
  );
  const keys = { device: new Uint32Array(total), type: new Uint8Array(total), offsetMs: new Float64Array(total) };
  const byType = Object.fromEntries(READING_TYPES.map((type) => [type, 0])) as Record<ReadingType, number>;
  let at = 0;
  let duration = 0;
  for (const [index, deviceId] of deviceIds.entries()) {
    for (const message of machineMessages(deviceId, index, 0, quotas[index]!, seed)) {
      keys.device[at] = index;
      keys.type[at] = READING_TYPES.indexOf(message.type as ReadingType);
      keys.offsetMs[at] = message.ts;
      byType[message.type as ReadingType] += 1;
      duration = Math.max(duration, message.ts);
      at += 1;
    }
  }
  if (at !== total) throw new Error(`the fleet plan made ${at} readings, not ${total}`);
  const end = Date.now() - (options.endBeforeNowMs ?? 2 * 3_600_000);
  const start = Math.floor((end - duration) / 60_000) * 60_000;
  return { deviceIds, quotas, start, end: start + duration, seed, total, keys, byType };
}

/** The plan's messages, `groupSize` devices at a time, each group interleaved in device-time order. */
export function* fleetMessages(plan: FleetPlan, groupSize = 50): Generator<SimulatedMessage> {
  for (let first = 0; first < plan.deviceIds.length; first += groupSize) {
    const group: SimulatedMessage[] = [];
    for (let index = first; index < Math.min(first + groupSize, plan.deviceIds.length); index += 1) {
      group.push(...machineMessages(plan.deviceIds[index]!, index, plan.start, plan.quotas[index]!, plan.seed));
    }
    group.sort((a, b) => a.ts - b.ts);
    yield* group;
  }
}

/**
 * Stores every planned key in `drill_expected` (device uuid, type, ts), so lost and
 * unexpected readings are counted by joins against silver, not by totals alone.
 */
export async function storeExpectedKeys(pool: Pool, plan: FleetPlan, deviceUuids: string[]): Promise<void> {
  await pool.query(
    'CREATE TABLE drill_expected (device_id uuid NOT NULL, type text NOT NULL, ts timestamptz NOT NULL, PRIMARY KEY (device_id, type, ts))',
  );
  const chunk = 50_000;
  for (let from = 0; from < plan.total; from += chunk) {
    const to = Math.min(plan.total, from + chunk);
    const devices: string[] = [];
    const types: string[] = [];
    const offsets: number[] = [];
    for (let at = from; at < to; at += 1) {
      devices.push(deviceUuids[plan.keys.device[at]!]!);
      types.push(READING_TYPES[plan.keys.type[at]!]!);
      offsets.push(plan.start + plan.keys.offsetMs[at]!);
    }
    await pool.query(
      `INSERT INTO drill_expected (device_id, type, ts)
       SELECT d, t, timestamptz 'epoch' + ms * interval '1 millisecond' FROM unnest($1::uuid[], $2::text[], $3::bigint[]) AS u(d, t, ms)`,
      [devices, types, offsets],
    );
  }
  await pool.query('ANALYZE drill_expected');
}
