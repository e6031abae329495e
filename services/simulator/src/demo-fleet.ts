import type { Logger } from '@gantry/logger';
import { startSimulator, type RunningSimulator, type SimulatedDevice, type SimulatorStats } from './fleet.ts';
import { haversineM, routeAround, type LatLon } from './geo.ts';
import { MachineScript, type MachineTruth } from './machine-script.ts';
import { toBatches, type SimulatedMessage } from './messages.ts';
import { publishMessages } from './playback.ts';
import { createPublisher } from './publisher.ts';
import { DEMO_YARD, randomSource } from './traffic.ts';
import { avoidBoxes, pickWaypoint, zoneCrossing } from './yard.ts';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

/** Where a machine of the demo history stands when the history ends: the live fleet starts from here. */
export interface DemoMachineEnd {
  deviceId: string;
  position: LatLon;
  loaded: boolean;
  /** Hourmeter value (running seconds) of the last reading. */
  hourmeter: number;
  /** The operator logged in at the end (the current shift's), or null. */
  operator: string | null;
  running: boolean;
}

export interface DemoHistoryOptions {
  deviceIds: string[];
  /** Device time the history ends at (epoch ms): every reading is at or before it. */
  end: number;
  /** How far back the history starts (default 10 hours). */
  hours?: number;
  /**
   * Operator identifiers. Machine i is driven by operators[i] on the earlier shift and by
   * operators[i + machines] on the current one (both modulo the list), so with twice as
   * many operators as machines nobody drives two machines at once.
   */
  operators: string[];
  /** Yard centre (default the demo yard) and radius of the working area (default 500 m). */
  center?: LatLon;
  radiusM?: number;
  /** Rings (forbidden zones) no route goes through. */
  avoid?: LatLon[][];
  /** Where given machines must be parked, engine running, when the history ends. */
  endAt?: Record<string, LatLon>;
  /** Seconds between GPS fixes while running (default 10). */
  gpsEveryS?: number;
  seed?: number;
}

export interface DemoHistory {
  /** Readings (not batches), each device's in device-time order. */
  messages: SimulatedMessage[];
  machines: DemoMachineEnd[];
  /** Each machine's ground truth (MachineScript's). */
  truths: MachineTruth[];
}

/** Travel speeds (km/h) by the kind of machine the demo's device id names: straddle carriers are the fastest. */
function speedsFor(deviceId: string, random: () => number): { empty: number; loaded: number } {
  const [emptyFrom, emptyTo, loadedFrom, loadedTo] = deviceId.includes('-sc-')
    ? [16, 22, 12, 16]
    : deviceId.includes('-rs-')
      ? [12, 16, 8, 11]
      : deviceId.includes('-fl-')
        ? [10, 14, 7, 10]
        : [10, 15, 8, 12];
  return {
    empty: emptyFrom + random() * (emptyTo - emptyFrom),
    loaded: loadedFrom + random() * (loadedTo - loadedFrom),
  };
}

/**
 * The demo fleet's recent past, as its devices would have recorded it: from `hours` ago
 * until `end`, each machine works an earlier shift and the current one — operators log
 * in and out, containers are lifted and set down between random points of the yard, a
 * coffee break and a lunch break with the engine off, a shift handover — with variations
 * by machine (handover on the move, a tracker outage, waiting for a vessel, a maintenance
 * stop), and is still running with the current shift's operator logged in when the
 * history ends. Pure: the same options give the same readings (upload them with
 * historyBatches()).
 */
