import type { PoolClient, Queryable } from '@gantry/db';
import {
  isCarry,
  readingTypes,
  type Carry,
  type IdentifierSession,
  type Reading,
  type ReadingType,
  type Segment,
  type UsageSession,
} from '@gantry/telemetry-core';
import {
  contributionsSelect,
  toContributions,
  type ContributionRow,
  type UtilizationContribution,
} from '../gold/deltas.ts';

export interface ClaimedDevice {
  deviceId: string;
  tenantId: string;
  /** Earliest reading not yet derived (infinity: only a timeout fell due). */
  dirtyFrom: number;
}

/** The first key of the two-key session advisory locks that claim devices for derivation. */
const CLAIM_LOCK_SPACE = 0x6744; // "gD"

/**
 * Claims up to `limit` dirty devices, oldest mark first, for the session of `client`:
 * a session advisory lock per device (held across the derivation transaction and given
 * back by releaseClaims after it), so each device is derived by one worker at a time and
 * in order — while the queue rows themselves stay unlocked and ingest can keep marking
 * them. The claim resets new_from, which then collects the marks that arrive meanwhile.
 * Runs outside a transaction (its row locks last one statement).
 */
export async function claimDirtyDevices(client: PoolClient, limit: number): Promise<ClaimedDevice[]> {
  const { rows } = await client.query<{ device_id: string; tenant_id: string; dirty_from: Date | number }>(
    `/* worker:claimDirtyDevices */
     WITH candidates AS MATERIALIZED (
       SELECT device_id FROM derivation_queue ORDER BY marked_at LIMIT $2
     ), claimed AS MATERIALIZED (
       SELECT device_id FROM candidates WHERE pg_try_advisory_lock($1::int, hashtext(device_id::text)) LIMIT $3
     ), locked AS MATERIALIZED (
       -- Row locks in device order, as ingest's markDirty takes them: no deadlock between the two.
       SELECT q.device_id FROM derivation_queue q WHERE q.device_id IN (SELECT device_id FROM claimed) ORDER BY q.device_id FOR UPDATE
     )
     UPDATE derivation_queue q SET new_from = 'infinity'
       FROM locked WHERE q.device_id = locked.device_id
     RETURNING q.device_id, q.tenant_id, q.dirty_from`,
    [CLAIM_LOCK_SPACE, limit * 4, limit],
  );
  return rows.map((row) => ({
    deviceId: row.device_id,
    tenantId: row.tenant_id,
    // pg gives ±infinity as a number, finite times as Date.
    dirtyFrom: row.dirty_from instanceof Date ? row.dirty_from.getTime() : row.dirty_from,
  }));
}

export interface StoredState {
  carry: Carry | null;
  derivedUntil: number | null;
}

export async function loadDerivationStates(db: Queryable, deviceIds: string[]): Promise<Map<string, StoredState>> {
  const { rows } = await db.query<{ device_id: string; carry: unknown; derived_until: Date | null }>(
    `/* worker:loadDerivationStates */
     SELECT device_id, carry, derived_until FROM derivation_state WHERE device_id = ANY ($1::uuid[])`,
    [deviceIds],
  );
  return new Map(
    rows.map((row) => [
      row.device_id,
      { carry: isCarry(row.carry) ? row.carry : null, derivedUntil: row.derived_until?.getTime() ?? null },
    ]),
  );
}

/** The newest checkpoint at or before each device's late reading (null: derive from scratch). */
export async function loadCheckpoints(
  db: Queryable,
  wanted: Array<{ deviceId: string; before: number }>,
): Promise<Map<string, Carry>> {
  if (wanted.length === 0) return new Map();
  const { rows } = await db.query<{ device_id: string; carry: unknown }>(
    `/* worker:loadCheckpoints */
     SELECT w.device_id, c.carry
       FROM unnest($1::uuid[], $2::timestamptz[]) AS w(device_id, before)
       CROSS JOIN LATERAL (
         SELECT carry FROM derivation_checkpoints c
          WHERE c.device_id = w.device_id AND c.at <= w.before
          ORDER BY c.at DESC LIMIT 1
       ) c`,
    [wanted.map((w) => w.deviceId), wanted.map((w) => toTimestamp(w.before))],
  );
  const result = new Map<string, Carry>();
  for (const row of rows) if (isCarry(row.carry)) result.set(row.device_id, row.carry);
  return result;
}

