import { createHmac, timingSafeEqual } from 'node:crypto';
import {
  haversineM,
  MachineScript,
  type LatLon,
  type MachineScriptOptions,
  type MachineTruth,
} from '@gantry/simulator';

// Helpers of the system tests: a MachineScript that also records its ground truth per
// hour and per moment, Prometheus text parsing, HTTP calls and the receiver's own
// signature check.

export const HOUR = 3_600_000;
export const DAY = 24 * HOUR;

/** The additive figures of a machine's ground truth. */
const figureKeys = [
  'runningSeconds',
  'movingSeconds',
  'stationaryRunningSeconds',
  'distanceM',
  'loadedSeconds',
  'emptySeconds',
  'loadedDistanceM',
  'emptyDistanceM',
  'containerCycleCount',
  'imuAnomalyCount',
] as const satisfies ReadonlyArray<keyof MachineTruth>;

export type Figures = Pick<MachineTruth, (typeof figureKeys)[number]>;

export function zeroFigures(): Figures {
  return Object.fromEntries(figureKeys.map((key) => [key, 0])) as unknown as Figures;
}

export function figuresOf(truth: MachineTruth): Figures {
  return Object.fromEntries(figureKeys.map((key) => [key, truth[key]])) as unknown as Figures;
}

export function addFigures(a: Figures, b: Figures, sign = 1): Figures {
  return Object.fromEntries(figureKeys.map((key) => [key, a[key] + sign * b[key]])) as unknown as Figures;
}

const hourOf = (ts: number) => Math.floor(ts / HOUR) * HOUR;

/**
 * A MachineScript that keeps a snapshot of its truth after every action and never lets
 * anything but idle() cross an hour boundary (idle() stops at each one), so the truth of
 * every UTC hour is the difference of two snapshots — what a gold hourly bucket must show.
 */
export class ScriptedMachine {
  readonly script: MachineScript;
  readonly deviceId: string;
  private position: LatLon;
  private readonly marks: Array<{ t: number; figures: Figures }> = [];
  /** Whether hour boundaries are kept (see unbound()). */
  private bound = true;

  constructor(options: MachineScriptOptions) {
    this.script = new MachineScript(options);
    this.deviceId = options.deviceId;
    this.position = { ...options.position };
    this.mark();
  }

  get now(): number {
    return this.script.now;
  }

  private mark(): void {
    this.marks.push({ t: this.now, figures: figuresOf(this.script.truth()) });
  }

  /** Runs an action that must not cross an hour boundary. */
  private step(action: () => void): this {
    const before = this.now;
    action();
    if (this.bound && this.now > before && hourOf(before) !== hourOf(this.now - 1)) {
      throw new Error(
        `script of ${this.deviceId}: an action from ${new Date(before).toISOString()} crosses an hour boundary outside idle()`,
      );
    }
    this.mark();
    return this;
  }

  /** Stays put (running and stationary, or parked), stopping at every hour boundary. */
  idle(seconds: number): this {
    const end = this.now + seconds * 1000;
    while (this.now < end) {
      const stop = Math.min(end, hourOf(this.now) + HOUR);
      this.script.idle((stop - this.now) / 1000);
      this.mark();
    }
    return this;
  }

  /** Parks (or idles) until a device time. */
  idleUntil(ts: number): this {
    if (ts < this.now) throw new Error(`script of ${this.deviceId}: idleUntil goes back in time`);
    return this.idle((ts - this.now) / 1000);
  }

  on(): this {
    return this.step(() => this.script.ignitionOn());
  }

  off(): this {
    return this.step(() => this.script.ignitionOff());
  }

  /** Drives to a point; first idles past the next hour boundary when the drive would cross it. */
  drive(to: LatLon, speedKmh: number): this {
    const durationMs = Math.round((haversineM(this.position, to) / (speedKmh / 3.6)) * 1000);
    if (this.bound && hourOf(this.now) !== hourOf(this.now + durationMs - 1))
      this.idleUntil(hourOf(this.now) + HOUR + 5000);
    this.step(() => this.script.drive(to, speedKmh));
    this.position = { ...to };
    return this;
  }

  lift(): this {
    return this.step(() => this.script.lift());
  }

  drop(): this {
    return this.step(() => this.script.drop());
  }

  login(identifier: string): this {
    return this.step(() => this.script.login(identifier));
  }

  logout(): this {
    return this.step(() => this.script.logout());
  }

