import { dataAsOfSql } from './data-as-of.ts';
import { goldRelation, liveDefinition } from './gold.ts';
import type { Queryable } from './pool.ts';
import { storageModeOf } from './storage-mode.ts';

/**
 * What a gold relation covers, for the API's `aggregateRefresh`. Buckets before
 * `coverageTo` are materialized (those of a refreshed relation apart from windows still
 * in the invalidation log); `coverageTo` is the end of the newest materialized bucket and
 * may lie in the future while the current bucket is still filling.
 */
export interface GoldCoverage {
  /** `ok`, `pending` (never materialized yet) or `failed` (the last refresh failed). */
  status: string;
  coverageFrom: Date | null;
  coverageTo: Date | null;
  updatedAt: Date | null;
}

interface CoverageRow {
  status: string;
  coverage_from: Date | null;
  coverage_to: Date | null;
  updated_at: Date | null;
  job_finished_at: Date | null;
  job_failed: boolean | null;
}

/**
 * The coverage of a gold relation, truthful in both storage modes. The worker records how
 * far it has applied the invalidation log (every bucket before that matches the source,
 * buckets without data being absent); for a continuous aggregate (positions, TimescaleDB
 * mode) the aggregate's own watermark and the refresh jobs' statistics count too, so
 * refreshes by policy do. A relation kept by differences (utilization, both modes) covers
 * up to the end of the current bucket and is up to date as of the read.
 */
const DATA_AS_OF = dataAsOfSql('now()');

export async function readGoldCoverage(db: Queryable, relation: string): Promise<GoldCoverage> {
  const meta = goldRelation(relation);
  const aggregate = meta.keptByDeltas !== true && (await storageModeOf(db)) === 'timescaledb';
  const { rows } = aggregate
    ? await db.query<CoverageRow>(
        `/* db:readGoldCoverage */
           SELECT c.status, c.coverage_from, c.updated_at,
                  greatest(c.coverage_to,
                           CASE WHEN wm.watermark > 0 THEN TIMESTAMPTZ 'epoch' + wm.watermark * INTERVAL '1 microsecond' END) AS coverage_to,
                  js.job_finished_at, js.job_failed
             FROM gold_coverage c
             LEFT JOIN LATERAL (
               SELECT ca.mat_hypertable_id, _timescaledb_functions.cagg_watermark(ca.mat_hypertable_id) AS watermark
                 FROM _timescaledb_catalog.continuous_agg ca
                WHERE ca.user_view_name = c.relation AND ca.user_view_schema = current_schema()
             ) wm ON true
             LEFT JOIN LATERAL (
               -- A job that never succeeded reports -infinity (TimescaleDB 2.21), not null.
               SELECT max(nullif(s.last_successful_finish, '-infinity')) AS job_finished_at,
                      bool_or(s.last_run_status = 'Failed' AND s.last_run_started_at > coalesce(c.updated_at, '-infinity')) AS job_failed
                 FROM timescaledb_information.jobs j
                 JOIN timescaledb_information.job_stats s ON s.job_id = j.job_id
                WHERE j.proc_name = 'policy_refresh_continuous_aggregate'
                  AND (j.config ->> 'mat_hypertable_id')::int = wm.mat_hypertable_id
             ) js ON true
            WHERE c.relation = $1`,
        [relation],
      )
    : await db.query<CoverageRow>(
        // A relation kept by differences changes in the derivation transactions
        // themselves: once built, it holds every committed derivation at any moment,
        // the current bucket included, so it is as fresh as this read.
        // On a streaming replica "this read" is as of the last transaction it replayed.
        `/* db:readGoldCoverage */
           SELECT status, coverage_from, NULL::timestamptz AS job_finished_at, NULL::boolean AS job_failed,
                  CASE WHEN $2 AND status = 'ok'
                       THEN greatest(coverage_to, time_bucket($3::interval, ${DATA_AS_OF}) + $3::interval) ELSE coverage_to END AS coverage_to,
                  CASE WHEN $2 AND status = 'ok' THEN ${DATA_AS_OF} ELSE updated_at END AS updated_at
             FROM gold_coverage WHERE relation = $1`,
        [relation, meta.keptByDeltas === true, meta.bucketWidth],
      );
  const row = rows[0];
  if (!row) return { status: 'pending', coverageFrom: null, coverageTo: null, updatedAt: null };
  let updatedAt = row.updated_at;
  if (row.job_finished_at && (!updatedAt || row.job_finished_at > updatedAt)) updatedAt = row.job_finished_at;
  // The worker's full first refresh makes a relation usable; until then only live answers are true.
  const status = row.status === 'rebuild' ? 'pending' : row.job_failed ? 'failed' : row.status;
  return {
    status,
    coverageFrom: row.coverage_from,
    coverageTo: status === 'pending' ? null : row.coverage_to,
    updatedAt,
  };
}