export function demoHistory(options: DemoHistoryOptions): DemoHistory {
  const hours = options.hours ?? 10;
  const center = options.center ?? DEMO_YARD;
  const radiusM = options.radiusM ?? 500;
  const boxes = avoidBoxes(options.avoid);
  const operators = options.operators.length > 0 ? options.operators : ['OP-001'];
  const count = options.deviceIds.length;
  const messages: SimulatedMessage[] = [];
  const machines: DemoMachineEnd[] = [];
  const truths: MachineTruth[] = [];

  options.deviceIds.forEach((deviceId, index) => {
    const random = randomSource((options.seed ?? 20_240_601) + index * 7919);
    const between = (low: number, high: number) => low + random() * (high - low);
    const speeds = speedsFor(deviceId, random);
    const dayCrew = operators[index % operators.length]!;
    const currentCrew = operators[(index + count) % operators.length]!;
    const hourmeterStart = 36_000_000 + index * 137 * 3600;
    const start = options.end - hours * HOUR + Math.round(between(0, 20) * MINUTE);
    const handover = options.end - Math.min(2 * HOUR, (hours * HOUR) / 3) + Math.round(between(-10, 10) * MINUTE);
    const lunch = start + (handover - start) / 2 + Math.round(between(-15, 15) * MINUTE);
    let position = pickWaypoint(center, center, radiusM, boxes, random);
    let loaded = false;
    let operator: string | null = null;
    const script = new MachineScript({
      deviceId,
      start,
      position,
      gpsEveryS: options.gpsEveryS ?? 10,
      hourmeterEveryS: 60,
      heartbeatEveryS: 60,
      hourmeterStart,
    });

    const driveTo = (target: LatLon, speedKmh: number) => {
      for (const point of routeAround(position, target, boxes)) {
        if (haversineM(position, point) < 10) continue;
        script.drive(point, speedKmh);
        position = point;
      }
    };
    const idleUntil = (until: number) => {
      if (until > script.now) script.idle((until - script.now) / 1000);
    };
    const login = (identifier: string) => {
      script.login(identifier);
      operator = identifier;
    };
    const logout = () => {
      script.logout();
      operator = null;
    };
    /** The operator badges out, then switches off a few seconds later. */
    const signOff = () => {
      logout();
      script.idle(between(5, 20));
      script.ignitionOff();
    };
    /** A short break: the operator badges out, engine off, back after 10–15 minutes. */
    const coffee = () => {
      const who = operator;
      signOff();
      script.idle(between(10, 15) * 60);
      script.ignitionOn();
      if (who) login(who);
    };
    /**
     * One container move: drive to a pick-up point, lift, drive to a drop point, set down,
     * wait for the next job. Planned first: false (nothing done) when it would not end by `until`.
     */
    const cycle = (until: number): boolean => {
      const pickup = pickWaypoint(position, center, radiusM, boxes, random);
      const dropAt = pickWaypoint(pickup, center, radiusM, boxes, random);
      const waits = [between(15, 45), between(5, 15), between(10, 30), between(30, 150)];
      const driving =
        haversineM(position, pickup) / (speeds.empty / 3.6) + haversineM(pickup, dropAt) / (speeds.loaded / 3.6);
      if (script.now + (driving + waits.reduce((sum, wait) => sum + wait, 0) + 30) * 1000 > until) return false;
      driveTo(pickup, speeds.empty);
      script.idle(waits[0]!);
      script.lift();
      loaded = true;
      script.idle(waits[1]!);
      script.shock(Math.round(between(0.4, 1.9) * 100) / 100);
      driveTo(dropAt, speeds.loaded);
      script.idle(waits[2]!);
      script.drop();
      loaded = false;
      if (random() < 0.03) script.shock(Math.round(between(2.6, 3.6) * 100) / 100);
      script.idle(waits[3]!);
      return true;
    };
    /** Container moves until `until`, then idling; `events` happen at their time, between moves (or not at all when too late). */
    const workUntil = (until: number, events: Array<{ at: number; run: () => void }> = []) => {
      const pending = [...events].sort((a, b) => a.at - b.at);
      for (;;) {
        if (pending.length > 0 && script.now >= pending[0]!.at) pending.shift()!.run();
        else if (!cycle(until)) break;
      }
      idleUntil(until);
    };

    // The earlier shift, with a coffee break (half the machines), a lunch break and the variations.
    script.ignitionOn();
    login(dayCrew);
    const earlyEvents: Array<{ at: number; run: () => void }> = [];
    if (index % 2 === 0) earlyEvents.push({ at: start + Math.round(between(100, 160) * MINUTE), run: coffee });
    if (index % 9 === 4) {
      // The tracker loses power for 35 minutes: sessions end by timeout; the operator badges in again.
      earlyEvents.push({
        at: start + 90 * MINUTE,
        run: () => {
          script.silence(35 * 60);
          login(dayCrew);
        },
      });
    }
    if (index % 6 === 5) {
      // A maintenance stop of an hour and a half.
      earlyEvents.push({
        at: start + 150 * MINUTE,
        run: () => {
          signOff();
          script.idle(90 * 60);
          script.ignitionOn();
          login(dayCrew);
        },
      });
    }
    workUntil(lunch, earlyEvents);
    // Some operators just switch off for lunch without badging out (the ignition ends their session).
    if (index % 3 === 0) {
      script.ignitionOff();
      operator = null;
    } else {
      signOff();
    }
    script.idle(between(25, 35) * 60);
    script.ignitionOn();
    login(dayCrew);
    workUntil(handover);

    // The handover: usually the machine stops and the next operator starts it; some swap on the move.
    if (index % 5 === 2) {
      login(currentCrew);
    } else {
      signOff();
      script.idle(between(8, 18) * 60);
      script.ignitionOn();
      login(currentCrew);
    }
    const lateEvents: Array<{ at: number; run: () => void }> = [];
    if (index % 2 === 1) lateEvents.push({ at: script.now + Math.round(between(40, 60) * MINUTE), run: coffee });
    if (index % 7 === 3)
      lateEvents.push({ at: script.now + 30 * MINUTE, run: () => script.idle(between(15, 25) * 60) });
    const parking = options.endAt?.[deviceId];
    workUntil(options.end - (parking ? 12 * MINUTE : 1000), lateEvents);
    if (parking) {
      driveTo(parking, speeds.loaded);
      idleUntil(options.end - 1000);
    }

    const own = script.messages().filter((message) => message.ts <= options.end);
    messages.push(...own);
    const truth = script.truth();
    truths.push(truth);
    machines.push({
      deviceId,
      position,
      loaded,
      hourmeter: hourmeterStart + truth.hourmeterDelta,
      operator,
      running: true,
    });
  });
  return { messages, machines, truths };
}

