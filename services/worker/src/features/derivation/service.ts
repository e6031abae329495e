import type { Config } from '@gantry/config';
import { inTransaction, storageModeOf, type Outbox, type Pool, type StorageMode } from '@gantry/db';
import type { Logger } from '@gantry/logger';
import {
  derive,
  derivationOptionsSchema,
  type Carry,
  type DerivationOptions,
  type DeriveResult,
  type Reading,
} from '@gantry/telemetry-core';
import { applyGeofenceTransitions, type DeviceTransitions } from '../geofences/alerts.ts';
import { applyUtilizationDeltas } from '../gold/deltas.ts';
import { loadEnabledZones, type TenantZone } from '../geofences/repository.ts';
import type { PoolClient } from '@gantry/db';
import { derivationMetrics } from './metrics.ts';
import {
  claimDirtyDevices,
  deleteReplacedSegments,
  insertSegments,
  loadCheckpoints,
  loadDerivationStates,
  loadReadings,
  recordInvalidations,
  releaseClaims,
  saveDerivationState,
  settleClaims,
  type ClaimedDevice,
  type DeviceOutput,
  type Invalidation,
  writeIdentifierSessions,
  writeUsageSessions,
} from './repository.ts';

export interface DerivationDeps {
  pool: Pool;
  outbox: Outbox;
  logger: Logger;
  config: Pick<Config, 'derivation' | 'worker'>;
}

export function derivationOptions(config: Pick<Config, 'derivation'>): DerivationOptions {
  const d = config.derivation;
  return derivationOptionsSchema.parse({
    movingMinSpeedMps: d.movingMinSpeedMps,
    movingMinDistanceM: d.movingMinDistanceM,
    gapSeconds: d.gapSeconds,
    maxPairSeconds: d.gapSeconds,
    stopMinSeconds: d.stopMinSeconds,
    inferredSessionMergeSeconds: d.stopMinSeconds,
    imuAnomalyG: d.imuAnomalyG,
    identifierTimeoutSeconds: d.identifierTimeoutSeconds,
  });
}

const MINUTE = 60_000;
const floorTo = (ms: number, width: number) => Math.floor(ms / width) * width;

export interface DerivationRun {
  devices: number;
  readings: number;
  /** Largest (now − newest derived reading) over the run's devices, seconds. */
  lagSeconds: number | null;
}

type Path = 'carry' | 'checkpoint' | 'scratch';

/**
 * One derivation step: claims up to a batch of dirty devices, derives each from its
 * carry (new data), its newest checkpoint before the earliest new reading (late data)
 * or from scratch, and in the same transaction replaces what each produced before,
 * stores the new carry and checkpoints, brings utilization gold along by differences,
 * logs the minutes of positions gold that changed (TimescaleDB mode) and applies
 * geofence transitions. Returns how much it did (0: nothing was dirty).
 */
export async function deriveDirtyDevices(deps: DerivationDeps, now: () => number = Date.now): Promise<DerivationRun> {
  const started = performance.now();
  const options = derivationOptions(deps.config);
  const mode = await storageModeOf(deps.pool);
  const client = await deps.pool.connect();
  let claimed: ClaimedDevice[] = [];
  let claiming = true;
  let broken: Error | undefined;
  let run: DerivationRun;
  try {
    claimed = await claimDirtyDevices(client, deps.config.worker.deviceBatch);
    claiming = false;
    if (claimed.length === 0) return { devices: 0, readings: 0, lagSeconds: null };
    run = await inTransaction(client, (transaction) => deriveClaimed(deps, transaction, claimed, options, mode, now));
  } finally {
    // The claims end with the session's advisory locks. A client that cannot give them
    // back — or whose claim failed half-way — is closed rather than pooled with them.
    if (claiming) broken = new Error('the claim of dirty devices failed');
    else if (claimed.length > 0) await releaseClaims(client).catch((error: Error) => (broken = error));
    client.release(broken);
  }
  if (run.devices > 0) {
    derivationMetrics.readings.inc(run.readings);
    derivationMetrics.runSeconds.observe((performance.now() - started) / 1000);
    if (run.lagSeconds !== null) derivationMetrics.newestLagSeconds.set(run.lagSeconds);
  }
  return run;
}

