import type { ReadingType } from '@gantry/contracts';
import type { Logger } from '@gantry/logger';
import { bearingDeg, destination, haversineM, type LatLon } from './geo.ts';
import { encodeMessage, toBatches, type SimulatedMessage } from './messages.ts';
import { createPublisher, type Publisher } from './publisher.ts';
import { DEMO_YARD, badMessageCases, randomSource, readingPayload } from './traffic.ts';
import { avoidBoxes, pickWaypoint } from './yard.ts';

export interface SimulatedDevice {
  deviceId: string;
  /** Where the machine starts (default: somewhere in the yard). */
  position?: LatLon;
  /** The machine's operator, logged in at the first tick and again after every break (default from `operators`; null: nobody). */
  operator?: string | null;
  /** Hourmeter value (running seconds) to continue from. */
  hourmeter?: number;
  /** Whether the spreader holds a container at the start. */
  loaded?: boolean;
  /** Points driven through first, before random waypoints (no stop, no lift there). */
  route?: LatLon[];
  /** Travel speed (default random, 8–20 km/h). */
  speedKmh?: number;
}

export interface SimulatorOptions {
  mqttUrl: string;
  username?: string;
  password?: string;
  devices: SimulatedDevice[];
  /** Yard centre (default the demo yard, 51.9542, 4.0529). */
  center?: LatLon;
  /** Machines stay within this distance of the centre (default 500 m). */
  radiusM?: number;
  /** Rings (forbidden zones) that random waypoints keep out of; a `route` may still cross them. */
  avoid?: LatLon[][];
  /** Operators of devices without their own: device i gets operators[i % n] (default OP-001…OP-005). */
  operators?: string[];
  /** Time between a machine's GPS fixes (default 2 s). */
  intervalMs?: number;
  /** Share of ticks on which a machine drops out of coverage and later uploads a batch (default 0.002). */
  lateFraction?: number;
  /**
   * For this long after the start no machine takes a break or drops out of coverage
   * (default 0): a shift that has just begun, with every machine working and reporting.
   */
  steadyStartMs?: number;
  /** Share of messages published twice (default 0.01). */
  duplicateFraction?: number;
  /** Share of ticks on which a machine publishes one bad message (default 0). */
  badFraction?: number;
  seed?: number;
  /** Use this publisher instead of opening one (it is not closed by stop()). */
  publisher?: Publisher;
  logger?: Logger;
}

export interface SimulatorStats {
  ticks: number;
  published: number;
  byType: Record<string, number>;
  duplicates: number;
  bad: number;
  batches: number;
  batchedReadings: number;
}

export interface RunningSimulator {
  stop(): Promise<void>;
  stats(): SimulatorStats;
}

interface Machine {
  deviceId: string;
  position: LatLon;
  waypoint: LatLon;
  /** The waypoint is a route point: drive through it. */
  passing: boolean;
  route: LatLon[];
  speedKmh: number;
  running: boolean;
  loaded: boolean;
  /** Who is logged in now, and who logs in after a break. */
  operator: string | null;
  crew: string | null;
  started: boolean;
  hourmeter: number;
  lastHeartbeat: number;
  lastHourmeter: number;
  lastImu: number;
  offlineUntil: number;
  buffer: SimulatedMessage[];
  breakUntil: number;
  lastTs: number;
}

/**
 * The live fleet of the demo: each machine logs its operator in at its first tick, drives
 * its `route` if it has one, then between random waypoints in the yard (keeping out of
 * the `avoid` zones), picks up a container at one waypoint and sets it down at the next,
 * takes breaks (ignition off, the operator logs out and back in afterwards), and now and
 * then drops out of coverage and uploads what it buffered as `batch` messages.
 * Duplicates and bad messages can be mixed in.
 */