/** One device's readings as columns (JSON arrays): far cheaper to transfer and parse than rows. */
interface ReadingColumns {
  ts: number[];
  type: string[];
  asset: Array<string | null>;
  ignition: Array<boolean | null>;
  lat: Array<number | null>;
  lon: Array<number | null>;
  valid: Array<boolean | null>;
  adc: Array<boolean | null>;
  hourmeter: Array<number | null>;
  peak: Array<number | null>;
  identifier: Array<string | null>;
  event: Array<string | null>;
}

function toReadings(columns: ReadingColumns): Reading[] {
  const readings: Reading[] = [];
  for (let i = 0; i < columns.ts.length; i += 1) {
    const type = columns.type[i]!;
    if (!(readingTypes as readonly string[]).includes(type)) continue;
    readings.push({
      ts: columns.ts[i]!,
      type: type as ReadingType,
      assetId: columns.asset[i] ?? null,
      ignition: columns.ignition[i] ?? null,
      latitude: columns.lat[i] ?? null,
      longitude: columns.lon[i] ?? null,
      gpsValid: columns.valid[i] ?? null,
      adcOn: columns.adc[i] ?? null,
      hourmeter: columns.hourmeter[i] ?? null,
      peakG: columns.peak[i] ?? null,
      identifier: columns.identifier[i] ?? null,
      identifierEvent: columns.event[i] ?? null,
    });
  }
  return readings;
}

export interface DeviceReadings {
  readings: Reading[];
  /** More readings follow the last one returned (the limit cut them). */
  more: boolean;
}

/**
 * Each device's readings from its start time on, in (ts, type) order, at most `limit`
 * per device; a cut never splits one timestamp's readings.
 */
export async function loadReadings(
  db: Queryable,
  wanted: Array<{ deviceId: string; from: number }>,
  limit: number,
): Promise<Map<string, DeviceReadings>> {
  const result = new Map<string, DeviceReadings>(wanted.map((w) => [w.deviceId, { readings: [], more: false }]));
  if (wanted.length === 0) return result;
  const { rows } = await db.query<{ device_id: string; columns: string | null }>(
    `/* worker:loadReadings */
     SELECT w.device_id,
            (SELECT json_build_object(
                      'ts', json_agg(floor(extract(epoch FROM r.ts) * 1000)::float8), 'type', json_agg(r.type),
                      'asset', json_agg(r.asset_id), 'ignition', json_agg(r.ignition), 'lat', json_agg(r.latitude),
                      'lon', json_agg(r.longitude), 'valid', json_agg(r.gps_valid), 'adc', json_agg(r.adc_on),
                      'hourmeter', json_agg(r.hourmeter), 'peak', json_agg(r.peak_g), 'identifier', json_agg(r.identifier),
                      'event', json_agg(r.identifier_event))::text
               FROM (SELECT ts, type, asset_id, ignition, latitude, longitude, gps_valid, adc_on, hourmeter, peak_g, identifier, identifier_event
                       FROM telemetry_readings r
                      WHERE r.device_id = w.device_id AND r.ts >= w.from_ts AND r.ts >= $4::timestamptz
                      ORDER BY r.ts, r.type
                      LIMIT $3) r) AS columns
       FROM unnest($1::uuid[], $2::timestamptz[]) AS w(device_id, from_ts)`,
    [
      wanted.map((w) => w.deviceId),
      wanted.map((w) => toTimestamp(w.from)),
      limit,
      toTimestamp(Math.min(...wanted.map((w) => w.from))),
    ],
  );
  for (const row of rows) {
    if (row.columns === null) continue;
    const columns = JSON.parse(row.columns) as ReadingColumns;
    if (columns.ts === null) continue;
    const entry = result.get(row.device_id)!;
    entry.readings = toReadings(columns);
    if (columns.ts.length < limit || entry.readings.length === 0) continue;
    entry.more = true;
    const lastTs = entry.readings[entry.readings.length - 1]!.ts;
    const whole = entry.readings.filter((reading) => reading.ts < lastTs);
    // One timestamp with more readings than the limit is taken whole rather than never.
    if (whole.length > 0) entry.readings = whole;
  }
  return result;
}