  shock(peakG: number): this {
    return this.step(() => this.script.shock(peakG));
  }

  badFix(kind: 'no_fix' | 'poor_hdop' | 'null_island'): this {
    return this.step(() => this.script.badFix(kind));
  }

  /** Publishes nothing until a device time (a parked machine out of coverage: no truth changes). */
  silenceUntil(ts: number): this {
    this.script.silence((ts - this.now) / 1000);
    this.mark();
    return this;
  }

  /**
   * From here on, actions may cross hour boundaries (drives are not held back to the next
   * hour): for a run placed at a given wall-clock time, whose hourly truth is not read.
   */
  unbound(): this {
    this.bound = false;
    return this;
  }

  /** A container move: to the pickup, lift, to the drop point, release, back. */
  shuttle(pickup: LatLon, dropAt: LatLon, home: LatLon, speeds: [number, number, number] = [14, 9, 12]): this {
    return this.drive(pickup, speeds[0])
      .lift()
      .idle(30)
      .drive(dropAt, speeds[1])
      .idle(40)
      .drop()
      .idle(60)
      .drive(home, speeds[2])
      .idle(45);
  }

  truth(): MachineTruth {
    return this.script.truth();
  }

  /** The figures accumulated up to a device time (the first snapshot at or after it). */
  figuresAt(ts: number): Figures {
    const found = this.marks.find((mark) => mark.t >= ts) ?? this.marks[this.marks.length - 1]!;
    return found.figures;
  }

  /** The figures of [from, to). */
  figuresBetween(from: number, to: number): Figures {
    return addFigures(this.figuresAt(to), this.figuresAt(from), -1);
  }

  /** The truth of every UTC hour with any change in it, by hour start (epoch ms). */
  hourly(from = Number.NEGATIVE_INFINITY, to = Number.POSITIVE_INFINITY): Map<number, Figures> {
    const hours = new Map<number, Figures>();
    for (let index = 1; index < this.marks.length; index += 1) {
      const previous = this.marks[index - 1]!;
      const current = this.marks[index]!;
      const hour = hourOf(previous.t);
      if (hour < from || hour >= to) continue;
      const delta = addFigures(current.figures, previous.figures, -1);
      if (Object.values(delta).every((value) => value === 0)) continue;
      hours.set(hour, addFigures(hours.get(hour) ?? zeroFigures(), delta));
    }
    return hours;
  }
}

/** The sum of every series of a metric in Prometheus text (0 when absent). */
export function metricSum(text: string, name: string): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const match = line.match(/^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)/);
    if (match && match[1] === name) sum += Number(match[3]);
  }
  return sum;
}

export async function readMetrics(baseUrl: string): Promise<string> {
  const response = await fetch(`${baseUrl}/metrics`);
  if (response.status !== 200) throw new Error(`${baseUrl}/metrics answered ${response.status}`);
  return response.text();
}

/** `sha256=<hex HMAC-SHA256 of the raw body>` checked in constant time, as a receiver must. */
export function validSignature(rawBody: Buffer, header: string | string[] | undefined, secret: string): boolean {
  const expected = Buffer.from(`sha256=${createHmac('sha256', secret).update(rawBody).digest('hex')}`);
  const given = Buffer.from(typeof header === 'string' ? header : '');
  return given.length === expected.length && timingSafeEqual(given, expected);
}

export interface JsonResponse {
  status: number;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  body: any;
}

/** One HTTP call with an optional JSON body; the answer parsed as JSON when it is. */
export async function callJson(
  url: string,
  init: { method?: string; headers?: Record<string, string>; json?: unknown } = {},
): Promise<JsonResponse> {
  const headers: Record<string, string> = { ...init.headers };
  if (init.json !== undefined) headers['Content-Type'] = 'application/json';
  const response = await fetch(url, {
    method: init.method ?? 'GET',
    headers,
    ...(init.json !== undefined ? { body: JSON.stringify(init.json) } : {}),
  });
  const text = await response.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON: keep the text
  }
  return { status: response.status, body };
}

/**
 * Polls until `read` returns a value `done` accepts, and returns it; throws with the last
 * value after `timeoutMs` (a hang guard, not a timing assertion).
 */
export async function waitUntil<T>(
  label: string,
  read: () => Promise<T>,
  done: (value: T) => boolean,
  timeoutMs = 90_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${label}; last value: ${JSON.stringify(value).slice(0, 2000)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