/** Derives the claimed devices in the caller's transaction and settles their queue rows. */
async function deriveClaimed(
  deps: DerivationDeps,
  client: PoolClient,
  claimed: ClaimedDevice[],
  options: DerivationOptions,
  mode: StorageMode,
  now: () => number,
): Promise<DerivationRun> {
  const ids = claimed.map((device) => device.deviceId);
  const states = await loadDerivationStates(client, ids);

  const starts = new Map<string, { carry: Carry | null; path: Path }>();
  const late: Array<{ deviceId: string; before: number }> = [];
  for (const device of claimed) {
    const carry = states.get(device.deviceId)?.carry ?? null;
    if (carry && device.dirtyFrom >= carry.at) starts.set(device.deviceId, { carry, path: 'carry' });
    else late.push({ deviceId: device.deviceId, before: device.dirtyFrom });
  }
  const checkpoints = await loadCheckpoints(
    client,
    late.filter((entry) => Number.isFinite(entry.before)),
  );
  for (const { deviceId } of late) {
    const checkpoint = checkpoints.get(deviceId) ?? null;
    starts.set(deviceId, { carry: checkpoint, path: checkpoint ? 'checkpoint' : 'scratch' });
  }

  const perDevice = Math.max(1000, Math.floor(deps.config.derivation.maxReadings / claimed.length));
  const readings = await loadReadings(
    client,
    claimed.map((device) => ({ deviceId: device.deviceId, from: starts.get(device.deviceId)!.carry?.at ?? -Infinity })),
    perDevice,
  );
  const { zones, invalid } = await loadEnabledZones(client, [...new Set(claimed.map((device) => device.tenantId))]);
  if (invalid.length > 0)
    deps.logger.warn({ geofences: invalid }, 'geofences with invalid stored geometry are not evaluated');
  const zonesById = new Map<string, TenantZone>(zones.map((zone) => [zone.id, zone]));

  const at = now();
  const outputs: DeviceOutput[] = [];
  const transitions: DeviceTransitions[] = [];
  const invalidations: Invalidation[] = [];
  const failed: string[] = [];
  let readingCount = 0;
  let lagSeconds: number | null = null;
  for (const device of claimed) {
    const start = starts.get(device.deviceId)!;
    const { readings: list, more } = readings.get(device.deviceId)!;
    readingCount += list.length;
    let result: DeriveResult;
    try {
      result = derive({
        deviceId: device.deviceId,
        carry: start.carry,
        readings: list,
        geofences: zones.filter((zone) => zone.tenantId === device.tenantId),
        now: at,
        carryAt: carryPoint(list, deps.config.derivation.carryLagSeconds * 1000),
        options,
      });
    } catch (error) {
      deps.logger.error({ err: error, deviceId: device.deviceId }, 'derivation failed for a device; it stays queued');
      derivationMetrics.failures.inc();
      failed.push(device.deviceId);
      continue;
    }
    derivationMetrics.devices.inc({ path: start.path });
    outputs.push({
      deviceId: device.deviceId,
      tenantId: device.tenantId,
      replaceFrom: result.replaceFrom,
      segments: result.segments,
      usageSessions: result.usageSessions,
      identifierSessions: result.identifierSessions,
      checkpointsFrom: start.carry?.at ?? -Infinity,
      checkpoints: result.checkpoints,
      carry: result.carry,
      derivedUntil: result.lastReadingTs,
      recheckAt: result.recheckAt,
      continueFrom: more ? result.carry.at : null,
    });
    if (result.geofenceTransitions.length > 0) {
      transitions.push({
        tenantId: device.tenantId,
        deviceId: device.deviceId,
        transitions: result.geofenceTransitions,
        lastReadingTs: result.lastReadingTs,
      });
    }
    // PostgreSQL mode: ingest keeps positions gold as it stores the fixes (and logs a replay's minutes itself).
    if (mode === 'timescaledb') invalidations.push(...readingInvalidations(device, list));
    if (result.lastReadingTs !== null && list.length > 0) {
      const lag = (at - result.lastReadingTs) / 1000;
      derivationMetrics.lagSeconds.observe(Math.max(0, lag));
      lagSeconds = Math.max(lagSeconds ?? 0, lag);
    }
  }

  if (outputs.length > 0) {
    const removed = await deleteReplacedSegments(client, outputs);
    const written = await insertSegments(client, outputs);
    await writeUsageSessions(client, outputs);
    await writeIdentifierSessions(client, outputs);
    await saveDerivationState(client, outputs);
    await recordInvalidations(client, invalidations);
    const alerts = await applyGeofenceTransitions(client, deps.outbox, zonesById, transitions, {
      now: at,
      maxAgeMs: deps.config.derivation.geofenceAlertMaxAgeSeconds * 1000,
    });
    if (alerts.opened > 0) derivationMetrics.alerts.inc({ change: 'opened' }, alerts.opened);
    if (alerts.resolved > 0) derivationMetrics.alerts.inc({ change: 'resolved' }, alerts.resolved);
    // Last before the queue rows: the gold rows it locks are held only until the commit.
    await applyUtilizationDeltas(client, [...removed, ...written]);
  }
  if (failed.length > 0) {
    // To the back of the queue, so one bad device does not hold up the others.
    await client.query(
      `/* worker:requeueFailed */ UPDATE derivation_queue SET marked_at = now() WHERE device_id = ANY ($1::uuid[])`,
      [failed],
    );
  }
  await settleClaims(client, outputs);
  return { devices: outputs.length, readings: readingCount, lagSeconds };
}

/** Readings a run re-reads at most: a chatty device's lag window would otherwise be large. */
const MAX_REREAD = 64;

/**
 * Where the stored carry stands: the lag window before the newest reading, but never
 * more than MAX_REREAD readings back, so each run re-reads little whatever the rate.
 */
function carryPoint(readings: Reading[], lagMs: number): number {
  const last = readings[readings.length - 1];
  if (!last) return Infinity;
  const byCount = readings[Math.max(0, readings.length - MAX_REREAD)]!.ts;
  return Math.max(last.ts - lagMs, byCount);
}

/** Minutes of positions_1min touched by the device's new valid fixes (TimescaleDB mode; traffic counts are kept by ingest). */
function readingInvalidations(device: ClaimedDevice, readings: Reading[]): Invalidation[] {
  if (device.dirtyFrom === Infinity) return [];
  const positions = new Map<string, { first: number; last: number }>();
  for (const reading of readings) {
    if (reading.ts < device.dirtyFrom) continue;
    if (reading.type === 'gps' && reading.gpsValid && reading.assetId) {
      const range = positions.get(reading.assetId) ?? { first: reading.ts, last: reading.ts };
      range.first = Math.min(range.first, reading.ts);
      range.last = Math.max(range.last, reading.ts);
      positions.set(reading.assetId, range);
    }
  }
  const result: Invalidation[] = [];
  for (const [assetId, range] of positions) {
    result.push({
      relation: 'positions_1min',
      tenantId: device.tenantId,
      subjectId: assetId,
      bucketStart: floorTo(range.first, MINUTE),
      bucketEnd: floorTo(range.last, MINUTE) + MINUTE,
    });
  }
  return result;
}
