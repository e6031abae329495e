import type { ReadingType } from '@gantry/contracts';
import { bearingDeg, haversineM, interpolate, type LatLon } from './geo.ts';
import type { SimulatedMessage } from './messages.ts';

/**
 * A scripted machine with known answers. Each action (drive a route, lift a container,
 * idle, log in, fall silent, …) appends the readings a device would publish and
 * accumulates the ground truth the derivation must reproduce, using the definitions of
 * docs/derivation.md:
 * - running: between ignitionOn() and ignitionOff(); every reading carries `ignition`;
 * - moving: each drive step covers ≥ 5 m at ≥ 0.5 m/s (drive() refuses slower speeds),
 *   distance is the haversine sum between consecutive fixes;
 * - loaded: between lift() and drop() (adcin on / off), cycles = lifts;
 * - a silence() longer than 10 minutes is a data gap (not running, ends sessions);
 *   a shorter one keeps the last state (running and stationary if running);
 * - hourmeter: cumulative running seconds, published at ignition changes and every
 *   `hourmeterEveryS` while running.
 */
export interface MachineScriptOptions {
  deviceId: string;
  /** Device time of the first reading (epoch ms or Date). */
  start: number | Date;
  position: LatLon;
  /** Seconds between GPS fixes while running (default 5). */
  gpsEveryS?: number;
  hourmeterEveryS?: number;
  heartbeatEveryS?: number;
  /** Hourmeter value (running seconds) before the script (default 10,000 h). */
  hourmeterStart?: number;
}

export interface IdentifierSessionTruth {
  identifier: string;
  start: number;
  end: number | null;
  endReason: 'logout' | 'identifier_change' | 'ignition_off' | 'timeout' | null;
}

export interface UsageSessionTruth {
  start: number;
  end: number | null;
  startReason: 'ignition_on';
  endReason: 'ignition_off' | 'timeout' | null;
  distanceM: number;
  containerCycles: number;
}

export interface MachineTruth {
  deviceId: string;
  start: number;
  end: number;
  runningSeconds: number;
  movingSeconds: number;
  stationaryRunningSeconds: number;
  distanceM: number;
  loadedSeconds: number;
  emptySeconds: number;
  loadedDistanceM: number;
  emptyDistanceM: number;
  containerCycleCount: number;
  hourmeterDelta: number;
  imuAnomalyCount: number;
  gpsFixes: number;
  validGpsFixes: number;
  readings: Record<ReadingType, number>;
  usageSessions: UsageSessionTruth[];
  identifierSessions: IdentifierSessionTruth[];
  /** Periods without any message longer than 10 minutes. */
  gaps: Array<{ start: number; end: number }>;
}

const GAP_MS = 10 * 60_000;

export class MachineScript {
  private t: number;
  private position: LatLon;
  private running = false;
  private loaded = false;
  private hourmeter: number;
  private readonly hourmeterStart: number;
  private lastHourmeterAt = Number.NEGATIVE_INFINITY;
  private lastHeartbeatAt = Number.NEGATIVE_INFINITY;
  private readonly out: SimulatedMessage[] = [];
  private readonly keys = new Set<string>();
  private readonly gpsEveryMs: number;
  private readonly hourmeterEveryMs: number;
  private readonly heartbeatEveryMs: number;
  private readonly truthState: MachineTruth;
  private identifier: IdentifierSessionTruth | null = null;
  private session: UsageSessionTruth | null = null;

  constructor(private readonly options: MachineScriptOptions) {
    this.t = typeof options.start === 'number' ? options.start : options.start.getTime();
    this.position = { ...options.position };
    this.hourmeterStart = options.hourmeterStart ?? 36_000_000;
    this.hourmeter = this.hourmeterStart;
    this.gpsEveryMs = (options.gpsEveryS ?? 5) * 1000;
    this.hourmeterEveryMs = (options.hourmeterEveryS ?? 60) * 1000;
    this.heartbeatEveryMs = (options.heartbeatEveryS ?? 60) * 1000;
    this.truthState = {
      deviceId: options.deviceId,
      start: this.t,
      end: this.t,
      runningSeconds: 0,
      movingSeconds: 0,
      stationaryRunningSeconds: 0,
      distanceM: 0,
      loadedSeconds: 0,
      emptySeconds: 0,
      loadedDistanceM: 0,
      emptyDistanceM: 0,
      containerCycleCount: 0,
      hourmeterDelta: 0,
      imuAnomalyCount: 0,
      gpsFixes: 0,
      validGpsFixes: 0,
      readings: { gps: 0, adcin: 0, hourmeter: 0, imu: 0, identifier: 0, heartbeat: 0 },
      usageSessions: [],
      identifierSessions: [],
      gaps: [],
    };
  }

  /** Current device time (epoch ms). */
  get now(): number {
    return this.t;
  }

