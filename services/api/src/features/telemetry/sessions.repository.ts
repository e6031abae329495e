import type { Queryable } from '@gantry/db';
import { isoRequired } from '../../http/common-schemas.ts';
import {
  assetRefColumns,
  assetScopeCondition,
  containerWorkColumns,
  likePattern,
  pageSql,
  roundedFloat8,
  SqlParams,
  toAssetRef,
  toContainerWork,
  type Column,
  type ListStatement,
  type Row,
  type TelemetryScope,
} from './sql.ts';

export interface SessionFilter {
  from: Date;
  to: Date;
  assetId?: string | undefined;
  identifier?: string | undefined;
  q?: string | undefined;
}

/** An open session has no end reason yet; the API calls it "ongoing". */
const endReasonSql = (alias: string) => `coalesce(${alias}.end_reason, 'ongoing')`;

const sessionContainerWork = (alias: string) =>
  containerWorkColumns({
    cycles: `${alias}.container_cycle_count`,
    loadedSeconds: `${alias}.loaded_seconds`,
    emptySeconds: `${alias}.empty_seconds`,
    loadedDistance: `${alias}.loaded_distance_m`,
    emptyDistance: `${alias}.empty_distance_m`,
  });

const usageSessionColumns: Column[] = [
  { name: 'id', sql: 'us.id', type: 'text' },
  ...assetRefColumns,
  { name: 'deviceId', sql: "coalesce(d.device_id, '')", type: 'text' },
  { name: 'identifier', sql: "coalesce(us.identifier, '')", type: 'text' },
  { name: 'operatorName', sql: "coalesce(o.operator_name, '')", type: 'text' },
  { name: 'startReason', sql: 'us.start_reason', type: 'text' },
  { name: 'endReason', sql: endReasonSql('us'), type: 'text' },
  { name: 'startTs', sql: 'us.start_ts', type: 'time' },
  { name: 'endTs', sql: 'us.end_ts', type: 'time' },
  { name: 'confidence', sql: 'us.confidence', type: 'number' },
  { name: 'distanceM', sql: roundedFloat8('us.distance_m', 1), type: 'number' },
  { name: 'durationSeconds', sql: 'us.duration_seconds', type: 'int' },
  { name: 'movingSeconds', sql: 'us.moving_seconds', type: 'int' },
  { name: 'stationaryRunningSeconds', sql: 'us.stationary_running_seconds', type: 'int' },
  { name: 'stopCount', sql: 'us.stop_count', type: 'int' },
  { name: 'tripCount', sql: 'us.trip_count', type: 'int' },
  { name: 'imuAnomalyCount', sql: 'us.imu_anomaly_count', type: 'int' },
  { name: 'imuSampleCount', sql: 'us.imu_sample_count', type: 'int' },
  { name: 'hourmeterDelta', sql: 'round(us.hourmeter_delta)::bigint', type: 'int' },
  ...sessionContainerWork('us'),
];

const identifierSessionColumns: Column[] = [
  { name: 'id', sql: 'ids.id', type: 'text' },
  ...assetRefColumns,
  { name: 'deviceId', sql: "coalesce(d.device_id, '')", type: 'text' },
  { name: 'identifier', sql: 'ids.identifier', type: 'text' },
  { name: 'operatorName', sql: "coalesce(o.operator_name, '')", type: 'text' },
  { name: 'endReason', sql: endReasonSql('ids'), type: 'text' },
  { name: 'startTs', sql: 'ids.start_ts', type: 'time' },
  { name: 'endTs', sql: 'ids.end_ts', type: 'time' },
  { name: 'confidence', sql: 'ids.confidence', type: 'number' },
  { name: 'distanceM', sql: roundedFloat8('ids.distance_m', 1), type: 'number' },
  { name: 'durationSeconds', sql: 'ids.duration_seconds', type: 'int' },
  { name: 'eventCount', sql: 'ids.event_count', type: 'int' },
  { name: 'gpsPointCount', sql: 'ids.gps_point_count', type: 'int' },
  { name: 'stopCount', sql: 'ids.stop_count', type: 'int' },
  { name: 'tripCount', sql: 'ids.trip_count', type: 'int' },
  ...sessionContainerWork('ids'),
];

/**
 * A session list: tenant (for the index), asset scope, and overlap with [from, to) — a
 * session that began before `from` but ran into the range is included. Without a text
 * search the page is picked from the session table alone and only its rows are joined.
 * One asset's list leads with the asset instead of the tenant (the asset scope still
 * holds it to the key's tenant), so its (asset_id, start_ts DESC, id DESC) index is the
 * only one that fits, whatever the statistics say, and gives the rows in page order.
 */