export type UtilizationBucket = 'hour' | 'day';

export interface UtilizationQuery {
  tenantId: string;
  /**
   * The assets to answer for (the caller resolves key scope to asset ids). Absent: the
   * whole fleet of `fleetScope`, as fleet_members holds it, read inside the statement, so
   * the cost follows the answer (a page, a series) and not the number of assets.
   */
  assetIds?: string[];
  /** Half-open range [from, to); widened to whole buckets (UTC hours or days). */
  from: Date;
  to: Date;
  bucket: UtilizationBucket;
  /** `asset`: one row per asset and bucket; `fleet`: one row per bucket summed over the assets. */
  groupBy?: 'asset' | 'fleet';
  /** Rows ordered by bucket start, then asset id; absent limit means every row. */
  limit?: number;
  offset?: number;
  /** Tests and benchmarks only: force one path regardless of coverage. */
  forceSource?: 'gold' | 'live';
  /**
   * The key's whole fleet (every telemetry asset it may see, no search or asset filter):
   * a fleet series may then read the scope's rollup, one row per bucket. `customerName`
   * null is the tenant's fleet, otherwise that customer's. Given with `assetIds`, those
   * are the fleet as the caller read it (the rollup is corrected by any difference).
   */
  fleetScope?: { customerName: string | null };
}

/** Sums over one bucket (and one asset, or the fleet). Seconds and metres, exact sums. */
export interface UtilizationSums {
  runningSeconds: number;
  movingSeconds: number;
  stationaryRunningSeconds: number;
  loadedSeconds: number;
  emptySeconds: number;
  distanceM: number;
  loadedDistanceM: number;
  emptyDistanceM: number;
  hourmeterDelta: number;
  containerCycleCount: number;
  imuAnomalyCount: number;
  imuSampleCount: number;
  /** Seconds of the bucket with data (no gap longer than the gap threshold). */
  dataSeconds: number;
}

export interface UtilizationRow extends UtilizationSums {
  /** null when grouped by fleet. */
  assetId: string | null;
  /** Assets summed into this row (1 per asset row; assets with data in the bucket for fleet rows). */
  assetCount: number;
  bucketStart: Date;
  bucketEnd: Date;
}

export interface UtilizationResult {
  /** `live` when any part of the answer was computed at query time from segments. */
  source: 'gold' | 'live';
  aggregateRefresh: GoldCoverage;
  bucket: UtilizationBucket;
  /** The range actually answered: the request widened to whole buckets. */
  from: Date;
  to: Date;
  /** The assets answered for: the fleet's capacity is the bucket's length times this. */
  assetCount: number;
  rows: UtilizationRow[];
}

const BUCKET_MS: Record<UtilizationBucket, number> = { hour: 3_600_000, day: 86_400_000 };
const RELATION: Record<UtilizationBucket, string> = { hour: 'utilization_hourly', day: 'utilization_daily' };

const floorTo = (ms: number, width: number) => Math.floor(ms / width) * width;
const ceilTo = (ms: number, width: number) => Math.ceil(ms / width) * width;

export const SUM_COLUMNS = [
  'running_seconds',
  'moving_seconds',
  'stationary_running_seconds',
  'loaded_seconds',
  'empty_seconds',
  'distance_m',
  'loaded_distance_m',
  'empty_distance_m',
  'hourmeter_delta',
  'container_cycle_count',
  'imu_anomaly_count',
  'imu_sample_count',
  'data_seconds',
] as const;

