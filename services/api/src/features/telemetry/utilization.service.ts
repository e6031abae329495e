import {
  readUtilization,
  utilizationFigures,
  type GoldCoverage,
  type Queryable,
  type UtilizationQuery,
  type UtilizationRow,
} from '@gantry/db';
import type { ResolvedRange } from '../../http/query.ts';
import type { Bucket, GroupBy } from './params.ts';
import { round, type TelemetryScope } from './sql.ts';
import { assetRefs, listTelemetryAssets, type AssetRefBody } from './telemetry-assets.repository.ts';

const BUCKET_SECONDS: Record<Bucket, number> = { hour: 3600, day: 86_400 };

export interface MetricQuery {
  range: ResolvedRange;
  bucket: Bucket;
  groupBy: GroupBy;
  assetId?: string | undefined;
  q?: string | undefined;
}

/** One bucket of one asset or of the fleet, before it is shaped as a response item. */
export interface MetricRow extends UtilizationRow {
  asset: AssetRefBody | null;
  capacitySeconds: number;
}

export interface MetricPage {
  rows: MetricRow[];
  source: 'gold' | 'live';
  aggregateRefresh: GoldCoverage;
  /** The range answered: the request widened to whole buckets. */
  echo: { from: string; to: string };
}

const zeroSums = {
  runningSeconds: 0,
  movingSeconds: 0,
  stationaryRunningSeconds: 0,
  loadedSeconds: 0,
  emptySeconds: 0,
  distanceM: 0,
  loadedDistanceM: 0,
  emptyDistanceM: 0,
  hourmeterDelta: 0,
  containerCycleCount: 0,
  imuAnomalyCount: 0,
  imuSampleCount: 0,
  dataSeconds: 0,
};

/** A query over the key's whole fleet: no search, no asset filter. */
export function wholeFleet(query: MetricQuery): boolean {
  return !query.assetId && !query.q;
}

/**
 * The gold read's query for a request. The key's whole fleet (no `q`, no `assetId`) is
 * named by its scope, and the gold read takes its members in the statement itself
 * (fleet series from the fleet rollup, asset pages in the gold table's order), so the
 * answer costs its page, not the number of assets; a search or an asset filter names
 * the assets it matched (`assetIds`). The page and the export (metric-export.ts) both
 * ask through it.
 */
export function goldQuery(scope: TelemetryScope, query: MetricQuery, assetIds?: string[]): UtilizationQuery {
  return {
    tenantId: scope.tenantId,
    ...(assetIds ? { assetIds } : { fleetScope: { customerName: scope.customerName } }),
    from: query.range.from,
    to: query.range.to,
    bucket: query.bucket,
    groupBy: query.groupBy,
  };
}

/**
 * Utilization/container-work sums for one page, from the gold read module (gold where
 * covered, the open bucket included, live otherwise). The fleet series lists every
 * bucket of the range — zeros where nothing ran — so charts need no gap filling; per-asset
 * rows exist only for the buckets an asset has derived data in, and carry the AssetRef of
 * the page's assets only.
 */
export async function readMetricPage(
  db: Queryable,
  scope: TelemetryScope,
  query: MetricQuery,
  limit: number | undefined,
  offset: number,
): Promise<MetricPage> {
  const matched = wholeFleet(query) ? undefined : await listTelemetryAssets(db, scope, query.assetId, query.q);
  const bucketSeconds = BUCKET_SECONDS[query.bucket];
  const fleet = query.groupBy === 'fleet';
  const result = await readUtilization(db, {
    ...goldQuery(
      scope,
      query,
      matched?.map((asset) => asset.id),
    ),
    ...(fleet ? {} : { limit, offset }),
  });

  let rows: MetricRow[];
  if (fleet) {
    const found = new Map(result.rows.map((row) => [row.bucketStart.getTime(), row]));
    const all: MetricRow[] = [];
    const widthMs = bucketSeconds * 1000;
    for (let start = result.from.getTime(); start < result.to.getTime(); start += widthMs) {
      const row = found.get(start) ?? {
        ...zeroSums,
        assetId: null,
        assetCount: 0,
        bucketStart: new Date(start),
        bucketEnd: new Date(start + widthMs),
      };
      all.push({ ...row, asset: null, capacitySeconds: bucketSeconds * result.assetCount });
    }
    rows = all.slice(offset, limit === undefined ? undefined : offset + limit);
  } else {
    const byId = new Map(
      (matched ?? (await assetRefs(db, [...new Set(result.rows.map((row) => row.assetId as string))]))).map((asset) => [
        asset.id,
        asset,
      ]),
    );
    // In place: an export page holds 50,001 of these, so no second copy.
    rows = result.rows.map((row) =>
      Object.assign(row, { asset: byId.get(row.assetId as string) ?? null, capacitySeconds: bucketSeconds }),
    );
  }
  // A date-only `to` keeps the "last millisecond of the day" form of the other lists.
  const to = result.to.getTime() === query.range.to.getTime() ? query.range.echo.to : result.to.toISOString();
  return {
    rows,
    source: result.source,
    aggregateRefresh: result.aggregateRefresh,
    echo: { from: result.from.toISOString(), to },
  };
}

/** The figures of one row, rounded as every answer shows them (JSON items and exports alike). */
export function metricFigures(row: MetricRow) {
  const figures = utilizationFigures(row, row.capacitySeconds);
  return {
    distanceM: round(row.distanceM, 3),
    hourmeterDelta: round(row.hourmeterDelta, 3),
    idlePercent: round(figures.idlePercent),
    runningSeconds: round(row.runningSeconds, 3),
    stationaryRunningSeconds: round(row.stationaryRunningSeconds, 3),
    utilizationPercent: round(figures.utilizationPercent),
    containerCycleCount: row.containerCycleCount,
    emptyDistanceM: round(row.emptyDistanceM, 3),
    emptySeconds: round(row.emptySeconds, 3),
    loadedDistanceM: round(row.loadedDistanceM, 3),
    loadedPercent: round(figures.loadedPercent),
    loadedSeconds: round(row.loadedSeconds, 3),
  };
}

function bucketFields(row: MetricRow) {
  return {
    bucketStart: row.bucketStart.toISOString(),
    bucketEnd: row.bucketEnd.toISOString(),
    groupType: row.asset === null ? ('fleet' as const) : ('asset' as const),
    asset: row.asset,
  };
}

export function toUtilizationItem(row: MetricRow) {
  const f = metricFigures(row);
  return {
    ...bucketFields(row),
    distanceM: f.distanceM,
    hourmeterDelta: f.hourmeterDelta,
    idlePercent: f.idlePercent,
    runningSeconds: f.runningSeconds,
    stationaryRunningSeconds: f.stationaryRunningSeconds,
    utilizationPercent: f.utilizationPercent,
    // ContainerWorkSummary holds whole seconds.
    containerWork: {
      containerCycleCount: f.containerCycleCount,
      emptyDistanceM: f.emptyDistanceM,
      emptySeconds: Math.round(row.emptySeconds),
      loadedDistanceM: f.loadedDistanceM,
      loadedPercent: f.loadedPercent,
      loadedSeconds: Math.round(row.loadedSeconds),
    },
  };
}

export function toContainerWorkItem(row: MetricRow) {
  const f = metricFigures(row);
  return {
    ...bucketFields(row),
    containerCycleCount: f.containerCycleCount,
    emptyDistanceM: f.emptyDistanceM,
    emptySeconds: f.emptySeconds,
    loadedDistanceM: f.loadedDistanceM,
    loadedPercent: f.loadedPercent,
    loadedSeconds: f.loadedSeconds,
  };
}