export function toTimestamp(ms: number): string {
  if (ms === -Infinity) return '-infinity';
  if (ms === Infinity) return 'infinity';
  return new Date(ms).toISOString();
}

export interface DeviceOutput {
  deviceId: string;
  tenantId: string;
  replaceFrom: { segments: number; usageSessions: number; identifierSessions: number };
  segments: Segment[];
  usageSessions: UsageSession[];
  identifierSessions: IdentifierSession[];
  /** Checkpoints after this time are stale and replaced. */
  checkpointsFrom: number;
  checkpoints: Carry[];
  carry: Carry;
  derivedUntil: number | null;
  recheckAt: number | null;
  /** The queue row stays, from this time, when more readings wait; otherwise it goes. */
  continueFrom: number | null;
}

/**
 * A DELETE of the rows of `table` of the output devices from each one's replace point on
 * (parameters $1–$3: replacePoints) that meet `condition`, which may use a further value
 * per device (`perDevice`: its column name in `d` and its array parameter). The plain
 * `device_id = ANY` and the earliest start let the planner use the (device_id, start_ts)
 * index and skip old TimescaleDB chunks.
 */
function deleteFromReplacePoints(
  table: string,
  condition: string,
  perDevice?: { column: string; array: string },
): string {
  const arrays = ['$1::uuid[]', '$2::timestamptz[]', ...(perDevice ? [perDevice.array] : [])];
  const columns = ['device_id', 'from_ts', ...(perDevice ? [perDevice.column] : [])];
  return `DELETE FROM ${table} s USING unnest(${arrays.join(', ')}) AS d(${columns.join(', ')})
           WHERE s.device_id = ANY ($1::uuid[]) AND s.start_ts >= $3::timestamptz
             AND s.device_id = d.device_id AND s.start_ts >= d.from_ts AND ${condition}`;
}

function replacePoints(outputs: DeviceOutput[], kind: keyof DeviceOutput['replaceFrom']): unknown[] {
  const froms = outputs.map((o) => o.replaceFrom[kind]);
  return [outputs.map((o) => o.deviceId), froms.map(toTimestamp), toTimestamp(Math.min(...froms))];
}

/**
 * Deletes the segments each device stored from its replace point on, except the one
 * starting where its new segments start; returns their utilization contributions (per
 * asset and hour). That segment — the open one, on nearly every run — stays, and
 * insertSegments overwrites it in place: none of the columns that change is indexed, so
 * with the room migration 0170 leaves on each page the update is HOT (no index entries),
 * where deleting and re-inserting it added an entry to each of the table's three indexes
 * per run. Only that one start is spared (a per-device value, a cheap filter on the rows
 * the index scan finds): sparing every start a run produces again, through a set of
 * (device, start) pairs, let the planner rescan that set for each row under a nested
 * loop and tripled the statement's time in the soak.
 */
