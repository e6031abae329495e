import type { Queryable } from '@gantry/db';
import { iso } from '../../http/common-schemas.ts';
import {
  assetScopeCondition,
  likePattern,
  pageSql,
  SqlParams,
  type Column,
  type ListStatement,
  type Row,
  type TelemetryScope,
} from './sql.ts';

export interface OperatorFilter {
  from: Date;
  to: Date;
  assetId?: string | undefined;
  identifier?: string | undefined;
  q?: string | undefined;
}

const operatorColumns: Column[] = [
  { name: 'identifier', sql: 'op.identifier', type: 'text' },
  { name: 'operatorName', sql: 'op.operator_name', type: 'text' },
  { name: 'distanceM', sql: 'round(op.distance_m::numeric, 1)::float8', type: 'number' },
  { name: 'durationSeconds', sql: 'op.duration_seconds', type: 'int' },
  { name: 'sessionCount', sql: 'op.session_count', type: 'int' },
  { name: 'lastSeenAt', sql: 'op.last_seen_at', type: 'time' },
];

/**
 * Operators with their identifier sessions that overlap the range (whole sessions, as
 * the session list counts them), on the assets in scope. A tenant key also sees the
 * registered operators without a session in the range (zeros); a customer key and an
 * asset filter see only identifiers that worked on their assets.
 */
export function operatorStatement(scope: TelemetryScope, filter: OperatorFilter): ListStatement {
  const params = new SqlParams();
  const tenant = params.add(scope.tenantId, 'uuid');
  const sessionConditions = [
    `ids.tenant_id = ${tenant}`,
    assetScopeCondition(params, scope),
    `ids.start_ts < ${params.add(filter.to, 'timestamptz')}`,
    `ids.end_ts > ${params.add(filter.from, 'timestamptz')}`,
  ];
  if (filter.assetId) sessionConditions.push(`ids.asset_id = ${params.add(filter.assetId, 'uuid')}`);
  const includeIdle = scope.customerName === null && !filter.assetId;
  const outer: string[] = [];
  if (filter.identifier) outer.push(`op.identifier = ${params.add(filter.identifier, 'text')}`);
  if (filter.q) {
    const pattern = params.add(likePattern(filter.q), 'text');
    outer.push(`(lower(op.identifier) LIKE ${pattern} OR lower(op.operator_name) LIKE ${pattern})`);
  }
  return {
    tag: 'listTelemetryOperators',
    columns: operatorColumns,
    body: `FROM (
  SELECT coalesce(s.identifier, o.identifier) AS identifier,
         coalesce(o.operator_name, '') AS operator_name,
         coalesce(s.distance_m, 0) AS distance_m,
         coalesce(s.duration_seconds, 0) AS duration_seconds,
         coalesce(s.session_count, 0) AS session_count,
         s.last_seen_at
    FROM (
      SELECT ids.identifier, count(*) AS session_count, sum(ids.distance_m) AS distance_m,
             sum(ids.duration_seconds) AS duration_seconds, max(ids.end_ts) AS last_seen_at
        FROM identifier_sessions ids
        JOIN assets a ON a.id = ids.asset_id
       WHERE ${sessionConditions.join(' AND ')}
       GROUP BY ids.identifier
    ) s
    ${includeIdle ? 'FULL' : 'LEFT'} JOIN (SELECT identifier, operator_name FROM operators WHERE tenant_id = ${tenant}) o
      ON o.identifier = s.identifier
) op
WHERE ${outer.length > 0 ? outer.join(' AND ') : 'TRUE'}`,
    orderBy: 'op.identifier',
    params,
  };
}

export function toTelemetryOperator(row: Row) {
  return {
    identifier: row.identifier as string,
    operatorName: row.operatorName as string,
    distanceM: row.distanceM as number,
    durationSeconds: row.durationSeconds as number,
    sessionCount: row.sessionCount as number,
    lastSeenAt: iso(row.lastSeenAt as Date | null),
  };
}

export async function listOperators(
  db: Queryable,
  scope: TelemetryScope,
  filter: OperatorFilter,
  limit: number,
  offset: number,
) {
  const { text, values } = pageSql(operatorStatement(scope, filter), limit, offset);
  return (await db.query(text, values)).rows.map(toTelemetryOperator);
}
