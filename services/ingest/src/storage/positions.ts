import type { PoolClient } from '@gantry/db';
import { columnArrays, unnestCall, type Cell, type Column } from './encode.ts';
import { silverCell } from './tables.ts';

/**
 * PostgreSQL mode keeps positions gold (positions_1min, positions_15min) by differences in
 * the ingest transaction that writes the fixes to silver: every valid fix silver stored
 * (duplicates never are) adds 1 to its asset's minute and quarter hour, moves
 * last_event_ts forward and, when it is the newest fix of the bucket, sets the position.
 * Fixes only ever add to gold, so the cost follows the batch, not the minute's traffic.
 * What adding cannot express (a replay re-storing readings silver lost, readings deleted
 * or restamped, a rebuild) goes through the invalidation log and the worker's refresh.
 * (TimescaleDB mode: continuous aggregates, refreshed from the log the worker writes.)
 *
 * The newest fix wins; between fixes of one asset with the same ts (two devices), the
 * greater latitude and the greater longitude, each on its own: the rule of PostgreSQL
 * mode's last() (db/postgres/0160_positions_deltas.sql), so the definition gives the
 * same rows whatever order it reads silver in.
 */

/**
 * For `pnpm bench:positions` alone, which runs the path before this (the worker's refresh
 * of every touched minute from silver) beside this one. Off, gold misses the fixes of
 * live batches; no configuration reaches it.
 */
export const positionsForBenchmarks = { enabled: true };

const MINUTE_MS = 60_000;
const QUARTER_MS = 15 * MINUTE_MS;
/** Buckets aligned like time_bucket() (origin Monday 2000-01-03 UTC, a whole number of quarter hours after the epoch). */
const bucketOf = (ms: number, width: number) => Math.floor(ms / width) * width;

/** One bucket's share of a batch: the figures it adds to the stored row. */
interface BucketSum {
  tenantId: string;
  assetId: string;
  bucket: number;
  latitude: number;
  longitude: number;
  points: number;
  lastTs: number;
}

/** Per asset and bucket, what a set of fixes adds (the key sorts as asset, then bucket: the lock order). */
export class PositionTally {
  readonly minutes = new Map<string, BucketSum>();
  readonly quarters = new Map<string, BucketSum>();
  /** The buckets added to last: a batch's fixes of one device come in time order, mostly in the same minute. */
  private lastMinute: BucketSum | undefined;
  private lastQuarter: BucketSum | undefined;

  add(tenantId: string, assetId: string, ts: number, latitude: number, longitude: number): void {
    let minute = this.lastMinute;
    if (minute === undefined || minute.assetId !== assetId || ts < minute.bucket || ts >= minute.bucket + MINUTE_MS) {
      minute = bucket(this.minutes, tenantId, assetId, bucketOf(ts, MINUTE_MS));
      this.lastMinute = minute;
    }
    note(minute, ts, latitude, longitude);
    let quarter = this.lastQuarter;
    if (
      quarter === undefined ||
      quarter.assetId !== assetId ||
      ts < quarter.bucket ||
      ts >= quarter.bucket + QUARTER_MS
    ) {
      quarter = bucket(this.quarters, tenantId, assetId, bucketOf(ts, QUARTER_MS));
      this.lastQuarter = quarter;
    }
    note(quarter, ts, latitude, longitude);
  }

  get size(): number {
    return this.minutes.size;
  }
}

/** The bucket's sum, new (no fix yet) if the tally has none. */
function bucket(sums: Map<string, BucketSum>, tenantId: string, assetId: string, start: number): BucketSum {
  // Fixed width (uuid, zero-padded bucket), so the string order is the key order.
  const key = `${assetId}|${String(start / MINUTE_MS).padStart(9, '0')}`;
  let sum = sums.get(key);
  if (sum === undefined) {
    sum = { tenantId, assetId, bucket: start, latitude: 0, longitude: 0, points: 0, lastTs: Number.NEGATIVE_INFINITY };
    sums.set(key, sum);
  }
  return sum;
}

function note(sum: BucketSum, ts: number, latitude: number, longitude: number): void {
  sum.points += 1;
  if (ts > sum.lastTs) {
    sum.lastTs = ts;
    sum.latitude = latitude;
    sum.longitude = longitude;
  } else if (ts === sum.lastTs) {
    sum.latitude = Math.max(sum.latitude, latitude);
    sum.longitude = Math.max(sum.longitude, longitude);
  }
}

/** The valid fixes of an asset among silver rows a batch stored, as the definition counts them. */
export function tallyPositions(stored: readonly Cell[][]): PositionTally {
  const tally = new PositionTally();
  for (const row of stored) {
    if (row[silverCell.gpsValid] !== true || row[silverCell.type] !== 'gps') continue;
    const assetId = row[silverCell.asset];
    if (assetId === null || assetId === undefined) continue;
    tally.add(
      row[silverCell.tenant] as string,
      assetId as string,
      row[silverCell.ts] as number,
      row[silverCell.latitude] as number,
      row[silverCell.longitude] as number,
    );
  }
  return tally;
}