function sessionStatement(
  table: 'usage_sessions' | 'identifier_sessions',
  alias: string,
  tag: string,
  columns: Column[],
  scope: TelemetryScope,
  filter: SessionFilter,
): ListStatement {
  const params = new SqlParams();
  const own = [
    filter.assetId
      ? `${alias}.asset_id = ${params.add(filter.assetId, 'uuid')}`
      : `${alias}.tenant_id = ${params.add(scope.tenantId, 'uuid')}`,
    `${alias}.asset_id IN (SELECT a.id FROM assets a WHERE ${assetScopeCondition(params, scope)})`,
    `${alias}.start_ts < ${params.add(filter.to, 'timestamptz')}`,
    `${alias}.end_ts > ${params.add(filter.from, 'timestamptz')}`,
  ];
  if (filter.identifier) own.push(`${alias}.identifier = ${params.add(filter.identifier, 'text')}`);
  const joins = `JOIN assets a ON a.id = ${alias}.asset_id
LEFT JOIN asset_types t ON t.id = a.asset_type_id
LEFT JOIN devices d ON d.id = ${alias}.device_id
LEFT JOIN operators o ON o.tenant_id = ${alias}.tenant_id AND o.identifier = ${alias}.identifier`;
  const search: string[] = [];
  if (filter.q) {
    const pattern = params.add(likePattern(filter.q), 'text');
    search.push(
      `(a.search_text LIKE ${pattern} OR lower(d.device_id) LIKE ${pattern} OR lower(coalesce(${alias}.identifier, '')) LIKE ${pattern}
        OR lower(coalesce(o.operator_name, '')) LIKE ${pattern})`,
    );
  }
  return {
    tag,
    columns,
    body: `FROM ${table} ${alias}\n${joins}\nWHERE ${[...own, ...search].join('\n  AND ')}`,
    orderBy: `${alias}.start_ts DESC, ${alias}.id DESC`,
    params,
    ...(filter.q
      ? {}
      : { deferred: { inner: `SELECT ${alias}.* FROM ${table} ${alias} WHERE ${own.join(' AND ')}`, alias, joins } }),
  };
}

export function usageSessionStatement(scope: TelemetryScope, filter: SessionFilter): ListStatement {
  return sessionStatement('usage_sessions', 'us', 'listUsageSessions', usageSessionColumns, scope, filter);
}

export function identifierSessionStatement(scope: TelemetryScope, filter: SessionFilter): ListStatement {
  return sessionStatement(
    'identifier_sessions',
    'ids',
    'listIdentifierSessions',
    identifierSessionColumns,
    scope,
    filter,
  );
}

export function toUsageSession(row: Row) {
  return {
    id: row.id as string,
    assetId: row.assetId as string,
    asset: toAssetRef(row),
    deviceId: row.deviceId as string,
    identifier: row.identifier as string,
    operatorName: row.operatorName as string,
    startReason: row.startReason as string,
    endReason: row.endReason as string,
    startTs: isoRequired(row.startTs as Date),
    endTs: isoRequired(row.endTs as Date),
    confidence: row.confidence as number,
    distanceM: row.distanceM as number,
    durationSeconds: row.durationSeconds as number,
    movingSeconds: row.movingSeconds as number,
    stationaryRunningSeconds: row.stationaryRunningSeconds as number,
    stopCount: row.stopCount as number,
    tripCount: row.tripCount as number,
    imuAnomalyCount: row.imuAnomalyCount as number,
    imuSampleCount: row.imuSampleCount as number,
    hourmeterDelta: (row.hourmeterDelta as number | null) ?? null,
    containerWork: toContainerWork(row),
  };
}

export function toIdentifierSession(row: Row) {
  return {
    id: row.id as string,
    assetId: row.assetId as string,
    asset: toAssetRef(row),
    identifier: row.identifier as string,
    operatorName: row.operatorName as string,
    endReason: row.endReason as string,
    startTs: isoRequired(row.startTs as Date),
    endTs: isoRequired(row.endTs as Date),
    confidence: row.confidence as number,
    distanceM: row.distanceM as number,
    durationSeconds: row.durationSeconds as number,
    eventCount: row.eventCount as number,
    gpsPointCount: row.gpsPointCount as number,
    stopCount: row.stopCount as number,
    tripCount: row.tripCount as number,
    containerWork: toContainerWork(row),
  };
}

export async function listUsageSessions(
  db: Queryable,
  scope: TelemetryScope,
  filter: SessionFilter,
  limit: number,
  offset: number,
) {
  const { text, values } = pageSql(usageSessionStatement(scope, filter), limit, offset);
  return (await db.query(text, values)).rows.map(toUsageSession);
}

export async function listIdentifierSessions(
  db: Queryable,
  scope: TelemetryScope,
  filter: SessionFilter,
  limit: number,
  offset: number,
) {
  const { text, values } = pageSql(identifierSessionStatement(scope, filter), limit, offset);
  return (await db.query(text, values)).rows.map(toIdentifierSession);
}