type UtilizationDbRow = { asset_id: string | null; bucket: Date; asset_count: number } & Record<
  (typeof SUM_COLUMNS)[number],
  number | null
>;

function toUtilizationRow(row: UtilizationDbRow, widthMs: number): UtilizationRow {
  return {
    assetId: row.asset_id,
    assetCount: Number(row.asset_count),
    bucketStart: row.bucket,
    bucketEnd: new Date(row.bucket.getTime() + widthMs),
    runningSeconds: Number(row.running_seconds ?? 0),
    movingSeconds: Number(row.moving_seconds ?? 0),
    stationaryRunningSeconds: Number(row.stationary_running_seconds ?? 0),
    loadedSeconds: Number(row.loaded_seconds ?? 0),
    emptySeconds: Number(row.empty_seconds ?? 0),
    distanceM: Number(row.distance_m ?? 0),
    loadedDistanceM: Number(row.loaded_distance_m ?? 0),
    emptyDistanceM: Number(row.empty_distance_m ?? 0),
    hourmeterDelta: Number(row.hourmeter_delta ?? 0),
    containerCycleCount: Number(row.container_cycle_count ?? 0),
    imuAnomalyCount: Number(row.imu_anomaly_count ?? 0),
    imuSampleCount: Number(row.imu_sample_count ?? 0),
    dataSeconds: Number(row.data_seconds ?? 0),
  };
}

/** Placeholders with their casts, so a statement also runs as COPY with values inlined. */
class StatementParams {
  readonly values: unknown[] = [];
  add(value: unknown, type: string): string {
    this.values.push(value);
    return `$${this.values.length}::${type}`;
  }
}

/** One SQL statement answering a utilization query, and what the answer will say about itself. */
export interface UtilizationStatement {
  /** Rows: asset_id (null for fleet rows), bucket, asset_count, then the sums (SUM_COLUMNS). */
  text: string;
  values: unknown[];
  source: 'gold' | 'live';
  aggregateRefresh: GoldCoverage;
  bucket: UtilizationBucket;
  from: Date;
  to: Date;
  /** The assets answered for (counted in the statement's first round trip for a fleet scope). */
  assetCount: number;
  /** Whether the fleet rollup answers (fleet rows read one per bucket instead of one per asset). */
  fleetRollup: boolean;
}

const FLEET_TABLE: Record<UtilizationBucket, string> = {
  hour: 'utilization_fleet_hourly',
  day: 'utilization_fleet_daily',
};

/**
 * The statement behind `readUtilization`, for callers that run it themselves (an export
 * hands it to COPY). A small read or two first decide the plan — the relation's coverage
 * and, for a fleet scope, whether the fleet rollup is built — then one statement gives
 * every row:
 *
 * - per asset: gold rows for [from, goldTo), live rows (the same definition over
 *   segments) for the rest (a relation not built yet, a range past its coverage);
 * - fleet without `fleetScope`: those rows summed per bucket (one gold row per asset and
 *   bucket);
 * - fleet with `fleetScope`: the scope's rollup row per bucket, corrected by the assets
 *   that differ between the rollup's members and `assetIds` (none, unless a move or a
 *   deletion committed between the caller's read of its assets and this statement), then
 *   the live rows. The answer is the sum over exactly `assetIds`, as without the rollup.
 *
 * Gold kept by differences holds every committed derivation, so within its coverage no
 * bucket waits for a refresh and none is answered live.
 */