const deltaColumns: readonly Column[] = [
  { name: 'tenant_id', kind: 'uuid' },
  { name: 'asset_id', kind: 'uuid' },
  { name: 'bucket', kind: 'timestamptz' },
  { name: 'latitude', kind: 'float8' },
  { name: 'longitude', kind: 'float8' },
  { name: 'point_count', kind: 'int8' },
  { name: 'last_event_ts', kind: 'timestamptz' },
];
const names = deltaColumns.map((column) => column.name).join(', ');

/** The upsert of one relation's rows; `after`: a condition evaluated once, before the first row. */
const upsert = (relation: string, offset: number, after: string) => `INSERT INTO ${relation} AS g (${names})
  SELECT * FROM ${unnestCall(deltaColumns, offset)} WHERE ${after}
  ON CONFLICT (asset_id, bucket) DO UPDATE SET
    latitude = CASE WHEN EXCLUDED.last_event_ts > g.last_event_ts THEN EXCLUDED.latitude
                    WHEN EXCLUDED.last_event_ts < g.last_event_ts THEN g.latitude
                    ELSE greatest(g.latitude, EXCLUDED.latitude) END,
    longitude = CASE WHEN EXCLUDED.last_event_ts > g.last_event_ts THEN EXCLUDED.longitude
                     WHEN EXCLUDED.last_event_ts < g.last_event_ts THEN g.longitude
                     ELSE greatest(g.longitude, EXCLUDED.longitude) END,
    point_count = g.point_count + EXCLUDED.point_count,
    last_event_ts = greatest(g.last_event_ts, EXCLUDED.last_event_ts)`;

/**
 * One statement, one round trip. Order of locks, the same in every writer: the shared side
 * of the positions lock (a refresh or rebuild of positions gold takes it exclusively, so
 * it never reads silver between a batch's fixes and their differences), then the minute
 * rows in key order, then the quarter-hour rows in key order. The main statement reads
 * the minute CTE first (an init plan), so the minute rows are all taken before any
 * quarter-hour row.
 */
const deltaSql = `/* ingest:positionDeltas */
WITH locked AS MATERIALIZED (
  SELECT true FROM pg_advisory_xact_lock_shared(hashtext('gantry:gold:positions_1min'))
), minutes AS (
  ${upsert('positions_1min', 0, '(SELECT true FROM locked)')}
  RETURNING 1
)
${upsert('positions_15min', deltaColumns.length, '(SELECT count(*) FROM minutes) >= 0')}`;

const rowsOf = (sums: Map<string, BucketSum>): Cell[][] =>
  [...sums.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([, s]) => [s.tenantId, s.assetId, s.bucket, s.latitude, s.longitude, s.points, s.lastTs]);

/**
 * Adds the tally to positions gold, in the caller's transaction (the one that stored the
 * fixes). PostgreSQL mode only: TimescaleDB's positions are continuous aggregates.
 */
export async function applyPositionDeltas(client: PoolClient, tally: PositionTally): Promise<void> {
  if (tally.size === 0) return;
  await client.query(deltaSql, [
    ...columnArrays(deltaColumns, rowsOf(tally.minutes)),
    ...columnArrays(deltaColumns, rowsOf(tally.quarters)),
  ]);
}

/**
 * For what adding cannot account for: a replay stores again readings silver lost, which
 * gold may still count — and not always the copy gold counted (a poor fix and a valid one
 * with the same device and ts: whichever bronze message the replay reaches first is
 * stored). So the minutes of every GPS reading it stored, valid or not, go to the
 * invalidation log per asset, and the worker's refresh reads them again from silver.
 */
export async function logPositionInvalidations(client: PoolClient, stored: readonly Cell[][]): Promise<void> {
  const ranges = new Map<string, { tenantId: string; assetId: string; from: number; to: number }>();
  for (const row of stored) {
    const assetId = row[silverCell.asset];
    if (row[silverCell.type] !== 'gps' || assetId === null || assetId === undefined) continue;
    const minute = bucketOf(row[silverCell.ts] as number, MINUTE_MS);
    const tenantId = row[silverCell.tenant] as string;
    const key = `${tenantId}|${assetId}`;
    const range = ranges.get(key);
    if (range === undefined)
      ranges.set(key, { tenantId, assetId: assetId as string, from: minute, to: minute + MINUTE_MS });
    else {
      range.from = Math.min(range.from, minute);
      range.to = Math.max(range.to, minute + MINUTE_MS);
    }
  }
  if (ranges.size === 0) return;
  const list = [...ranges.values()];
  await client.query(
    `/* ingest:logPositionInvalidations */
     INSERT INTO gold_invalidations (relation, tenant_id, subject_id, bucket_start, bucket_end)
     SELECT 'positions_1min', * FROM unnest($1::uuid[], $2::uuid[], $3::timestamptz[], $4::timestamptz[])`,
    [
      list.map((range) => range.tenantId),
      list.map((range) => range.assetId),
      list.map((range) => new Date(range.from)),
      list.map((range) => new Date(range.to)),
    ],
  );
}
