import { createHash } from 'node:crypto';
import { z } from 'zod';
import { haversineMeters, isInsideZone } from './geo.ts';
import type {
  DerivationOptions,
  GeofenceTransition,
  GeofenceZone,
  IdentifierEndReason,
  IdentifierSession,
  Reading,
  Segment,
  SessionFigures,
  UsageEndReason,
  UsageSession,
  UsageStartReason,
} from './types.ts';

/*
 * The derivation state machine. Readings become intervals (from one reading to the
 * next, in the state the earlier reading left) and events (at a reading). An interval
 * cannot be placed until its movement is known, which takes the next valid fix (and,
 * for devices without ignition, the next hourmeter reading), so intervals and events
 * wait in an ordered queue and flow, once resolved, into three builders: segments,
 * usage sessions and identifier sessions. The whole state is plain JSON: it is stored
 * as the device's carry and as hourly checkpoints, and derivation resumes from either
 * exactly as if it had never stopped.
 */

export const CARRY_VERSION = 1;
const HOUR_MS = 3_600_000;

interface Interval {
  kind: 'interval';
  from: number;
  to: number;
  assetId: string | null;
  hasData: boolean;
  loaded: boolean;
  /** Running decided by ignition (known) rather than inferred. */
  ignitionBased: boolean;
  ignition: boolean;
  /** null while the fix pair spanning the interval is incomplete. */
  moving: boolean | null;
  distanceM: number;
  /**
   * The interval's share of the hourmeter increment of the reading pair around it, in
   * proportion to time (null while the pair is incomplete). For devices without
   * ignition a positive share also means running.
   */
  hourmeterShare: number | null;
  /** For no-data intervals: how long the device was silent (ms). */
  silentMs: number;
}

type StreamEvent =
  /** distributed: already spread over the intervals of the pair (segments skip it). */
  | { kind: 'hourmeter'; ts: number; increment: number; distributed: boolean }
  | { kind: 'tally'; ts: number; tally: Tally }
  | { kind: 'login'; ts: number; identifier: string }
  | { kind: 'logout'; ts: number; identifier: string | null }
  | { kind: 'ignition_off'; ts: number };

type Item = Interval | StreamEvent;

/** Counts attached to the moment of a reading (they belong to what starts there). */
interface Tally {
  readings: number;
  gpsPoints: number;
  cycles: number;
  imuSamples: number;
  imuAnomalies: number;
}

interface StopTracker {
  stillSince: number | null;
  stopCounted: boolean;
  inTrip: boolean;
}

interface OpenUsage {
  start: number;
  assetId: string | null;
  startReason: UsageStartReason;
  ignitionBased: boolean;
  hourmeterEvidence: boolean;
  identifier: string | null;
  lastEnd: number;
  lastRunningEnd: number;
  figures: SessionFigures;
  tracker: StopTracker;
  /** Inferred sessions in a not-running stretch: the figures as they were before it. */
  committed: { figures: SessionFigures; tracker: StopTracker; lastEnd: number } | null;
}

interface OpenIdentifier {
  identifier: string;
  start: number;
  assetId: string | null;
  lastEnd: number;
  figures: SessionFigures;
  tracker: StopTracker;
}

interface ClosingIdentifier extends OpenIdentifier {
  end: number;
  endReason: IdentifierEndReason;
}

/** The complete derivation state after consuming every reading with ts < at. */
export interface Carry {
  version: typeof CARRY_VERSION;
  at: number;
  lastTs: number | null;
  assetId: string | null;
  ignition: boolean | null;
  /** When the ignition last went from on to off. */
  ignitionOffAt: number | null;
  adcOn: boolean | null;
  fix: { ts: number; lat: number; lon: number } | null;
  hourmeter: { ts: number; value: number } | null;
  hourmeterPairable: boolean;
  inside: Record<string, boolean>;
  queue: Item[];
  segment: { current: Segment | null; buffered: Tally };
  usage: { open: OpenUsage | null; buffered: Tally };
  ident: { open: OpenIdentifier | null; closing: ClosingIdentifier | null; buffered: Tally };
}