export async function utilizationStatement(db: Queryable, query: UtilizationQuery): Promise<UtilizationStatement> {
  const widthMs = BUCKET_MS[query.bucket];
  const relation = RELATION[query.bucket];
  const from = floorTo(query.from.getTime(), widthMs);
  const to = Math.max(from, ceilTo(query.to.getTime(), widthMs));
  const coverage = await readGoldCoverage(db, relation);
  const members = query.assetIds === undefined;
  if (members && query.fleetScope === undefined)
    throw new Error('a utilization query names its assets or a fleet scope');
  const assetIds = members ? [] : [...new Set(query.assetIds)];
  const fleet = query.groupBy === 'fleet';

  // Gold answers [from, goldTo); the rest is live.
  let goldTo = from;
  if (query.forceSource === 'gold') goldTo = to;
  else if (query.forceSource !== 'live' && coverage.status !== 'pending' && coverage.coverageTo) {
    goldTo = Math.max(from, Math.min(to, ceilTo(coverage.coverageTo.getTime(), widthMs)));
  }
  // For a fleet scope, one round trip: whether the fleet rollup is built (status ok since
  // its last rebuild) and the assets that differ between the rollup's members and
  // `assetIds` — or, without `assetIds`, how many members the scope has.
  let fleetStatus: string | null = null;
  let notAsked: string[] = [];
  let notMembers: string[] = [];
  let memberCount = 0;
  const correct = !members && fleet && query.fleetScope !== undefined && goldTo > from && assetIds.length > 0;
  if (members || correct) {
    const q = new StatementParams();
    const tenant = q.add(query.tenantId, 'uuid');
    const customer = q.add(query.fleetScope!.customerName, 'text');
    const scopeMembers = `SELECT m.asset_id FROM fleet_members m WHERE m.tenant_id = ${tenant} AND (${customer}::text IS NULL OR m.customer_name = ${customer})`;
    const ids = members ? '' : q.add(assetIds, 'uuid[]');
    const corrections = correct
      ? `(SELECT array_agg(s.asset_id) FROM (${scopeMembers}) s
           WHERE NOT EXISTS (SELECT 1 FROM unnest(${ids}) AS x(asset_id) WHERE x.asset_id = s.asset_id)) AS not_asked,
         (SELECT array_agg(x.asset_id) FROM unnest(${ids}) AS x(asset_id)
           WHERE NOT EXISTS (SELECT 1 FROM (${scopeMembers}) s WHERE s.asset_id = x.asset_id)) AS not_members,`
      : 'NULL::uuid[] AS not_asked, NULL::uuid[] AS not_members,';
    const scope = await db.query<{
      fleet_status: string | null;
      not_asked: string[] | null;
      not_members: string[] | null;
      member_count: number | null;
    }>(
      `/* db:readUtilization:scope */
       SELECT (SELECT status FROM gold_coverage WHERE relation = 'utilization_fleet') AS fleet_status,
              ${corrections}
              ${members ? `(SELECT count(*)::int FROM (${scopeMembers}) s)` : 'NULL::int'} AS member_count`,
      q.values,
    );
    fleetStatus = scope.rows[0]?.fleet_status ?? null;
    notAsked = scope.rows[0]?.not_asked ?? [];
    notMembers = scope.rows[0]?.not_members ?? [];
    memberCount = scope.rows[0]?.member_count ?? 0;
  }
  const assetCount = members ? memberCount : assetIds.length;
  // Past the coverage, every asset is live: [goldTo, to).
  const gap = goldTo < to && assetCount > 0 ? { from: goldTo, to } : null;
  const fleetRollup =
    fleet && query.fleetScope !== undefined && goldTo > from && assetCount > 0 && fleetStatus === 'ok';

  const p = new StatementParams();
  // Added on first use: every placeholder of a statement must appear in it.
  let tenantParam: string | undefined;
  const tenant = () => {
    tenantParam ??= p.add(query.tenantId, 'uuid');
    return tenantParam;
  };
  let assetsParam: string | undefined;
  /**
   * The assets' condition on a source's asset column, an equality for one asset. The
   * caller resolved the ids within the key's scope, so no tenant condition stands beside
   * it: one would offer the planner the (tenant_id, time) indexes, which it takes for one
   * asset when the table has no statistics yet (after a bulk upload, before autovacuum
   * analysed it), reading every asset of the tenant in the range. A fleet scope's members
   * are read in the statement, and the tenant condition then lets the planner walk a
   * gold table's (tenant_id, bucket) index in the answer's order.
   */
  const ofAssets = (column: string, table?: string) => {
    if (members) {
      assetsParam ??= p.add(query.fleetScope!.customerName, 'text');
      const inScope = `${column} IN (SELECT m.asset_id FROM fleet_members m WHERE m.tenant_id = ${tenant()}
        AND (${assetsParam} IS NULL OR m.customer_name = ${assetsParam}))`;
      return table ? `${table}.tenant_id = ${tenant()} AND ${inScope}` : inScope;
    }
    assetsParam ??= assetIds.length === 1 ? p.add(assetIds[0], 'uuid') : p.add(assetIds, 'uuid[]');
    return assetIds.length === 1 ? `${column} = ${assetsParam}` : `${column} = ANY (${assetsParam})`;
  };
  const columns = SUM_COLUMNS.join(', ');
  const ctes: string[] = [];
  const parts: string[] = [];
  const livePart = (filter: string) =>
    `SELECT asset_id, bucket, 1 AS asset_count, ${columns} FROM (${liveDefinition(relation, filter)}) live`;
  if (gap) {
    parts.push(
      livePart(
        `${ofAssets('s.asset_id')} AND s.start_ts >= ${p.add(new Date(gap.from), 'timestamptz')} AND s.start_ts < ${p.add(new Date(gap.to), 'timestamptz')}`,
      ),
    );
  }
  // Added only when a gold part uses them: a statement's parameters must all be used.
  const goldBounds =
    goldTo > from ? [p.add(new Date(from), 'timestamptz'), p.add(new Date(goldTo), 'timestamptz')] : [];
  const [goldFrom, goldUntil] = goldBounds;
  if (fleetRollup) {
    const customer = query.fleetScope!.customerName;
    const key =
      customer === null
        ? `f.all_customers AND f.customer_name = ''`
        : `NOT f.all_customers AND f.customer_name = ${p.add(customer, 'text')}`;
    ctes.push(
      `rollup AS (SELECT f.bucket, f.asset_count, ${columns} FROM ${FLEET_TABLE[query.bucket]} f
        WHERE f.tenant_id = ${tenant()} AND ${key} AND f.bucket >= ${goldFrom} AND f.bucket < ${goldUntil})`,
    );
    // Assets the rollup holds but the caller did not ask for (-1), and the reverse (+1):
    // none, unless an asset changed between the caller's read of its assets and this read.
    // (Found in the round trip before: inside this statement the planner, not knowing
    // there are none, would cost it as a large join and compile it.)
    const adjust = [...notAsked.map((id) => [id, -1] as const), ...notMembers.map((id) => [id, 1] as const)];
    if (adjust.length > 0) {
      const signed = SUM_COLUMNS.map((c) => `a.sign * coalesce(g.${c}, 0) AS ${c}`).join(', ');
      parts.push(
        `SELECT g.asset_id, g.bucket, a.sign AS asset_count, ${signed}
           FROM unnest(${p.add(
             adjust.map(([id]) => id),
             'uuid[]',
           )}, ${p.add(
             adjust.map(([, sign]) => sign),
             'integer[]',
           )}) AS a(asset_id, sign)
          CROSS JOIN LATERAL (SELECT * FROM ${relation} g
                               WHERE g.asset_id = a.asset_id AND g.tenant_id = ${tenant()}
                                 AND g.bucket >= ${goldFrom} AND g.bucket < ${goldUntil}) g`,
      );
    }
  } else if (goldTo > from) {
    parts.push(
      `SELECT asset_id, bucket, 1 AS asset_count, ${columns} FROM ${relation} g
        WHERE ${ofAssets('g.asset_id', 'g')} AND g.bucket >= ${goldFrom} AND g.bucket < ${goldUntil}`,
    );
  }

  const paging = `${query.limit !== undefined ? ` LIMIT ${p.add(query.limit, 'bigint')}` : ''}${query.offset ? ` OFFSET ${p.add(query.offset, 'bigint')}` : ''}`;
  let text: string;
  let values = p.values;
  if ((parts.length === 0 && !fleetRollup) || assetCount === 0) {
    values = [];
    text = `/* db:readUtilization */ SELECT NULL::uuid AS asset_id, NULL::timestamptz AS bucket, 0::bigint AS asset_count, ${SUM_COLUMNS.map((c) => `NULL::numeric AS ${c}`).join(', ')} WHERE false`;
  } else if (fleetRollup && parts.length === 0) {
    // The usual fleet series: the rollup's rows as they are.
    text = `/* db:readUtilization:fleet */
      WITH ${ctes.join(',\n')}
      SELECT NULL::uuid AS asset_id, bucket, asset_count, ${columns} FROM rollup ORDER BY bucket${paging}`;
  } else if (fleetRollup) {
    // The corrections (normally no rows) are summed per bucket and joined to the rollup's
    // rows: summing 720 rollup rows again would cost more than reading them.
    ctes.push(
      `corrections AS (SELECT bucket, sum(asset_count) AS asset_count, ${SUM_COLUMNS.map((c) => `sum(${c}) AS ${c}`).join(', ')}
         FROM (${parts.join('\nUNION ALL\n')}) x GROUP BY bucket)`,
    );
    const combined = SUM_COLUMNS.map(
      (c) =>
        `CASE WHEN c.bucket IS NULL THEN r.${c} WHEN r.bucket IS NULL THEN c.${c} ELSE r.${c} + coalesce(c.${c}, 0) END AS ${c}`,
    ).join(', ');
    const count = 'coalesce(r.asset_count, 0) + coalesce(c.asset_count, 0)';
    text = `/* db:readUtilization:fleet */
      WITH ${ctes.join(',\n')}
      SELECT NULL::uuid AS asset_id, coalesce(r.bucket, c.bucket) AS bucket, ${count} AS asset_count, ${combined}
        FROM rollup r FULL JOIN corrections c ON c.bucket = r.bucket
       WHERE ${count} > 0
       ORDER BY bucket${paging}`;
  } else {
    const select = fleet
      ? `SELECT NULL::uuid AS asset_id, bucket, sum(asset_count) AS asset_count, ${SUM_COLUMNS.map((c) => `sum(${c}) AS ${c}`).join(', ')}
           FROM answer GROUP BY bucket HAVING sum(asset_count) > 0 ORDER BY bucket`
      : `SELECT asset_id, bucket, asset_count, ${columns} FROM answer ORDER BY bucket, asset_id`;
    ctes.push(`answer AS (${parts.join('\nUNION ALL\n')})`);
    text = `/* db:readUtilization */
      WITH ${ctes.join(',\n')}
      ${select}${paging}`;
  }
  return {
    text,
    values,
    source: gap ? 'live' : 'gold',
    aggregateRefresh: coverage,
    bucket: query.bucket,
    from: new Date(from),
    to: new Date(to),
    assetCount,
    fleetRollup,
  };
}