/**
 * The readings as store-and-forward `batch` messages of up to `size` entries (300 make
 * about 45 KB, under the 64 KiB payload limit), all uploaded at `uploadAt`; the devices
 * take turns so every machine's past arrives together, each device's batches in order.
 */
export function historyBatches(messages: SimulatedMessage[], uploadAt: number, size = 300): SimulatedMessage[] {
  const byDevice = new Map<string, SimulatedMessage[]>();
  for (const batch of toBatches(messages, { size, uploadAt })) {
    const list = byDevice.get(batch.deviceId) ?? [];
    list.push(batch);
    byDevice.set(batch.deviceId, list);
  }
  const lists = [...byDevice.values()];
  const out: SimulatedMessage[] = [];
  for (let index = 0; lists.some((list) => index < list.length); index += 1) {
    for (const list of lists) if (index < list.length) out.push(list[index]!);
  }
  return out;
}

/** How long a freshly started demo fleet works without breaks or coverage gaps. */
export const DEMO_STEADY_START_MS = 10 * 60_000;

export interface DemoFleetDevice {
  deviceId: string;
  /** What the platform last heard from it (after a restart), to carry on from there. */
  position?: LatLon | null;
  hourmeter?: number | null;
  loaded?: boolean | null;
}

export interface DemoFleetOptions {
  mqttUrl: string;
  username?: string | undefined;
  password?: string | undefined;
  devices: DemoFleetDevice[];
  /** Operator identifiers (see demoHistory for who drives which machine). */
  operators: string[];
  /** Forbidden zones (outer rings): routes keep out, except that the first device's first route crosses the first zone. */
  forbidden?: LatLon[][];
  /** Upload the fleet's recent past before going live: only for a fresh demo. */
  history: boolean;
  historyHours?: number;
  center?: LatLon;
  intervalMs?: number;
  logger?: Logger | undefined;
}