export async function deleteReplacedSegments(
  client: PoolClient,
  outputs: DeviceOutput[],
): Promise<UtilizationContribution[]> {
  const removed = await client.query<ContributionRow>(
    `/* worker:deleteSegments */
     WITH gone AS (${deleteFromReplacePoints('telemetry_segments', 's.start_ts IS DISTINCT FROM d.first_start', {
       column: 'first_start',
       array: '$4::timestamptz[]',
     })} RETURNING s.*)
     ${contributionsSelect('gone')}`,
    [
      ...replacePoints(outputs, 'segments'),
      outputs.map((o) => (o.segments.length > 0 ? toTimestamp(Math.min(...o.segments.map((g) => g.start))) : null)),
    ],
  );
  return toContributions(removed.rows, -1);
}

function columns<T>(rows: T[], pick: Array<(row: T) => unknown>): unknown[][] {
  return pick.map((fn) => rows.map(fn));
}

/**
 * Writes the devices' new segments; returns their utilization contributions, and those
 * of the rows they overwrote (taken away), for gold kept by differences.
 */
export async function insertSegments(client: PoolClient, outputs: DeviceOutput[]): Promise<UtilizationContribution[]> {
  const rows = outputs.flatMap((o) => {
    // One row per start: a later row for the same start replaces an earlier one.
    const byStart = new Map<number, Segment>();
    for (const segment of o.segments) byStart.set(segment.start, segment);
    return [...byStart.values()].map((segment) => ({ o, segment }));
  });
  if (rows.length === 0) return [];
  const input = `SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::timestamptz[], $5::timestamptz[], $6::bool[], $7::bool[],
       $8::bool[], $9::bool[], $10::float8[], $11::float8[], $12::float8[], $13::int[], $14::int[], $15::int[], $16::int[])
       AS i(tenant_id, device_id, asset_id, start_ts, end_ts, has_data, running, moving, loaded, seconds, distance_m,
            hourmeter_delta, container_cycles, imu_anomalies, imu_samples, gps_points)`;
  const upsert = `INSERT INTO telemetry_segments (tenant_id, device_id, asset_id, start_ts, end_ts, has_data,
       running, moving, loaded, seconds, distance_m, hourmeter_delta, container_cycles, imu_anomalies, imu_samples, gps_points)
     SELECT * FROM input
     ON CONFLICT (device_id, start_ts) DO UPDATE SET
       tenant_id = EXCLUDED.tenant_id, asset_id = EXCLUDED.asset_id, end_ts = EXCLUDED.end_ts, has_data = EXCLUDED.has_data,
       running = EXCLUDED.running, moving = EXCLUDED.moving, loaded = EXCLUDED.loaded, seconds = EXCLUDED.seconds,
       distance_m = EXCLUDED.distance_m, hourmeter_delta = EXCLUDED.hourmeter_delta, container_cycles = EXCLUDED.container_cycles,
       imu_anomalies = EXCLUDED.imu_anomalies, imu_samples = EXCLUDED.imu_samples, gps_points = EXCLUDED.gps_points`;
  // deleteReplacedSegments left the stored rows whose start comes again (the open
  // segment, on nearly every run), so the upsert overwrites them: their contributions are
  // taken away (`replaced`, one index probe per segment, all sub-statements seeing the
  // table as before the statement) and the new rows' added. Every row written returns
  // (no "only if changed" condition), so each replaced row has its written one.
  const text = `/* worker:insertSegments */
       WITH input AS (${input}),
       replaced AS (
         SELECT s.* FROM input i
          CROSS JOIN LATERAL (SELECT * FROM telemetry_segments s WHERE s.device_id = i.device_id AND s.start_ts = i.start_ts) s
       ),
       written AS (${upsert} RETURNING *)
       SELECT 1 AS sign, * FROM (${contributionsSelect('written')}) w
       UNION ALL
       SELECT -1 AS sign, * FROM (${contributionsSelect('replaced')}) r`;
  const { rows: changes } = await client.query<ContributionRow>(
    text,
    columns(rows, [
      (r) => r.o.tenantId,
      (r) => r.o.deviceId,
      (r) => r.segment.assetId,
      (r) => toTimestamp(r.segment.start),
      (r) => toTimestamp(r.segment.end),
      (r) => r.segment.hasData,
      (r) => r.segment.running,
      (r) => r.segment.moving,
      (r) => r.segment.loaded,
      (r) => r.segment.seconds,
      (r) => r.segment.distanceM,
      (r) => r.segment.hourmeterDelta,
      (r) => r.segment.containerCycles,
      (r) => r.segment.imuAnomalies,
      (r) => r.segment.imuSamples,
      (r) => r.segment.gpsPoints,
    ]),
  );
  return toContributions(changes);
}