/** Loose check of a stored carry: the version must match, the rest is ours. */
export const carrySchema = z.looseObject({ version: z.literal(CARRY_VERSION), at: z.number() });

export function isCarry(value: unknown): value is Carry {
  return carrySchema.safeParse(value).success;
}

export interface DeriveInput {
  /** The device's id: session ids are derived from it and their start. */
  deviceId: string;
  /** Where to resume (a stored carry or checkpoint); null derives from scratch. */
  carry: Carry | null;
  /** The device's readings with ts ≥ carry.at, ordered by (ts, type). */
  readings: Reading[];
  /** Enabled zones of the device's tenant. */
  geofences: GeofenceZone[];
  /** Wall-clock time: silence longer than the gap closes what is open. */
  now: number;
  /**
   * The returned carry is the state before the first reading at or after this time, so
   * the next run re-reads from there (late readings after it cost nothing extra).
   */
  carryAt: number;
  options: DerivationOptions;
}

export interface DeriveResult {
  /** Each kind of output replaces what was produced before with start ≥ this (ms; -Infinity: everything). */
  replaceFrom: { segments: number; usageSessions: number; identifierSessions: number };
  segments: Segment[];
  usageSessions: UsageSession[];
  identifierSessions: IdentifierSession[];
  geofenceTransitions: GeofenceTransition[];
  /** State snapshots at each hour boundary crossed, for restarting after late data. */
  checkpoints: Carry[];
  carry: Carry;
  lastReadingTs: number | null;
  /** When the outputs would change with no new data (a timeout falls due), or null. */
  recheckAt: number | null;
}

const emptyTally = (): Tally => ({ readings: 0, gpsPoints: 0, cycles: 0, imuSamples: 0, imuAnomalies: 0 });
const isEmptyTally = (t: Tally) => t.readings + t.gpsPoints + t.cycles + t.imuSamples + t.imuAnomalies === 0;

const emptyFigures = (): SessionFigures => ({
  distanceM: 0,
  movingSeconds: 0,
  stationaryRunningSeconds: 0,
  runningSeconds: 0,
  stopCount: 0,
  tripCount: 0,
  containerCycleCount: 0,
  loadedSeconds: 0,
  emptySeconds: 0,
  loadedDistanceM: 0,
  emptyDistanceM: 0,
  imuAnomalyCount: 0,
  imuSampleCount: 0,
  hourmeterDelta: null,
  eventCount: 0,
  gpsPointCount: 0,
});

const newTracker = (): StopTracker => ({ stillSince: null, stopCounted: false, inTrip: false });

export function emptyCarry(): Carry {
  return {
    version: CARRY_VERSION,
    at: Number.MIN_SAFE_INTEGER,
    lastTs: null,
    assetId: null,
    ignition: null,
    ignitionOffAt: null,
    adcOn: null,
    fix: null,
    hourmeter: null,
    hourmeterPairable: false,
    inside: {},
    queue: [],
    segment: { current: null, buffered: emptyTally() },
    usage: { open: null, buffered: emptyTally() },
    ident: { open: null, closing: null, buffered: emptyTally() },
  };
}

