import { readUtilization, utilizationFigures, type GoldCoverage, type Queryable, type UtilizationRow } from '@gantry/db';
import type { ResolvedRange } from '../../http/query.ts';
import type { Bucket, GroupBy } from './params.ts';
import { round, type TelemetryScope } from './sql.ts';
import { listTelemetryAssets, type AssetRefBody } from './telemetry-assets.repository.ts';

const BUCKET_SECONDS: Record<Bucket, number> = { hour: 3600, day: 86_400 };

export interface MetricQuery {
  range: ResolvedRange;
  bucket: Bucket;
  groupBy: GroupBy;
  assetId?: string | undefined;
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

/**
 * Utilization/container-work sums for one page, from the gold read module (gold where
 * covered, live otherwise). The fleet series lists every bucket of the range — zeros
 * where nothing ran — so charts need no gap filling; per-asset rows exist only for the
 * buckets an asset has derived data in.
 */
export async function readMetricPage(db: Queryable, scope: TelemetryScope, query: MetricQuery, limit: number | undefined, offset: number): Promise<MetricPage> {
  const assets = await listTelemetryAssets(db, scope, query.assetId);
  const byId = new Map(assets.map((asset) => [asset.id, asset]));
  const bucketSeconds = BUCKET_SECONDS[query.bucket];
  const fleet = query.groupBy === 'fleet';
  const result = await readUtilization(db, {
    tenantId: scope.tenantId,
    assetIds: assets.map((asset) => asset.id),
    from: query.range.from,
    to: query.range.to,
    bucket: query.bucket,
    groupBy: query.groupBy,
    ...(fleet ? {} : { limit, offset }),
  });

  let rows: MetricRow[];
  if (fleet) {
    const found = new Map(result.rows.map((row) => [row.bucketStart.getTime(), row]));
    const all: MetricRow[] = [];
    const widthMs = bucketSeconds * 1000;
    for (let start = result.from.getTime(); start < result.to.getTime(); start += widthMs) {
      const row = found.get(start) ?? { ...zeroSums, assetId: null, assetCount: 0, bucketStart: new Date(start), bucketEnd: new Date(start + widthMs) };
      all.push({ ...row, asset: null, capacitySeconds: bucketSeconds * assets.length });
    }
    rows = all.slice(offset, limit === undefined ? undefined : offset + limit);
  } else {
    rows = result.rows.map((row) => ({ ...row, asset: byId.get(row.assetId as string) ?? null, capacitySeconds: bucketSeconds }));
  }
  // A date-only `to` keeps the "last millisecond of the day" form of the other lists.
  const to = result.to.getTime() === query.range.to.getTime() ? query.range.echo.to : result.to.toISOString();
  return { rows, source: result.source, aggregateRefresh: result.aggregateRefresh, echo: { from: result.from.toISOString(), to } };
}

function bucketFields(row: MetricRow) {
  return {
    bucketStart: row.bucketStart.toISOString(),
    bucketEnd: row.bucketEnd.toISOString(),
    groupType: row.asset === null ? ('fleet' as const) : ('asset' as const),
    asset: row.asset,
  };
}

function containerWorkFields(row: MetricRow) {
  const { loadedPercent } = utilizationFigures(row, row.capacitySeconds);
  return {
    containerCycleCount: row.containerCycleCount,
    emptyDistanceM: round(row.emptyDistanceM, 3),
    emptySeconds: round(row.emptySeconds, 3),
    loadedDistanceM: round(row.loadedDistanceM, 3),
    loadedPercent: round(loadedPercent),
    loadedSeconds: round(row.loadedSeconds, 3),
  };
}

export function toUtilizationItem(row: MetricRow) {
  const figures = utilizationFigures(row, row.capacitySeconds);
  const work = containerWorkFields(row);
  return {
    ...bucketFields(row),
    distanceM: round(row.distanceM, 3),
    hourmeterDelta: row.hourmeterDelta,
    idlePercent: round(figures.idlePercent),
    runningSeconds: round(row.runningSeconds, 3),
    stationaryRunningSeconds: round(row.stationaryRunningSeconds, 3),
    utilizationPercent: round(figures.utilizationPercent),
    containerWork: { ...work, emptySeconds: Math.round(row.emptySeconds), loadedSeconds: Math.round(row.loadedSeconds) },
  };
}

export function toContainerWorkItem(row: MetricRow) {
  return { ...bucketFields(row), ...containerWorkFields(row) };
}

/** Export rows: the items flattened (asset fields and container work as columns). */
export function toUtilizationExportRow(row: MetricRow) {
  const { asset, containerWork, ...item } = toUtilizationItem(row);
  return { ...item, ...assetExportFields(asset), ...prefixed(containerWork) };
}

export function toContainerWorkExportRow(row: MetricRow) {
  const { asset, ...item } = toContainerWorkItem(row);
  return { ...item, ...assetExportFields(asset) };
}

function prefixed(work: Record<string, number>) {
  return Object.fromEntries(Object.entries(work).map(([key, value]) => [`containerWork${key[0]!.toUpperCase()}${key.slice(1)}`, value]));
}

function assetExportFields(asset: AssetRefBody | null) {
  return {
    assetId: asset?.id ?? null,
    assetIdentifier: asset?.identifier ?? null,
    assetName: asset?.name ?? null,
    assetDisplayCode: asset?.displayCode ?? null,
    assetType: asset?.assetType ?? null,
    assetLocation: asset?.location ?? null,
    assetCustomerName: asset?.customerName ?? null,
  };
}