const whole = (seconds: number) => Math.round(seconds);

/** A session table's column as the worker writes it: name, array element type, value. */
type SessionColumn<S> = readonly [name: string, type: string, value: (o: DeviceOutput, s: S) => unknown];

/** The columns both session tables have (the INSERT names its columns: order is free). */
const sharedSessionColumns: Array<SessionColumn<UsageSession | IdentifierSession>> = [
  ['id', 'uuid', (_o, s) => s.id],
  ['tenant_id', 'uuid', (o) => o.tenantId],
  ['device_id', 'uuid', (o) => o.deviceId],
  ['asset_id', 'uuid', (_o, s) => s.assetId],
  ['start_ts', 'timestamptz', (_o, s) => toTimestamp(s.start)],
  ['end_ts', 'timestamptz', (_o, s) => toTimestamp(s.end)],
  ['is_open', 'bool', (_o, s) => s.isOpen],
  ['end_reason', 'text', (_o, s) => s.endReason],
  ['confidence', 'float8', (_o, s) => s.confidence],
  ['distance_m', 'float8', (_o, s) => s.distanceM],
  ['duration_seconds', 'int', (_o, s) => whole((s.end - s.start) / 1000)],
  ['stop_count', 'int', (_o, s) => s.stopCount],
  ['trip_count', 'int', (_o, s) => s.tripCount],
  ['container_cycle_count', 'int', (_o, s) => s.containerCycleCount],
  ['loaded_seconds', 'int', (_o, s) => whole(s.loadedSeconds)],
  ['empty_seconds', 'int', (_o, s) => whole(s.emptySeconds)],
  ['loaded_distance_m', 'float8', (_o, s) => s.loadedDistanceM],
  ['empty_distance_m', 'float8', (_o, s) => s.emptyDistanceM],
];

const usageSessionColumns: Array<SessionColumn<UsageSession>> = [
  ...sharedSessionColumns,
  ['start_reason', 'text', (_o, s) => s.startReason],
  ['identifier', 'text', (_o, s) => s.identifier],
  ['moving_seconds', 'int', (_o, s) => whole(s.movingSeconds)],
  ['stationary_running_seconds', 'int', (_o, s) => whole(s.stationaryRunningSeconds)],
  ['imu_anomaly_count', 'int', (_o, s) => s.imuAnomalyCount],
  ['imu_sample_count', 'int', (_o, s) => s.imuSampleCount],
  ['hourmeter_delta', 'int8', (_o, s) => s.hourmeterDelta],
];

const identifierSessionColumns: Array<SessionColumn<IdentifierSession>> = [
  ...sharedSessionColumns,
  ['identifier', 'text', (_o, s) => s.identifier],
  ['event_count', 'int', (_o, s) => s.eventCount],
  ['gps_point_count', 'int', (_o, s) => s.gpsPointCount],
];

/**
 * The statement that brings a session table in line with the devices' derived sessions
 * from each one's replace point on: a stored session whose id is no longer derived is
 * deleted; the others are upserted by id, and a row is updated only when a value
 * changed. Ids are deterministic (device, kind, start), so a session that goes on — the
 * open one, on nearly every run — keeps its row and is updated in place; its indexed
 * columns (tenant, device, asset, start, identifier) stay the same, so with the free
 * space the tables keep on each page (fillfactor, migration 0320) the update is HOT and
 * adds no index entries. (Deleting and re-inserting it added an entry to each index per
 * run: under a soak the newest end of the session indexes filled with dead entries.)
 * The two parts touch different rows (ids not derived / derived), so one statement
 * holds both.
 */