export async function startSimulator(options: SimulatorOptions): Promise<RunningSimulator> {
  const random = randomSource(options.seed ?? Date.now());
  const center = options.center ?? DEMO_YARD;
  const radius = options.radiusM ?? 500;
  const intervalMs = options.intervalMs ?? 2000;
  const lateFraction = options.lateFraction ?? 0.002;
  const steadyUntil = Date.now() + (options.steadyStartMs ?? 0);
  const duplicateFraction = options.duplicateFraction ?? 0.01;
  const badFraction = options.badFraction ?? 0;
  const publisher =
    options.publisher ??
    (await createPublisher({ mqttUrl: options.mqttUrl, username: options.username, password: options.password }));
  const stats: SimulatorStats = {
    ticks: 0,
    published: 0,
    byType: {},
    duplicates: 0,
    bad: 0,
    batches: 0,
    batchedReadings: 0,
  };
  const log = options.logger?.child({ component: 'simulator' });

  const boxes = avoidBoxes(options.avoid);
  const operators = options.operators ?? ['OP-001', 'OP-002', 'OP-003', 'OP-004', 'OP-005'];
  const nextWaypoint = (from: LatLon) => pickWaypoint(from, center, radius, boxes, random);
  const now = Date.now();
  const machines: Machine[] = options.devices.map((device, index) => {
    const position = device.position ?? nextWaypoint(center);
    const route = [...(device.route ?? [])];
    const first = route.shift();
    const operator =
      device.operator === undefined
        ? operators.length > 0
          ? operators[index % operators.length]!
          : null
        : device.operator;
    return {
      deviceId: device.deviceId,
      position,
      waypoint: first ?? nextWaypoint(position),
      passing: first !== undefined,
      route,
      speedKmh: device.speedKmh ?? 8 + random() * 12,
      running: true,
      loaded: device.loaded ?? false,
      operator,
      crew: operator,
      started: false,
      hourmeter: device.hourmeter ?? 36_000_000 + index * 3600,
      lastHeartbeat: 0,
      lastHourmeter: 0,
      lastImu: 0,
      offlineUntil: 0,
      buffer: [],
      breakUntil: 0,
      lastTs: now - 1,
    };
  });

  const send = (message: SimulatedMessage) => {
    const { topic, payload } = encodeMessage(message);
    stats.published += 1;
    stats.byType[message.type] = (stats.byType[message.type] ?? 0) + 1;
    publisher
      .publish(topic, payload, message.qos ?? 1)
      .catch((error: unknown) => log?.warn({ err: error }, 'simulator publish failed'));
  };

  const reading = (
    machine: Machine,
    type: ReadingType,
    ts: number,
    fields: Record<string, unknown> = {},
  ): SimulatedMessage => {
    const payload = { ...readingPayload(type, ts, machine.position, random), ignition: machine.running, ...fields };
    return { deviceId: machine.deviceId, type, ts, payload };
  };

  const tickMachine = (machine: Machine, ts: number) => {
    // Device clocks never repeat a millisecond per machine, so readings never collide.
    if (ts <= machine.lastTs) ts = machine.lastTs + 1;
    machine.lastTs = ts;
    const out: SimulatedMessage[] = [];
    const dt = intervalMs / 1000;

    if (!machine.started) {
      // Switched on with the operator badged in from the first moment (a repeated login of
      // the one already logged in continues that session).
      machine.started = true;
      out.push(reading(machine, 'heartbeat', ts));
      machine.lastHeartbeat = ts;
      if (machine.operator)
        out.push(reading(machine, 'identifier', ts, { identifier: machine.operator, event: 'login' }));
    }
    if (machine.breakUntil > ts) {
      if (ts - machine.lastHeartbeat >= 60_000) {
        out.push(reading(machine, 'heartbeat', ts));
        machine.lastHeartbeat = ts;
      }
    } else {
      if (!machine.running) {
        machine.running = true;
        out.push(reading(machine, 'heartbeat', ts));
        machine.lastHeartbeat = ts;
        if (machine.crew) {
          machine.operator = machine.crew;
          out.push(reading(machine, 'identifier', ts, { identifier: machine.operator, event: 'login' }));
        }
      }
      const remaining = haversineM(machine.position, machine.waypoint);
      const step = (machine.speedKmh / 3.6) * dt;
      let speedKmh = machine.speedKmh;
      if (remaining <= step && machine.passing) {
        // A route point: drive through it towards the next one.
        const heading = bearingDeg(machine.position, machine.waypoint);
        machine.position = machine.waypoint;
        const next = machine.route.shift();
        machine.passing = next !== undefined;
        machine.waypoint = next ?? nextWaypoint(machine.position);
        out.push(
          reading(machine, 'gps', ts, {
            speedKmh: Math.round(speedKmh * 10) / 10,
            heading: Math.round(heading * 10) / 10,
          }),
        );
      } else if (remaining <= step) {
        machine.position = machine.waypoint;
        machine.waypoint = nextWaypoint(machine.position);
        machine.loaded = !machine.loaded;
        speedKmh = 0;
        out.push(
          reading(machine, 'adcin', ts, { state: machine.loaded ? 'on' : 'off', raw: machine.loaded ? 24.2 : 0.1 }),
        );
        if (random() < 0.05 && ts >= steadyUntil) {
          // A break: the operator logs out, ignition off for a few minutes.
          if (machine.operator)
            out.push(reading(machine, 'identifier', ts, { identifier: machine.operator, event: 'logout' }));
          machine.operator = null;
          machine.running = false;
          machine.breakUntil = ts + (2 + random() * 6) * 60_000;
          out.push(reading(machine, 'heartbeat', ts + 1));
          machine.lastHeartbeat = ts + 1;
          machine.lastTs = ts + 1;
        }
      } else {
        const heading = bearingDeg(machine.position, machine.waypoint);
        machine.position = destination(machine.position, step, heading);
        out.push(
          reading(machine, 'gps', ts, {
            speedKmh: Math.round(speedKmh * 10) / 10,
            heading: Math.round(heading * 10) / 10,
          }),
        );
      }
      machine.hourmeter += dt;
      if (ts - machine.lastHourmeter >= 60_000) {
        out.push(reading(machine, 'hourmeter', ts, { value: Math.round(machine.hourmeter) }));
        machine.lastHourmeter = ts;
      }
      if (ts - machine.lastHeartbeat >= 30_000) {
        out.push(reading(machine, 'heartbeat', ts));
        machine.lastHeartbeat = ts;
      }
      if (ts - machine.lastImu >= 10_000) {
        out.push(
          reading(machine, 'imu', ts, {
            peakG: random() < 0.02 ? 2.5 + random() * 2 : Math.round(random() * 180) / 100,
          }),
        );
        machine.lastImu = ts;
      }
    }

    // Out of coverage: buffer, then upload everything as batches when back.
    if (machine.offlineUntil > ts) {
      machine.buffer.push(...out);
      return;
    }
    if (machine.buffer.length > 0) {
      const batches = toBatches(machine.buffer, { size: 100, uploadAt: ts });
      stats.batches += batches.length;
      stats.batchedReadings += machine.buffer.length;
      machine.buffer = [];
      for (const batch of batches) send(batch);
    }
    if (random() < lateFraction && ts >= steadyUntil) machine.offlineUntil = ts + (1 + random() * 4) * 60_000;

    for (const message of out) {
      send(message);
      if (random() < duplicateFraction) {
        send(message);
        stats.duplicates += 1;
      }
    }
    if (badFraction > 0 && random() < badFraction) {
      const cases = badMessageCases(machine.deviceId, ts).filter(
        (entry) => entry.reason !== 'payload_too_large' || random() < 0.05,
      );
      send(cases[Math.floor(random() * cases.length)]!.message);
      stats.bad += 1;
    }
  };

  const timer = setInterval(() => {
    stats.ticks += 1;
    const ts = Date.now();
    for (const machine of machines) tickMachine(machine, ts);
  }, intervalMs);
  log?.info({ devices: machines.length, intervalMs }, 'simulator started');

  return {
    stats: () => structuredClone(stats),
    async stop() {
      clearInterval(timer);
      await publisher.flush();
      if (!options.publisher) await publisher.close();
      log?.info(stats, 'simulator stopped');
    },
  };
}