  /** Adds a reading; false when a periodic reading of this type already exists at this millisecond. */
  private emit(type: ReadingType, fields: Record<string, unknown>): boolean {
    // Events (lift, login, shock) never vanish: a second one in the same millisecond happens a second later.
    while (this.keys.has(`${type}|${this.t}`) && (type === 'adcin' || type === 'identifier' || type === 'imu'))
      this.account(1000, 0);
    const key = `${type}|${this.t}`;
    if (this.keys.has(key)) return false;
    this.keys.add(key);
    this.out.push({
      deviceId: this.options.deviceId,
      type,
      ts: this.t,
      payload: { ts: new Date(this.t).toISOString(), ...fields },
    });
    this.truthState.readings[type] += 1;
    this.truthState.end = Math.max(this.truthState.end, this.t);
    return true;
  }

  private fix(speedKmh: number, heading?: number, extra: Record<string, unknown> = {}): boolean {
    const emitted = this.emit('gps', {
      lat: Number(this.position.lat.toFixed(7)),
      lon: Number(this.position.lon.toFixed(7)),
      speedKmh: Math.round(speedKmh * 10) / 10,
      ...(heading === undefined ? {} : { heading: Math.round(heading * 10) / 10 }),
      hdop: 0.8,
      satellites: 11,
      fix: true,
      ignition: this.running,
      ...extra,
    });
    if (!emitted) return false;
    this.truthState.gpsFixes += 1;
    this.truthState.validGpsFixes += 1;
    return true;
  }

  private hourmeterReading(): void {
    this.emit('hourmeter', { value: Math.round(this.hourmeter), ignition: this.running });
    this.lastHourmeterAt = this.t;
  }

  private heartbeat(): void {
    this.emit('heartbeat', {
      ignition: this.running,
      batteryV: 26.4,
      rssi: -67,
      firmware: 'sim-1.4.2',
      uptimeS: Math.round((this.t - this.truthState.start) / 1000),
    });
    this.lastHeartbeatAt = this.t;
  }

  private periodic(): void {
    if (this.running && this.t - this.lastHourmeterAt >= this.hourmeterEveryMs) this.hourmeterReading();
    if (this.t - this.lastHeartbeatAt >= this.heartbeatEveryMs) this.heartbeat();
  }

  /** Advances time by dtMs in the current state, moving distanceM (0 when stationary). */
  private account(dtMs: number, distanceM: number): void {
    const seconds = dtMs / 1000;
    this.t += dtMs;
    if (!this.running) return;
    const truth = this.truthState;
    truth.runningSeconds += seconds;
    this.hourmeter += seconds;
    if (distanceM > 0) {
      truth.movingSeconds += seconds;
      truth.distanceM += distanceM;
      if (this.session) this.session.distanceM += distanceM;
    } else {
      truth.stationaryRunningSeconds += seconds;
    }
    if (this.loaded) {
      truth.loadedSeconds += seconds;
      truth.loadedDistanceM += distanceM;
    } else {
      truth.emptySeconds += seconds;
      truth.emptyDistanceM += distanceM;
    }
  }

  /**
   * An ignition switch is only seen through the readings that carry it: when readings
   * already exist at this millisecond (the previous step's last fix), the switch happens
   * a second later, so its readings are not dropped as duplicates of those.
   */
  private clearInstant(): void {
    if (this.keys.has(`gps|${this.t}`) || this.keys.has(`heartbeat|${this.t}`) || this.keys.has(`hourmeter|${this.t}`))
      this.account(1000, 0);
  }

  ignitionOn(): this {
    if (this.running) return this;
    this.clearInstant();
    this.running = true;
    this.session = {
      start: this.t,
      end: null,
      startReason: 'ignition_on',
      endReason: null,
      distanceM: 0,
      containerCycles: 0,
    };
    this.truthState.usageSessions.push(this.session);
    this.heartbeat();
    this.hourmeterReading();
    this.fix(0);
    return this;
  }

  ignitionOff(): this {
    if (!this.running) return this;
    this.clearInstant();
    this.running = false;
    this.heartbeat();
    this.hourmeterReading();
    this.fix(0);
    if (this.session) {
      this.session.end = this.t;
      this.session.endReason = 'ignition_off';
      this.session = null;
    }
    this.endIdentifier('ignition_off');
    return this;
  }