function writeSessionsSql<S>(table: string, tag: string, sessionColumns: Array<SessionColumn<S>>): string {
  const names = sessionColumns.map(([name]) => name);
  const arrays = sessionColumns.map(([, type], index) => `$${index + 4}::${type}[]`);
  return `/* worker:${tag} */
     WITH input AS (SELECT * FROM unnest(${arrays.join(', ')}) AS i(${names.join(', ')})),
     stale AS (${deleteFromReplacePoints(table, 'NOT EXISTS (SELECT FROM input i WHERE i.id = s.id)')})
     INSERT INTO ${table} AS s (${names.join(', ')})
     SELECT * FROM input
     ON CONFLICT (id) DO UPDATE SET ${names
       .filter((name) => name !== 'id')
       .map((name) => `${name} = EXCLUDED.${name}`)
       .join(', ')}
     WHERE (s.*) IS DISTINCT FROM (EXCLUDED.*)`;
}

const writeUsageSessionsSql = writeSessionsSql('usage_sessions', 'writeUsageSessions', usageSessionColumns);
const writeIdentifierSessionsSql = writeSessionsSql(
  'identifier_sessions',
  'writeIdentifierSessions',
  identifierSessionColumns,
);

function sessionValues<S>(
  outputs: DeviceOutput[],
  kind: 'usageSessions' | 'identifierSessions',
  sessionColumns: Array<SessionColumn<S>>,
  sessionsOf: (o: DeviceOutput) => S[],
): unknown[] {
  const rows = outputs.flatMap((o) => sessionsOf(o).map((s) => ({ o, s })));
  return [...replacePoints(outputs, kind), ...sessionColumns.map(([, , value]) => rows.map((r) => value(r.o, r.s)))];
}

/** Writes the devices' usage sessions from each one's replace point on (writeSessionsSql). */
export async function writeUsageSessions(client: PoolClient, outputs: DeviceOutput[]): Promise<void> {
  await client.query(
    writeUsageSessionsSql,
    sessionValues(outputs, 'usageSessions', usageSessionColumns, (o) => o.usageSessions),
  );
}

/** Writes the devices' identifier sessions from each one's replace point on (writeSessionsSql). */
export async function writeIdentifierSessions(client: PoolClient, outputs: DeviceOutput[]): Promise<void> {
  await client.query(
    writeIdentifierSessionsSql,
    sessionValues(outputs, 'identifierSessions', identifierSessionColumns, (o) => o.identifierSessions),
  );
}

