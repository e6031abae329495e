import { z } from 'zod';

export const readingTypes = ['adcin', 'gps', 'heartbeat', 'hourmeter', 'identifier', 'imu'] as const;
export type ReadingType = (typeof readingTypes)[number];

/** One silver reading as derivation needs it. Times are epoch milliseconds. */
export interface Reading {
  ts: number;
  type: ReadingType;
  assetId: string | null;
  ignition?: boolean | null;
  latitude?: number | null;
  longitude?: number | null;
  /** Computed by ingest: fix true, hdop ≤ 5 when given, not (0, 0). */
  gpsValid?: boolean | null;
  adcOn?: boolean | null;
  hourmeter?: number | null;
  peakG?: number | null;
  identifier?: string | null;
  identifierEvent?: string | null;
}

/** The derivation's definitions (docs/derivation.md); every threshold is configurable. */
export const derivationOptionsSchema = z.object({
  /** Moving between two valid fixes: average speed at least this (m/s)… */
  movingMinSpeedMps: z.number().nonnegative().default(0.5),
  /** …and at least this far apart (m, haversine): the jitter filter. */
  movingMinDistanceM: z.number().nonnegative().default(5),
  /** A longer interval without any message is no data and ends usage sessions (s). */
  gapSeconds: z.number().positive().default(600),
  /** Two fixes (or hourmeter readings) further apart than this are not paired (s). */
  maxPairSeconds: z.number().positive().default(600),
  /** A not-moving stretch at least this long inside a session is a stop (s). */
  stopMinSeconds: z.number().positive().default(120),
  /** An inferred (no ignition) session survives not-running stretches shorter than this (s). */
  inferredSessionMergeSeconds: z.number().nonnegative().default(120),
  /** IMU messages with peakG at least this count as anomalies (g). */
  imuAnomalyG: z.number().positive().default(2.5),
  /** An identifier session ends after this long without any message (s). */
  identifierTimeoutSeconds: z.number().positive().default(1800),
});
export type DerivationOptions = z.infer<typeof derivationOptionsSchema>;
export const defaultDerivationOptions: DerivationOptions = derivationOptionsSchema.parse({});

/** A zone as derivation evaluates it (enabled geofences of the device's tenant). */
export interface GeofenceZone {
  id: string;
  type: 'allowed' | 'forbidden';
  geometry: { type: 'Polygon'; coordinates: number[][][] } | { type: 'MultiPolygon'; coordinates: number[][][][] };
  /** [minLon, minLat, maxLon, maxLat] */
  bbox: number[];
}

/** A maximal run of constant (hasData, running, moving, loaded, asset) within one hour. */
export interface Segment {
  start: number;
  end: number;
  assetId: string | null;
  hasData: boolean;
  running: boolean;
  moving: boolean;
  loaded: boolean;
  seconds: number;
  distanceM: number;
  hourmeterDelta: number;
  containerCycles: number;
  imuAnomalies: number;
  imuSamples: number;
  gpsPoints: number;
}

export type UsageStartReason = 'ignition_on' | 'movement';
export type UsageEndReason = 'ignition_off' | 'movement' | 'timeout';

/** Figures shared by usage and identifier sessions. */
export interface SessionFigures {
  distanceM: number;
  movingSeconds: number;
  stationaryRunningSeconds: number;
  runningSeconds: number;
  stopCount: number;
  tripCount: number;
  containerCycleCount: number;
  loadedSeconds: number;
  emptySeconds: number;
  loadedDistanceM: number;
  emptyDistanceM: number;
  imuAnomalyCount: number;
  imuSampleCount: number;
  /** Sum of positive hourmeter increments; null when no hourmeter reading fell inside. */
  hourmeterDelta: number | null;
  eventCount: number;
  gpsPointCount: number;
}

export interface UsageSession extends SessionFigures {
  id: string;
  assetId: string | null;
  start: number;
  end: number;
  isOpen: boolean;
  startReason: UsageStartReason;
  endReason: UsageEndReason | null;
  confidence: number;
  identifier: string | null;
}

export type IdentifierEndReason = 'logout' | 'identifier_change' | 'ignition_off' | 'timeout';

export interface IdentifierSession extends SessionFigures {
  id: string;
  assetId: string | null;
  identifier: string;
  start: number;
  end: number;
  isOpen: boolean;
  endReason: IdentifierEndReason | null;
  confidence: number;
}

/**
 * A change of an asset's inside/outside state for a zone, at a valid fix. `initial`
 * marks the first evaluation of a zone for the asset (no earlier state known).
 */
export interface GeofenceTransition {
  geofenceId: string;
  assetId: string;
  ts: number;
  inside: boolean;
  initial: boolean;
  latitude: number;
  longitude: number;
}