  /** Drives straight to a point at a constant speed (≥ 2 km/h so each step counts as moving). */
  drive(to: LatLon, speedKmh: number): this {
    if (!this.running) throw new Error('drive() needs ignitionOn() first');
    if (speedKmh < 2) throw new Error('drive() speed must be at least 2 km/h (0.5 m/s is the moving threshold)');
    const from = this.position;
    const total = haversineM(from, to);
    const durationMs = (total / (speedKmh / 3.6)) * 1000;
    const steps = Math.max(1, Math.ceil(durationMs / this.gpsEveryMs));
    const heading = bearingDeg(from, to);
    const startT = this.t;
    let previous = from;
    for (let step = 1; step <= steps; step += 1) {
      const next = step === steps ? { ...to } : interpolate(from, to, step / steps);
      const stepEnd = startT + Math.round((durationMs * step) / steps);
      const dt = stepEnd - this.t;
      const distance = haversineM(previous, next);
      if (distance < 5) throw new Error('drive() steps must cover at least 5 m: raise the speed or gpsEveryS');
      this.position = next;
      this.account(dt, distance);
      this.fix(speedKmh, heading);
      this.periodic();
      previous = next;
    }
    return this;
  }

  driveRoute(points: LatLon[], speedKmh: number): this {
    for (const point of points) this.drive(point, speedKmh);
    return this;
  }

  /** Stays put for `seconds`: running and stationary if the ignition is on, parked otherwise. */
  idle(seconds: number): this {
    const end = this.t + seconds * 1000;
    const every = this.running ? this.gpsEveryMs : this.heartbeatEveryMs;
    while (this.t < end) {
      const dt = Math.min(every, end - this.t);
      this.account(dt, 0);
      if (this.running) this.fix(0);
      this.periodic();
    }
    return this;
  }

  /** The spreader locks a container (adcin on). */
  lift(): this {
    if (!this.loaded) {
      this.loaded = true;
      this.truthState.containerCycleCount += 1;
      if (this.session) this.session.containerCycles += 1;
    }
    this.emit('adcin', { state: 'on', raw: 24.1, ignition: this.running });
    return this;
  }

  /** The spreader releases it (adcin off). */
  drop(): this {
    this.loaded = false;
    this.emit('adcin', { state: 'off', raw: 0.2, ignition: this.running });
    return this;
  }

  private endIdentifier(reason: IdentifierSessionTruth['endReason']): void {
    if (!this.identifier) return;
    this.identifier.end = this.t;
    this.identifier.endReason = reason;
    this.identifier = null;
  }

  login(identifier: string): this {
    this.endIdentifier('identifier_change');
    this.emit('identifier', { identifier, event: 'login', ignition: this.running });
    this.identifier = { identifier, start: this.t, end: null, endReason: null };
    this.truthState.identifierSessions.push(this.identifier);
    return this;
  }

  logout(): this {
    const current = this.identifier;
    if (!current) return this;
    this.emit('identifier', { identifier: current.identifier, event: 'logout', ignition: this.running });
    this.endIdentifier('logout');
    return this;
  }

  /** An IMU window; peaks of 2.5 g or more count as anomalies. */
  shock(peakG: number): this {
    this.emit('imu', { peakG, samples: 200, windowMs: 2000, ignition: this.running });
    if (peakG >= 2.5) this.truthState.imuAnomalyCount += 1;
    return this;
  }

  /** One second later, a GPS fix the derivation must ignore: no fix, hdop over 5, or (0, 0). */
  badFix(kind: 'no_fix' | 'poor_hdop' | 'null_island'): this {
    this.account(1000, 0);
    const saved = this.position;
    if (kind === 'null_island') this.position = { lat: 0, lon: 0 };
    const emitted = this.fix(
      0,
      undefined,
      kind === 'no_fix' ? { fix: false } : kind === 'poor_hdop' ? { hdop: 9.5 } : {},
    );
    this.position = saved;
    if (emitted) this.truthState.validGpsFixes -= 1;
    return this;
  }

  /** The device publishes nothing for `seconds` (out of coverage, powered off). */
  silence(seconds: number): this {
    const start = this.t;
    const ms = seconds * 1000;
    if (ms > GAP_MS) {
      this.t += ms;
      this.truthState.gaps.push({ start, end: this.t });
      if (this.session) {
        this.session.end = start;
        this.session.endReason = 'timeout';
        this.session = null;
      }
      if (this.identifier) {
        this.identifier.end = start;
        this.identifier.endReason = 'timeout';
        this.identifier = null;
      }
      if (this.running) {
        // Back in coverage with the engine still on: the device reports at once, and that
        // reading starts a new session (the gap ended the previous one).
        this.hourmeter += seconds;
        this.session = {
          start: this.t,
          end: null,
          startReason: 'ignition_on',
          endReason: null,
          distanceM: 0,
          containerCycles: 0,
        };
        this.truthState.usageSessions.push(this.session);
        this.heartbeat();
      }
    } else {
      this.account(ms, 0);
    }
    return this;
  }

  /** The readings so far, in device-time order. */
  messages(): SimulatedMessage[] {
    return [...this.out].sort((a, b) => a.ts - b.ts);
  }

  truth(): MachineTruth {
    const truth = structuredClone(this.truthState);
    truth.hourmeterDelta = Math.round(this.hourmeter) - Math.round(this.hourmeterStart);
    return truth;
  }
}