/** Replaces checkpoints after each device's restart point and stores the new carry. */
export async function saveDerivationState(client: PoolClient, outputs: DeviceOutput[]): Promise<void> {
  await client.query(
    `/* worker:deleteStaleCheckpoints */
     DELETE FROM derivation_checkpoints c USING unnest($1::uuid[], $2::timestamptz[]) AS d(device_id, after)
      WHERE c.device_id = ANY ($1::uuid[]) AND c.at > $3::timestamptz AND c.device_id = d.device_id AND c.at > d.after`,
    [
      outputs.map((o) => o.deviceId),
      outputs.map((o) => toTimestamp(o.checkpointsFrom)),
      toTimestamp(Math.min(...outputs.map((o) => o.checkpointsFrom))),
    ],
  );
  const checkpoints = outputs.flatMap((o) => o.checkpoints.map((carry) => ({ deviceId: o.deviceId, carry })));
  if (checkpoints.length > 0) {
    await client.query(
      `/* worker:insertCheckpoints */
       INSERT INTO derivation_checkpoints (device_id, at, carry)
       SELECT * FROM unnest($1::uuid[], $2::timestamptz[], $3::jsonb[])
       ON CONFLICT (device_id, at) DO UPDATE SET carry = EXCLUDED.carry`,
      [
        checkpoints.map((c) => c.deviceId),
        checkpoints.map((c) => toTimestamp(c.carry.at)),
        checkpoints.map((c) => JSON.stringify(c.carry)),
      ],
    );
  }
  await client.query(
    `/* worker:saveDerivationState */
     INSERT INTO derivation_state AS s (device_id, tenant_id, derived_until, carry, recheck_at, updated_at)
     SELECT d.device_id, d.tenant_id, d.derived_until, d.carry, d.recheck_at, now()
       FROM unnest($1::uuid[], $2::uuid[], $3::timestamptz[], $4::jsonb[], $5::timestamptz[])
            AS d(device_id, tenant_id, derived_until, carry, recheck_at)
     ON CONFLICT (device_id) DO UPDATE SET
       derived_until = coalesce(EXCLUDED.derived_until, s.derived_until), carry = EXCLUDED.carry,
       recheck_at = EXCLUDED.recheck_at, updated_at = now()`,
    [
      outputs.map((o) => o.deviceId),
      outputs.map((o) => o.tenantId),
      outputs.map((o) => (o.derivedUntil === null ? null : toTimestamp(o.derivedUntil))),
      outputs.map((o) => JSON.stringify(o.carry)),
      outputs.map((o) => (o.recheckAt === null ? null : toTimestamp(o.recheckAt))),
    ],
  );
}

/**
 * The queue after a derivation, as the last statements of its transaction (their row
 * locks are held until the commit, so ingest waits at most that long): a device derived
 * to its end leaves the queue unless marked since the claim — then what was marked meanwhile
 * (new_from) is its next dirty_from; a device with more readings waiting stays from where
 * this run stopped.
 */
export async function settleClaims(client: PoolClient, outputs: DeviceOutput[]): Promise<void> {
  if (outputs.length === 0) return;
  // Every row this settles, locked first and in device order, as ingest's markDirty takes
  // them; the statements below then wait for nothing (they used to deadlock with ingest).
  await client.query(
    `/* worker:lockClaimedRows */ SELECT 1 FROM derivation_queue WHERE device_id = ANY ($1::uuid[]) ORDER BY device_id FOR UPDATE`,
    [outputs.map((o) => o.deviceId)],
  );
  const done = outputs.filter((o) => o.continueFrom === null).map((o) => o.deviceId);
  if (done.length > 0) {
    await client.query(
      `/* worker:dequeueDerived */ DELETE FROM derivation_queue WHERE device_id = ANY ($1::uuid[]) AND new_from = 'infinity'`,
      [done],
    );
    await client.query(
      `/* worker:requeueMarkedMeanwhile */
       UPDATE derivation_queue SET dirty_from = new_from, new_from = 'infinity', marked_at = now() WHERE device_id = ANY ($1::uuid[])`,
      [done],
    );
  }
  const more = outputs.filter((o) => o.continueFrom !== null);
  if (more.length > 0) {
    await client.query(
      `/* worker:continueDerivation */
       UPDATE derivation_queue q SET dirty_from = least(d.from_ts, q.new_from), new_from = 'infinity'
         FROM unnest($1::uuid[], $2::timestamptz[]) AS d(device_id, from_ts)
        WHERE q.device_id = d.device_id`,
      [more.map((o) => o.deviceId), more.map((o) => toTimestamp(o.continueFrom!))],
    );
  }
}

/** Gives back every claim of the client's session (after its transaction ended). */
export async function releaseClaims(client: PoolClient): Promise<void> {
  await client.query('/* worker:releaseClaims */ SELECT pg_advisory_unlock_all()');
}

export interface Invalidation {
  relation: string;
  tenantId: string;
  subjectId: string;
  bucketStart: number;
  bucketEnd: number;
}

