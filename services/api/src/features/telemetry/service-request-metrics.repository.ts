import type { Queryable } from '@gantry/db';
import { isoRequired } from '../../http/common-schemas.ts';
import type { Bucket, GroupBy } from './params.ts';
import {
  assetRefColumns,
  assetScopeCondition,
  assetSearchCondition,
  likePattern,
  pageSql,
  SqlParams,
  toAssetRef,
  type Column,
  type ListStatement,
  type Row,
  type TelemetryScope,
} from './sql.ts';

/** Statuses that still need work: everything but resolved, closed and cancelled. */
export const OPEN_STATUSES = ['new', 'reopened', 'triaged', 'in_progress', 'waiting_customer'] as const;

export interface ServiceRequestMetricQuery {
  /** Whole buckets: from and to are already aligned to the bucket width. */
  from: Date;
  to: Date;
  bucket: Bucket;
  groupBy: GroupBy;
  assetId?: string | undefined;
  q?: string | undefined;
}

const counts: Column[] = [
  { name: 'totalCount', sql: 'coalesce(c.total_count, 0)', type: 'int' },
  { name: 'openCount', sql: 'coalesce(c.open_count, 0)', type: 'int' },
  { name: 'resolvedCount', sql: 'coalesce(c.resolved_count, 0)', type: 'int' },
  { name: 'closedCount', sql: 'coalesce(c.closed_count, 0)', type: 'int' },
  { name: 'highPriorityCount', sql: 'coalesce(c.high_count, 0)', type: 'int' },
  { name: 'urgentPriorityCount', sql: 'coalesce(c.urgent_count, 0)', type: 'int' },
];

/**
 * Service requests by the bucket they were created in (cohorts): how many were created
 * (totalCount, cancelled included) and, of those, how many are open, resolved or closed
 * now, and how many are high or urgent priority. Always computed from the requests
 * themselves (no aggregate exists). A customer key counts the requests whose own
 * customerName is its customer. The fleet series lists every bucket; per-asset rows
 * exist only where requests were created, requests without a (visible) asset forming
 * the group with a null asset.
 */
export function serviceRequestMetricStatement(scope: TelemetryScope, query: ServiceRequestMetricQuery): ListStatement {
  const params = new SqlParams();
  const width = params.add(query.bucket === 'hour' ? '1 hour' : '24 hours', 'text');
  const from = params.add(query.from, 'timestamptz');
  const to = params.add(query.to, 'timestamptz');
  const conditions = [
    `sr.tenant_id = ${params.add(scope.tenantId, 'uuid')}`,
    `sr.created_at >= ${from}`,
    `sr.created_at < ${to}`,
  ];
  if (scope.customerName !== null) conditions.push(`sr.customer_name = ${params.add(scope.customerName, 'text')}`);
  if (query.assetId) conditions.push(`sr.asset_id = ${params.add(query.assetId, 'uuid')}`);
  if (query.q) {
    // The request's own text, or its asset's (only an asset the key may see).
    const search = params.add(likePattern(query.q), 'text');
    conditions.push(
      `(sr.search_text LIKE ${search} OR EXISTS (SELECT 1 FROM assets qa WHERE qa.id = sr.asset_id AND ${assetScopeCondition(params, scope, 'qa')} AND ${assetSearchCondition(params, query.q, 'qa')}))`,
    );
  }
  const fleet = query.groupBy === 'fleet';
  const assetJoin = fleet ? '' : `LEFT JOIN assets a ON a.id = sr.asset_id AND ${assetScopeCondition(params, scope)}`;
  const bucketOf = `date_bin(${width}::interval, sr.created_at, TIMESTAMPTZ '2000-01-03 00:00:00+00')`;
  const aggregated = `SELECT ${bucketOf} AS bucket${fleet ? '' : ', a.id AS asset_id'},
         count(*) AS total_count,
         count(*) FILTER (WHERE sr.status IN (${OPEN_STATUSES.map((status) => `'${status}'`).join(', ')})) AS open_count,
         count(*) FILTER (WHERE sr.status = 'resolved') AS resolved_count,
         count(*) FILTER (WHERE sr.status = 'closed') AS closed_count,
         count(*) FILTER (WHERE sr.priority = 'high') AS high_count,
         count(*) FILTER (WHERE sr.priority = 'urgent') AS urgent_count
    FROM service_requests sr
    ${assetJoin}
   WHERE ${conditions.join(' AND ')}
   GROUP BY 1${fleet ? '' : ', 2'}`;
  const bucketColumns: Column[] = [
    { name: 'bucketStart', sql: 'b.bucket', type: 'time' },
    { name: 'bucketEnd', sql: `b.bucket + ${width}::interval`, type: 'time' },
    { name: 'groupType', sql: fleet ? `'fleet'` : `'asset'`, type: 'text' },
  ];
  if (fleet) {
    return {
      tag: 'serviceRequestMetricsFleet',
      columns: [...bucketColumns, ...counts],
      body: `FROM generate_series(${from}, ${to} - interval '1 microsecond', ${width}::interval) AS b(bucket)
LEFT JOIN (${aggregated}) c ON c.bucket = b.bucket`,
      orderBy: 'b.bucket',
      params,
    };
  }
  return {
    tag: 'serviceRequestMetricsByAsset',
    columns: [...bucketColumns, ...assetRefColumns, ...counts],
    body: `FROM (${aggregated}) c
CROSS JOIN LATERAL (SELECT c.bucket) b
LEFT JOIN assets a ON a.id = c.asset_id
LEFT JOIN asset_types t ON t.id = a.asset_type_id`,
    orderBy: 'b.bucket, c.asset_id NULLS LAST',
    params,
  };
}

export function toServiceRequestMetricItem(row: Row) {
  return {
    bucketStart: isoRequired(row.bucketStart as Date),
    bucketEnd: isoRequired(row.bucketEnd as Date),
    groupType: row.groupType as 'fleet' | 'asset',
    asset: row.assetId ? toAssetRef(row) : null,
    totalCount: row.totalCount as number,
    openCount: row.openCount as number,
    resolvedCount: row.resolvedCount as number,
    closedCount: row.closedCount as number,
    highPriorityCount: row.highPriorityCount as number,
    urgentPriorityCount: row.urgentPriorityCount as number,
  };
}

export async function listServiceRequestMetrics(
  db: Queryable,
  scope: TelemetryScope,
  query: ServiceRequestMetricQuery,
  limit: number,
  offset: number,
) {
  const { text, values } = pageSql(serviceRequestMetricStatement(scope, query), limit, offset);
  return (await db.query(text, values)).rows.map(toServiceRequestMetricItem);
}