/**
 * Utilization and container-work sums per asset (or fleet) and bucket for [from, to),
 * answered from gold where the relation's coverage holds — the open bucket included,
 * which the worker keeps current as it derives — and live from segments for the rest
 * (a relation not built yet, ranges past `coverageTo`). Both paths run the same SQL definition
 * (db/gold/utilization_hourly.sql), so they give identical numbers. Buckets with no
 * segments are absent from `rows`.
 */
export async function readUtilization(db: Queryable, query: UtilizationQuery): Promise<UtilizationResult> {
  const statement = await utilizationStatement(db, query);
  const widthMs = BUCKET_MS[query.bucket];
  const result = await db.query<UtilizationDbRow>(statement.text, statement.values);
  return {
    source: statement.source,
    aggregateRefresh: statement.aggregateRefresh,
    bucket: statement.bucket,
    from: statement.from,
    to: statement.to,
    assetCount: statement.assetCount,
    rows: result.rows.map((row) => toUtilizationRow(row, widthMs)),
  };
}

/** The utilization percentages from a row's sums (docs/telemetry-api.md); capacity is bucket length × assets. */
export function utilizationFigures(
  sums: UtilizationSums,
  capacitySeconds: number,
): { utilizationPercent: number; idlePercent: number; loadedPercent: number } {
  const percent = (part: number, whole: number) => (whole > 0 ? (part / whole) * 100 : 0);
  return {
    utilizationPercent: percent(sums.runningSeconds, capacitySeconds),
    idlePercent: percent(sums.stationaryRunningSeconds, sums.runningSeconds),
    loadedPercent: percent(sums.loadedSeconds, sums.loadedSeconds + sums.emptySeconds),
  };
}
