import type { Queryable } from '@gantry/db';
import { isoRequired } from '../../http/common-schemas.ts';
import type { Resolution } from './params.ts';
import {
  assetScopeCondition,
  pageSql,
  SqlParams,
  type Column,
  type ListStatement,
  type Row,
  type TelemetryScope,
} from './sql.ts';

const RELATION: Record<Resolution, string> = { '1min': 'positions_1min', '15min': 'positions_15min' };

/** Up to a day of history is shown per minute, longer ranges per quarter hour. */
export function autoResolution(from: Date, to: Date): Resolution {
  return to.getTime() - from.getTime() <= 86_400_000 ? '1min' : '15min';
}

const positionColumns: Column[] = [
  { name: 'assetId', sql: 'a.id', type: 'text' },
  { name: 'assetName', sql: 'a.name', type: 'text' },
  { name: 'bucketTs', sql: 'p.bucket', type: 'time' },
  { name: 'lastEventTs', sql: 'p.last_event_ts', type: 'time' },
  { name: 'latitude', sql: 'p.latitude', type: 'number' },
  { name: 'longitude', sql: 'p.longitude', type: 'number' },
  { name: 'pointCount', sql: 'p.point_count', type: 'int' },
];

export interface PositionQuery {
  assetId: string;
  from: Date;
  to: Date;
  resolution: Resolution;
}

/**
 * Position buckets whose start lies in [from, to), oldest first, read from the gold
 * relation of the resolution only: position history is never computed live. In
 * PostgreSQL mode ingest adds each batch's fixes to gold in the batch's own transaction,
 * so the newest minutes are there with the readings; in TimescaleDB mode they appear once
 * the worker has refreshed the continuous aggregates over them.
 */
export function positionStatement(scope: TelemetryScope, query: PositionQuery): ListStatement {
  const params = new SqlParams();
  // The relation is read by its key (asset_id, bucket) alone: the asset's join below
  // holds it to the key's tenant. A tenant condition on the relation would offer the
  // planner its (tenant_id, bucket) index, which it takes when the relation has no
  // statistics yet (a bulk upload not yet analysed), reading the whole tenant's range.
  const conditions = [
    `p.asset_id = ${params.add(query.assetId, 'uuid')}`,
    `p.bucket >= ${params.add(query.from, 'timestamptz')}`,
    `p.bucket < ${params.add(query.to, 'timestamptz')}`,
    assetScopeCondition(params, scope),
  ];
  return {
    tag: 'listTelemetryPositions',
    columns: positionColumns,
    body: `FROM ${RELATION[query.resolution]} p
JOIN assets a ON a.id = p.asset_id
WHERE ${conditions.join(' AND ')}`,
    orderBy: 'p.bucket',
    params,
  };
}

export function toTelemetryPosition(row: Row) {
  return {
    bucketTs: isoRequired(row.bucketTs as Date),
    lastEventTs: isoRequired(row.lastEventTs as Date),
    latitude: row.latitude as number,
    longitude: row.longitude as number,
    pointCount: row.pointCount as number,
  };
}

export async function listPositions(
  db: Queryable,
  scope: TelemetryScope,
  query: PositionQuery,
  limit: number,
  offset: number,
) {
  const { text, values } = pageSql(positionStatement(scope, query), limit, offset);
  return (await db.query(text, values)).rows.map(toTelemetryPosition);
}