export async function recordInvalidations(client: Queryable, invalidations: Invalidation[]): Promise<void> {
  if (invalidations.length === 0) return;
  await client.query(
    `/* worker:recordInvalidations */
     INSERT INTO gold_invalidations (relation, tenant_id, subject_id, bucket_start, bucket_end)
     SELECT * FROM unnest($1::text[], $2::uuid[], $3::uuid[], $4::timestamptz[], $5::timestamptz[])`,
    columns(invalidations, [
      (i) => i.relation,
      (i) => i.tenantId,
      (i) => i.subjectId,
      (i) => toTimestamp(i.bucketStart),
      (i) => toTimestamp(i.bucketEnd),
    ]),
  );
}

/** Devices whose open sessions fall due to time out: queued so their outputs close. */
export async function queueDueRechecks(db: Queryable): Promise<number> {
  const { rowCount } = await db.query(
    `/* worker:queueDueRechecks */
     WITH due AS (
       UPDATE derivation_state SET recheck_at = NULL
        WHERE recheck_at <= now()
       RETURNING device_id, tenant_id
     )
     INSERT INTO derivation_queue (device_id, tenant_id, dirty_from)
     SELECT device_id, tenant_id, 'infinity' FROM due
     ON CONFLICT (device_id) DO NOTHING`,
  );
  return rowCount ?? 0;
}

/** How long checkpoints stay hourly, then daily; beyond, weekly until the readings' retention. */
export interface CheckpointHorizon {
  hourlyDays: number;
  dailyDays: number;
  readingDays: number;
}

const CHECKPOINT_PRUNE_SLICE = 10_000;

/**
 * Thins checkpoints to what late data can use (docs/derivation.md, "Checkpoints"): all of
 * them for `hourlyDays`, then the first of each device and UTC day until `dailyDays`, the
 * first of each device and week until the readings' retention, and of the older ones
 * only the newest (a late reading at the retention's edge restarts from it, never from
 * scratch). So a device keeps a bounded number, whatever the age of its data. Deletes in
 * slices, each its own statement, until none is left to thin.
 */
export async function pruneCheckpoints(db: Queryable, horizon: CheckpointHorizon): Promise<number> {
  let total = 0;
  for (;;) {
    const { rowCount } = await db.query(
      `/* worker:pruneCheckpoints */
       DELETE FROM derivation_checkpoints WHERE ctid IN (
         -- Ranked within its device and day or week, first kept; past retention, newest kept.
         SELECT ctid FROM (
           SELECT ctid, row_number() OVER (PARTITION BY device_id, bucket ORDER BY CASE WHEN past_retention THEN -epoch ELSE epoch END) AS rank
             FROM (
               SELECT ctid, device_id, extract(epoch FROM at) AS epoch, at < now() - make_interval(days => $3) AS past_retention,
                      CASE WHEN at >= now() - make_interval(days => $2) THEN date_bin('1 day', at, TIMESTAMPTZ '2000-01-03 00:00:00+00')
                           WHEN at >= now() - make_interval(days => $3) THEN date_bin('7 days', at, TIMESTAMPTZ '2000-01-03 00:00:00+00')
                           ELSE '-infinity' END AS bucket
                 FROM derivation_checkpoints
                WHERE at < now() - make_interval(days => $1)
             ) aged
         ) ranked
         WHERE rank > 1
         LIMIT ${CHECKPOINT_PRUNE_SLICE})`,
      [horizon.hourlyDays, horizon.dailyDays, horizon.readingDays],
    );
    total += rowCount ?? 0;
    if ((rowCount ?? 0) < CHECKPOINT_PRUNE_SLICE) return total;
  }
}

export async function countDirtyDevices(db: Queryable): Promise<number> {
  const { rows } = await db.query<{ count: number }>(
    `/* worker:countDirtyDevices */ SELECT count(*)::int AS count FROM derivation_queue`,
  );
  return rows[0]?.count ?? 0;
}