/** A UUID (version 5 layout) fixed by its inputs, so re-derivation keeps session ids. */
export function stableId(...parts: string[]): string {
  const hex = createHash('sha1').update(parts.join('|')).digest('hex');
  const variant = ((parseInt(hex.slice(16, 18), 16) & 0x3f) | 0x80).toString(16);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-5${hex.slice(13, 16)}-${variant}${hex.slice(18, 20)}-${hex.slice(20, 32)}`;
}

const floorHour = (ms: number) => Math.floor(ms / HOUR_MS) * HOUR_MS;
const isResolved = (iv: Interval) => iv.moving !== null && iv.hourmeterShare !== null;
const runningOf = (iv: Interval) =>
  iv.hasData && (iv.ignitionBased ? iv.ignition : iv.moving === true || (iv.hourmeterShare ?? 0) > 0);

function addTally(figures: SessionFigures, tally: Tally): void {
  figures.eventCount += tally.readings;
  figures.gpsPointCount += tally.gpsPoints;
  figures.containerCycleCount += tally.cycles;
  figures.imuSampleCount += tally.imuSamples;
  figures.imuAnomalyCount += tally.imuAnomalies;
}

function mergeTally(into: Tally, tally: Tally): void {
  into.readings += tally.readings;
  into.gpsPoints += tally.gpsPoints;
  into.cycles += tally.cycles;
  into.imuSamples += tally.imuSamples;
  into.imuAnomalies += tally.imuAnomalies;
}

function addInterval(figures: SessionFigures, iv: Interval): void {
  if (!iv.hasData) return;
  const seconds = (iv.to - iv.from) / 1000;
  const running = runningOf(iv);
  const moving = iv.moving === true;
  if (running) {
    figures.runningSeconds += seconds;
    if (moving) figures.movingSeconds += seconds;
    else figures.stationaryRunningSeconds += seconds;
    if (iv.loaded) figures.loadedSeconds += seconds;
    else figures.emptySeconds += seconds;
  }
  figures.distanceM += iv.distanceM;
  if (iv.loaded) figures.loadedDistanceM += iv.distanceM;
  else figures.emptyDistanceM += iv.distanceM;
}

/** Stops (not moving for stopMin or longer) and trips (movement between stops). */
function trackStops(tracker: StopTracker, figures: SessionFigures, iv: Interval, stopMinMs: number): void {
  if (!iv.hasData) {
    tracker.stillSince = null;
    tracker.stopCounted = false;
    tracker.inTrip = false;
    return;
  }
  if (iv.moving === true) {
    if (!tracker.inTrip) {
      figures.tripCount += 1;
      tracker.inTrip = true;
    }
    tracker.stillSince = null;
    tracker.stopCounted = false;
    return;
  }
  tracker.stillSince ??= iv.from;
  if (!tracker.stopCounted && iv.to - tracker.stillSince >= stopMinMs) {
    figures.stopCount += 1;
    tracker.stopCounted = true;
    tracker.inTrip = false;
  }
}

class Deriver {
  readonly segments: Segment[] = [];
  readonly usageSessions: UsageSession[] = [];
  readonly identifierSessions: IdentifierSession[] = [];
  readonly transitions: GeofenceTransition[] = [];

  constructor(
    readonly state: Carry,
    readonly deviceId: string,
    readonly options: DerivationOptions,
    readonly geofences: GeofenceZone[],
  ) {}

  private get gapMs() {
    return this.options.gapSeconds * 1000;
  }

  /** Consumes the readings of one timestamp. */
  consumeGroup(ts: number, group: Reading[]): void {
    const s = this.state;
    const pairMs = this.options.maxPairSeconds * 1000;
    if (s.lastTs !== null) {
      const silentMs = ts - s.lastTs;
      if (silentMs > this.gapMs) {
        this.breakChains();
        s.queue.push(this.interval(s.lastTs, ts, false, silentMs));
      } else {
        if (s.fix && ts - s.fix.ts > pairMs) this.resolveMoving(null);
        if (s.hourmeter && s.hourmeterPairable && ts - s.hourmeter.ts > pairMs) this.resolveHourmeter(null);
        s.queue.push(this.interval(s.lastTs, ts, true, 0));
      }
    }
    const tally = emptyTally();
    for (const reading of group) this.apply(reading, tally);
    if (!isEmptyTally(tally)) s.queue.push({ kind: 'tally', ts, tally });
    s.lastTs = ts;
    this.flush();
  }

  private interval(from: number, to: number, hasData: boolean, silentMs: number): Interval {
    const s = this.state;
    const ignitionBased = s.ignition !== null;
    return {
      kind: 'interval',
      from,
      to,
      assetId: s.assetId,
      hasData,
      loaded: s.adcOn === true,
      ignitionBased,
      ignition: s.ignition === true,
      moving: hasData && s.fix ? null : false,
      distanceM: 0,
      hourmeterShare: hasData && s.hourmeter && s.hourmeterPairable ? null : 0,
      silentMs,
    };
  }

  /** A gap: no pair can span it. */
  private breakChains(): void {
    this.resolveMoving(null);
    this.resolveHourmeter(null);
  }

  /** Settles pending movement with the fix pair's distance, or as not moving (null). */
  private resolveMoving(pair: { distanceM: number; ms: number } | null): void {
    const { movingMinDistanceM, movingMinSpeedMps } = this.options;
    const moving =
      pair !== null &&
      pair.ms > 0 &&
      pair.distanceM >= movingMinDistanceM &&
      pair.distanceM / (pair.ms / 1000) >= movingMinSpeedMps;
    for (const item of this.state.queue) {
      if (item.kind !== 'interval' || item.moving !== null) continue;
      item.moving = moving;
      item.distanceM = moving && pair ? (pair.distanceM * (item.to - item.from)) / pair.ms : 0;
    }
    if (pair === null) this.state.fix = null;
  }

  /** Spreads an increment over the pending intervals of its pair by time, or settles them at 0 (null). */
  private resolveHourmeter(pair: { increment: number; ms: number } | null): void {
    for (const item of this.state.queue) {
      if (item.kind !== 'interval' || item.hourmeterShare !== null) continue;
      item.hourmeterShare = pair && pair.ms > 0 ? (pair.increment * (item.to - item.from)) / pair.ms : 0;
    }
    if (pair === null) this.state.hourmeterPairable = false;
  }

  private apply(r: Reading, tally: Tally): void {
    const s = this.state;
    tally.readings += 1;
    if (r.assetId !== s.assetId) {
      s.assetId = r.assetId;
      s.inside = {};
    }
    if (r.ignition !== undefined && r.ignition !== null) {
      if (s.ignition === true && !r.ignition) {
        s.queue.push({ kind: 'ignition_off', ts: r.ts });
        s.ignitionOffAt = r.ts;
      }
      s.ignition = r.ignition;
    }
    switch (r.type) {
      case 'gps': {
        if (!r.gpsValid || r.latitude == null || r.longitude == null) break;
        tally.gpsPoints += 1;
        if (s.fix) {
          this.resolveMoving({
            distanceM: haversineMeters(s.fix.lat, s.fix.lon, r.latitude, r.longitude),
            ms: r.ts - s.fix.ts,
          });
        }
        s.fix = { ts: r.ts, lat: r.latitude, lon: r.longitude };
        this.evaluateZones(r.ts, r.latitude, r.longitude);
        break;
      }
      case 'adcin': {
        if (r.adcOn === undefined || r.adcOn === null) break;
        if (r.adcOn && s.adcOn !== true) tally.cycles += 1;
        s.adcOn = r.adcOn;
        break;
      }
      case 'hourmeter': {
        if (r.hourmeter === undefined || r.hourmeter === null) break;
        if (s.hourmeter) {
          const increment = Math.max(0, r.hourmeter - s.hourmeter.value);
          const distributed = s.hourmeterPairable;
          if (distributed) this.resolveHourmeter({ increment, ms: r.ts - s.hourmeter.ts });
          s.queue.push({ kind: 'hourmeter', ts: r.ts, increment, distributed });
        }
        s.hourmeter = { ts: r.ts, value: r.hourmeter };
        s.hourmeterPairable = true;
        break;
      }
      case 'imu': {
        tally.imuSamples += 1;
        if (r.peakG !== undefined && r.peakG !== null && r.peakG >= this.options.imuAnomalyG) tally.imuAnomalies += 1;
        break;
      }
      case 'identifier': {
        if (!r.identifier) break;
        if (r.identifierEvent === 'logout') s.queue.push({ kind: 'logout', ts: r.ts, identifier: r.identifier });
        else s.queue.push({ kind: 'login', ts: r.ts, identifier: r.identifier });
        break;
      }
      case 'heartbeat':
        break;
    }
  }

  private evaluateZones(ts: number, latitude: number, longitude: number): void {
    const s = this.state;
    if (s.assetId === null) return;
    for (const zone of this.geofences) {
      const inside = isInsideZone(zone, latitude, longitude);
      const before = s.inside[zone.id];
      if (before === inside) continue;
      s.inside[zone.id] = inside;
      this.transitions.push({
        geofenceId: zone.id,
        assetId: s.assetId,
        ts,
        inside,
        initial: before === undefined,
        latitude,
        longitude,
      });
    }
  }

  /** Moves every resolved item at the head of the queue into the builders. */
  flush(): void {
    const queue = this.state.queue;
    let taken = 0;
    while (taken < queue.length) {
      const item = queue[taken]!;
      if (item.kind === 'interval' && !isResolved(item)) break;
      this.consume(item);
      taken += 1;
    }
    if (taken > 0) queue.splice(0, taken);
  }

  private consume(item: Item): void {
    switch (item.kind) {
      case 'interval':
        this.segmentInterval(item);
        this.usageInterval(item);
        this.identInterval(item);
        break;
      case 'tally':
        mergeTally(this.state.segment.buffered, item.tally);
        mergeTally(this.state.usage.buffered, item.tally);
        mergeTally(this.state.ident.buffered, item.tally);
        break;
      case 'hourmeter': {
        const { segment, usage, ident } = this.state;
        // An increment across a broken pair (a gap) lands where it was reported.
        if (segment.current && !item.distributed) segment.current.hourmeterDelta += item.increment;
        if (usage.open) usage.open.figures.hourmeterDelta = (usage.open.figures.hourmeterDelta ?? 0) + item.increment;
        if (ident.open) ident.open.figures.hourmeterDelta = (ident.open.figures.hourmeterDelta ?? 0) + item.increment;
        break;
      }
      case 'login':
        this.identLogin(item.ts, item.identifier);
        break;
      case 'logout': {
        const open = this.state.ident.open;
        if (open && (item.identifier === null || item.identifier === open.identifier))
          this.identClose(item.ts, 'logout');
        break;
      }
      case 'ignition_off':
        if (this.state.ident.open) this.identClose(item.ts, 'ignition_off');
        break;
    }
  }

  // Segments -------------------------------------------------------------------------

  private segmentInterval(iv: Interval): void {
    const seg = this.state.segment;
    const running = runningOf(iv);
    const moving = iv.hasData && iv.moving === true;
    const length = iv.to - iv.from;
    if (length === 0) {
      // A zero-length interval only carries the events of its moment (data ending now).
      if (isEmptyTally(seg.buffered)) return;
      this.openSegment(iv.from, iv, running, moving);
      this.takeBuffered(seg.current!);
      return;
    }
    let pieceFrom = iv.from;
    while (pieceFrom < iv.to) {
      const pieceTo = Math.min(iv.to, floorHour(pieceFrom) + HOUR_MS);
      const current = seg.current;
      const same =
        current !== null &&
        current.end === pieceFrom &&
        floorHour(current.start) === floorHour(pieceFrom) &&
        current.seconds > 0 &&
        current.assetId === iv.assetId &&
        current.hasData === iv.hasData &&
        current.running === running &&
        current.moving === moving &&
        current.loaded === (iv.hasData && iv.loaded);
      if (!same) this.openSegment(pieceFrom, iv, running, moving);
      const target = seg.current!;
      if (pieceFrom === iv.from) this.takeBuffered(target);
      target.end = pieceTo;
      target.seconds += (pieceTo - pieceFrom) / 1000;
      target.distanceM += length > 0 ? (iv.distanceM * (pieceTo - pieceFrom)) / length : 0;
      target.hourmeterDelta += length > 0 ? ((iv.hourmeterShare ?? 0) * (pieceTo - pieceFrom)) / length : 0;
      pieceFrom = pieceTo;
    }
  }

  private openSegment(at: number, iv: Interval, running: boolean, moving: boolean): void {
    const seg = this.state.segment;
    if (seg.current) this.segments.push(seg.current);
    seg.current = {
      start: at,
      end: at,
      assetId: iv.assetId,
      hasData: iv.hasData,
      running,
      moving,
      loaded: iv.hasData && iv.loaded,
      seconds: 0,
      distanceM: 0,
      hourmeterDelta: 0,
      containerCycles: 0,
      imuAnomalies: 0,
      imuSamples: 0,
      gpsPoints: 0,
    };
  }

  private takeBuffered(target: Segment): void {
    const buffered = this.state.segment.buffered;
    target.containerCycles += buffered.cycles;
    target.imuAnomalies += buffered.imuAnomalies;
    target.imuSamples += buffered.imuSamples;
    target.gpsPoints += buffered.gpsPoints;
    this.state.segment.buffered = emptyTally();
  }

  // Usage sessions -------------------------------------------------------------------

  private usageInterval(iv: Interval): void {
    const usage = this.state.usage;
    const buffered = usage.buffered;
    usage.buffered = emptyTally();
    const stopMinMs = this.options.stopMinSeconds * 1000;
    let open = usage.open;
    if (!iv.hasData) {
      if (open?.ignitionBased && iv.ignitionBased && !iv.ignition) {
        // The last message before the silence switched the ignition off.
        addTally(this.usageClose(open, iv.from, 'ignition_off'), buffered);
      } else if (open) {
        const closed = this.usageClose(open, open.ignitionBased ? iv.from : open.lastRunningEnd, 'timeout');
        if (closed.end === iv.from) addTally(closed, buffered);
      }
      return;
    }
    if (runningOf(iv)) {
      if (!open) {
        open = usage.open = {
          start: iv.from,
          assetId: iv.assetId,
          startReason: iv.ignitionBased ? 'ignition_on' : 'movement',
          ignitionBased: iv.ignitionBased,
          hourmeterEvidence: false,
          identifier: this.state.ident.open?.identifier ?? null,
          lastEnd: iv.from,
          lastRunningEnd: iv.from,
          figures: emptyFigures(),
          tracker: newTracker(),
          committed: null,
        };
      }
      open.committed = null;
      if (!iv.ignitionBased && (iv.hourmeterShare ?? 0) > 0) open.hourmeterEvidence = true;
      addTally(open.figures, buffered);
      addInterval(open.figures, iv);
      trackStops(open.tracker, open.figures, iv, stopMinMs);
      open.lastEnd = iv.to;
      open.lastRunningEnd = iv.to;
      return;
    }
    if (!open) return;
    if (iv.ignitionBased) {
      addTally(this.usageClose(open, iv.from, 'ignition_off'), buffered);
      return;
    }
    // Inferred running paused: keep the session unless the pause outlasts the merge window.
    open.committed ??= { figures: structuredClone(open.figures), tracker: { ...open.tracker }, lastEnd: open.lastEnd };
    addTally(open.figures, buffered);
    addInterval(open.figures, iv);
    trackStops(open.tracker, open.figures, iv, stopMinMs);
    open.lastEnd = iv.to;
    if (iv.to - open.lastRunningEnd >= this.options.inferredSessionMergeSeconds * 1000) {
      this.usageClose(open, open.lastRunningEnd, 'movement');
    }
  }

  private usageClose(open: OpenUsage, end: number, reason: UsageEndReason): UsageSession {
    if (open.committed) {
      open.figures = open.committed.figures;
      open.tracker = open.committed.tracker;
      open.lastEnd = open.committed.lastEnd;
      open.committed = null;
    }
    const session = this.usageRow(open, end, reason);
    this.usageSessions.push(session);
    this.state.usage.open = null;
    return session;
  }

  private usageRow(open: OpenUsage, end: number, reason: UsageEndReason | null): UsageSession {
    const confidence = open.ignitionBased ? 1 : open.hourmeterEvidence ? 0.8 : 0.6;
    return {
      ...structuredClone(open.figures),
      id: stableId(this.deviceId, 'usage', String(open.start)),
      assetId: open.assetId,
      start: open.start,
      end: Math.max(open.start, end),
      isOpen: reason === null,
      startReason: open.startReason,
      endReason: reason,
      confidence,
      identifier: open.identifier,
    };
  }

  // Identifier sessions --------------------------------------------------------------

  private identInterval(iv: Interval): void {
    const ident = this.state.ident;
    const buffered = ident.buffered;
    ident.buffered = emptyTally();
    if (ident.closing) {
      if (!ident.open) addTally(ident.closing.figures, buffered);
      this.finishClosing();
      if (ident.open) addTally(ident.open.figures, buffered);
    } else if (ident.open) {
      addTally(ident.open.figures, buffered);
    }
    const open = ident.open;
    if (!open) return;
    if (!iv.hasData && iv.silentMs > this.options.identifierTimeoutSeconds * 1000) {
      this.identClose(iv.from, 'timeout');
      this.finishClosing();
      return;
    }
    addInterval(open.figures, iv);
    trackStops(open.tracker, open.figures, iv, this.options.stopMinSeconds * 1000);
    open.lastEnd = iv.to;
  }

  private identLogin(ts: number, identifier: string): void {
    const ident = this.state.ident;
    if (ident.open?.identifier === identifier) return;
    if (ident.open) this.identClose(ts, 'identifier_change');
    ident.open = {
      identifier,
      start: ts,
      assetId: this.state.assetId,
      lastEnd: ts,
      figures: emptyFigures(),
      tracker: newTracker(),
    };
    const usage = this.state.usage.open;
    if (usage && usage.identifier === null) usage.identifier = identifier;
  }

  /** Ends the open session at ts; it stays "closing" until the events of ts are counted. */
  private identClose(ts: number, reason: IdentifierEndReason): void {
    const ident = this.state.ident;
    if (!ident.open) return;
    if (ident.closing) this.finishClosing();
    ident.closing = { ...ident.open, end: ts, endReason: reason };
    ident.open = null;
  }

  private finishClosing(): void {
    const ident = this.state.ident;
    if (!ident.closing) return;
    this.identifierSessions.push(this.identRow(ident.closing, ident.closing.end, ident.closing.endReason));
    ident.closing = null;
  }

  private identRow(open: OpenIdentifier, end: number, reason: IdentifierEndReason | null): IdentifierSession {
    return {
      ...structuredClone(open.figures),
      id: stableId(this.deviceId, 'identifier', String(open.start)),
      assetId: open.assetId,
      identifier: open.identifier,
      start: open.start,
      end: Math.max(open.start, end),
      isOpen: reason === null,
      endReason: reason,
      confidence: reason === 'timeout' ? 0.7 : 1,
    };
  }

  // End of a run ---------------------------------------------------------------------

  /**
   * Adds what is still open to the outputs, as of `now`: when the device has been
   * silent longer than the gap, the silence is applied as a gap (sessions end with
   * `timeout`); otherwise open things are reported open up to the newest placed time.
   */
  finish(now: number): void {
    const s = this.state;
    if (s.lastTs !== null && now - s.lastTs > this.gapMs) {
      this.breakChains();
      s.queue.push(this.interval(s.lastTs, s.lastTs, false, now - s.lastTs));
      this.flush();
    }
    if (s.segment.current) this.segments.push(s.segment.current);
    if (s.usage.open) {
      const open = s.usage.open;
      const view = open.committed ? { ...open, ...open.committed } : open;
      if (open.ignitionBased && s.ignition === false && s.ignitionOffAt !== null && open.lastEnd === s.ignitionOffAt) {
        // Switched off and every running interval placed: ended, as the next interval will say.
        const row = this.usageRow(view, s.ignitionOffAt, 'ignition_off');
        addTally(row, s.usage.buffered);
        this.usageSessions.push(row);
      } else {
        this.usageSessions.push(this.usageRow(view, view.lastEnd, null));
      }
    }
    if (s.ident.closing)
      this.identifierSessions.push(this.identRow(s.ident.closing, s.ident.closing.end, s.ident.closing.endReason));
    if (s.ident.open)
      this.identifierSessions.push(this.identRow(s.ident.open, Math.max(s.ident.open.lastEnd, s.lastTs ?? 0), null));
  }
}

function firstQueuedTime(carry: Carry): number | null {
  const head = carry.queue[0];
  if (!head) return null;
  return head.kind === 'interval' ? head.from : head.ts;
}

function minDefined(...values: Array<number | null | undefined>): number {
  let result = Infinity;
  for (const value of values) if (value !== null && value !== undefined && value < result) result = value;
  return result;
}

/** Where each kind of output may change when derivation resumes from this carry. */
export function replaceFromOf(carry: Carry | null): DeriveResult['replaceFrom'] {
  if (carry === null || carry.lastTs === null) {
    return { segments: -Infinity, usageSessions: -Infinity, identifierSessions: -Infinity };
  }
  const queued = firstQueuedTime(carry);
  return {
    segments: minDefined(carry.segment.current?.start, queued, carry.lastTs),
    usageSessions: minDefined(carry.usage.open?.start, queued, carry.lastTs),
    identifierSessions: minDefined(carry.ident.open?.start, carry.ident.closing?.start, queued, carry.lastTs),
  };
}

/**
 * The one derivation function: from the state before (a carry) and the device's next
 * readings in (ts, type) order, the segments, usage and identifier sessions and
 * geofence transitions they produce, plus the state to resume from. Pure: same input,
 * same output.
 */
export function derive(input: DeriveInput): DeriveResult {
  const state: Carry = input.carry ? structuredClone(input.carry) : emptyCarry();
  const replaceFrom = replaceFromOf(input.carry);
  const deriver = new Deriver(state, input.deviceId, input.options, input.geofences);
  const checkpoints: Carry[] = [];
  let carry: Carry | null = null;
  const readings = input.readings;
  let index = 0;
  while (index < readings.length) {
    const ts = readings[index]!.ts;
    let end = index + 1;
    while (end < readings.length && readings[end]!.ts === ts) end += 1;
    if (state.lastTs !== null && ts < state.lastTs)
      throw new Error(`readings out of order at ${new Date(ts).toISOString()}`);
    if (state.lastTs !== null && floorHour(ts) > state.lastTs) {
      checkpoints.push({ ...structuredClone(state), at: floorHour(ts) });
    }
    if (carry === null && ts >= input.carryAt)
      carry = { ...structuredClone(state), at: Math.max(state.at, input.carryAt) };
    deriver.consumeGroup(ts, readings.slice(index, end));
    state.at = ts + 1;
    index = end;
  }
  carry ??= structuredClone(state);

  const lastTs = state.lastTs;
  const gapMs = input.options.gapSeconds * 1000;
  const timeouts: number[] = [];
  if (lastTs !== null) {
    if (lastTs + gapMs >= input.now) timeouts.push(lastTs + gapMs + 1);
    if (state.ident.open && lastTs + input.options.identifierTimeoutSeconds * 1000 >= input.now) {
      timeouts.push(lastTs + input.options.identifierTimeoutSeconds * 1000 + 1);
    }
  }
  deriver.finish(input.now);
  return {
    replaceFrom,
    segments: deriver.segments,
    usageSessions: deriver.usageSessions,
    identifierSessions: deriver.identifierSessions,
    geofenceTransitions: deriver.transitions,
    checkpoints,
    carry,
    lastReadingTs: lastTs,
    recheckAt: timeouts.length > 0 ? Math.min(...timeouts) : null,
  };
}