export interface DemoFleet {
  /** Settles once the history is uploaded (at once without one) and the live fleet runs. */
  ready: Promise<{ historyReadings: number; historyMessages: number }>;
  stats(): SimulatorStats | null;
  stop(): Promise<void>;
}

/**
 * The demo's fleet: on a fresh demo, first the last `historyHours` (10) of every machine
 * uploaded as `batch` messages (demoHistory), then the live fleet (startSimulator)
 * carrying on from where the history ended: same operators, positions, hourmeters. The
 * first machine's first live route cuts through the first forbidden zone, so a geofence
 * alert opens and resolves within the first minutes of every start.
 *
 * After a history upload the live fleet starts steady (DEMO_STEADY_START_MS): no breaks,
 * no coverage gaps. Each machine's uploaded batches count as late messages in data
 * quality until its live messages outnumber them (about half a minute of driving); a
 * machine that went on a break at once would read "delayed" for up to eight minutes.
 */
export function startDemoFleet(options: DemoFleetOptions): DemoFleet {
  const log = options.logger?.child({ component: 'demo-fleet' });
  const center = options.center ?? DEMO_YARD;
  const forbidden = options.forbidden ?? [];
  const boxes = avoidBoxes(forbidden);
  const crossing = forbidden[0] ? zoneCrossing(forbidden[0], center) : null;
  const crosser = options.devices[0]?.deviceId;
  const abort = new AbortController();
  let live: RunningSimulator | null = null;

  const run = async () => {
    const now = Date.now();
    const history = options.history
      ? demoHistory({
          deviceIds: options.devices.map((device) => device.deviceId),
          end: now - 2000,
          hours: options.historyHours,
          operators: options.operators,
          center,
          avoid: forbidden,
          endAt: crossing && crosser ? { [crosser]: crossing.approach } : {},
        })
      : null;
    let historyMessages = 0;
    if (history) {
      const batches = historyBatches(history.messages, now);
      const publisher = await createPublisher({
        mqttUrl: options.mqttUrl,
        username: options.username,
        password: options.password,
        window: 50,
      });
      try {
        historyMessages = await publishMessages(publisher, batches, { signal: abort.signal });
      } finally {
        await publisher.close();
      }
      log?.info(
        { readings: history.messages.length, messages: historyMessages, hours: options.historyHours ?? 10 },
        'demo history uploaded',
      );
    }
    if (abort.signal.aborted) return { historyReadings: 0, historyMessages };

    const ends = new Map((history?.machines ?? []).map((machine) => [machine.deviceId, machine]));
    const count = options.devices.length;
    const devices: SimulatedDevice[] = options.devices.map((device, index) => {
      const end = ends.get(device.deviceId);
      const position = end?.position ?? device.position ?? undefined;
      const crossesZone = crossing !== null && index === 0;
      const toApproach =
        crossing === null ? [] : position ? routeAround(position, crossing.approach, boxes) : [crossing.approach];
      return {
        deviceId: device.deviceId,
        position,
        operator: end ? end.operator : (options.operators[(index + count) % options.operators.length] ?? null),
        hourmeter: end?.hourmeter ?? device.hourmeter ?? undefined,
        loaded: end?.loaded ?? device.loaded ?? undefined,
        route: crossesZone ? [...toApproach, ...crossing.route] : undefined,
        speedKmh: crossesZone ? 15 : undefined,
      };
    });
    live = await startSimulator({
      mqttUrl: options.mqttUrl,
      username: options.username,
      password: options.password,
      devices,
      center,
      avoid: forbidden,
      operators: options.operators,
      intervalMs: options.intervalMs,
      steadyStartMs: history ? DEMO_STEADY_START_MS : 0,
      logger: options.logger,
    });
    return { historyReadings: history?.messages.length ?? 0, historyMessages };
  };

  const ready = run();
  ready.catch((error: unknown) => log?.error({ err: error }, 'demo fleet failed to start'));
  return {
    ready,
    stats: () => (live as RunningSimulator | null)?.stats() ?? null,
    async stop() {
      abort.abort();
      await ready.catch(() => undefined);
      await (live as RunningSimulator | null)?.stop();
    },
  };
}
