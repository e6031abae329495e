import type { Queryable } from '@gantry/db';
import { iso } from '../../http/common-schemas.ts';
import type { TelemetryGeofenceAlertBody, TelemetryGeofenceBody } from './schemas.ts';
import {
  assetRefColumns,
  assetScopeCondition,
  likePattern,
  pageSql,
  SqlParams,
  toAssetRef,
  type Column,
  type ListStatement,
  type Row,
  type TelemetryScope,
} from './sql.ts';

export interface GeofenceFilter {
  q?: string | undefined;
  type?: 'allowed' | 'forbidden' | undefined;
  enabled?: boolean | undefined;
}

/** A geofence row with its two counts (`active_alert_count`, `asset_count`). */
export function toTelemetryGeofence(row: Row): TelemetryGeofenceBody {
  return {
    id: row.id as string,
    name: row.name as string,
    type: row.type as TelemetryGeofenceBody['type'],
    enabled: row.enabled as boolean,
    geometry: row.geometry as TelemetryGeofenceBody['geometry'],
    activeAlertCount: row.active_alert_count as number,
    assetCount: row.asset_count as number,
    createdAt: iso(row.created_at as Date),
    updatedAt: iso(row.updated_at as Date),
  };
}

/**
 * The tenant's geofences. Zones belong to the tenant, not to a customer, so a customer
 * key sees every zone (it needs their names to read its alerts), but the counts cover
 * only its own assets: active alerts and assets currently inside.
 */
export async function listGeofences(db: Queryable, scope: TelemetryScope, filter: GeofenceFilter) {
  const params = new SqlParams();
  const tenant = params.add(scope.tenantId, 'uuid');
  const assetScope = assetScopeCondition(params, scope);
  const conditions = [`g.tenant_id = ${tenant}`];
  if (filter.type) conditions.push(`g.type = ${params.add(filter.type, 'text')}`);
  if (filter.enabled !== undefined) conditions.push(`g.enabled = ${params.add(filter.enabled, 'boolean')}`);
  if (filter.q) conditions.push(`lower(g.name) LIKE ${params.add(likePattern(filter.q), 'text')}`);
  const { rows } = await db.query(
    `/* api:listTelemetryGeofences */
     SELECT g.id, g.name, g.type, g.enabled, g.geometry, g.created_at, g.updated_at,
            (SELECT count(*) FROM geofence_alerts ga JOIN assets a ON a.id = ga.asset_id
              WHERE ga.geofence_id = g.id AND ga.is_active AND ${assetScope}) AS active_alert_count,
            (SELECT count(*) FROM geofence_memberships m JOIN assets a ON a.id = m.asset_id
              WHERE m.geofence_id = g.id AND m.inside AND ${assetScope}) AS asset_count
       FROM geofences g
      WHERE ${conditions.join(' AND ')}
      ORDER BY g.name, g.id`,
    params.values,
  );
  return rows.map(toTelemetryGeofence);
}

export interface GeofenceAlertFilter {
  from: Date;
  to: Date;
  assetId?: string | undefined;
  geofenceId?: string | undefined;
  status?: 'open' | 'acknowledged' | undefined;
  active?: boolean | undefined;
  alertType?: string | undefined;
  q?: string | undefined;
}

const alertColumns: Column[] = [
  { name: 'id', sql: 'ga.id', type: 'text' },
  { name: 'geofenceId', sql: 'g.id', type: 'text' },
  { name: 'geofenceName', sql: 'g.name', type: 'text' },
  ...assetRefColumns,
  { name: 'alertType', sql: 'ga.alert_type', type: 'text' },
  { name: 'status', sql: 'ga.status', type: 'text' },
  { name: 'isActive', sql: 'ga.is_active', type: 'bool' },
  { name: 'createdAt', sql: 'ga.created_at', type: 'time' },
  { name: 'acknowledgedAt', sql: 'ga.acknowledged_at', type: 'time' },
  { name: 'resolvedAt', sql: 'ga.resolved_at', type: 'time' },
  { name: 'latitude', sql: 'ga.latitude', type: 'number' },
  { name: 'longitude', sql: 'ga.longitude', type: 'number' },
];

const alertJoins = `JOIN geofences g ON g.id = ga.geofence_id
JOIN assets a ON a.id = ga.asset_id
LEFT JOIN asset_types t ON t.id = a.asset_type_id`;

/**
 * Alerts whose active time overlaps [from, to): opened before `to` and not resolved
 * before `from` — an alert still active from last week shows in today's list, as a
 * session that began before `from` does.
 */
export function geofenceAlertStatement(scope: TelemetryScope, filter: GeofenceAlertFilter): ListStatement {
  const params = new SqlParams();
  const own = [
    `ga.tenant_id = ${params.add(scope.tenantId, 'uuid')}`,
    `ga.asset_id IN (SELECT a.id FROM assets a WHERE ${assetScopeCondition(params, scope)})`,
    `ga.created_at < ${params.add(filter.to, 'timestamptz')}`,
    `(ga.resolved_at IS NULL OR ga.resolved_at > ${params.add(filter.from, 'timestamptz')})`,
  ];
  if (filter.assetId) own.push(`ga.asset_id = ${params.add(filter.assetId, 'uuid')}`);
  if (filter.geofenceId) own.push(`ga.geofence_id = ${params.add(filter.geofenceId, 'uuid')}`);
  if (filter.status) own.push(`ga.status = ${params.add(filter.status, 'text')}`);
  if (filter.active !== undefined) own.push(`ga.is_active = ${params.add(filter.active, 'boolean')}`);
  if (filter.alertType) own.push(`ga.alert_type = ${params.add(filter.alertType, 'text')}`);
  const search: string[] = [];
  if (filter.q) {
    const pattern = params.add(likePattern(filter.q), 'text');
    search.push(`(a.search_text LIKE ${pattern} OR lower(g.name) LIKE ${pattern})`);
  }
  return {
    tag: 'listGeofenceAlerts',
    columns: alertColumns,
    body: `FROM geofence_alerts ga\n${alertJoins}\nWHERE ${[...own, ...search].join('\n  AND ')}`,
    orderBy: 'ga.created_at DESC, ga.id DESC',
    params,
    ...(filter.q
      ? {}
      : {
          deferred: {
            inner: `SELECT ga.* FROM geofence_alerts ga WHERE ${own.join(' AND ')}`,
            alias: 'ga',
            joins: alertJoins,
          },
        }),
  };
}

export function toGeofenceAlert(row: Row): TelemetryGeofenceAlertBody {
  return {
    id: row.id as string,
    geofenceId: row.geofenceId as string,
    geofenceName: row.geofenceName as string,
    assetId: row.assetId as string,
    asset: toAssetRef(row),
    alertType: row.alertType as string,
    status: row.status as 'open' | 'acknowledged',
    isActive: row.isActive as boolean,
    createdAt: iso(row.createdAt as Date | null),
    acknowledgedAt: iso(row.acknowledgedAt as Date | null),
    resolvedAt: iso(row.resolvedAt as Date | null),
  };
}

export async function listGeofenceAlerts(
  db: Queryable,
  scope: TelemetryScope,
  filter: GeofenceAlertFilter,
  limit: number,
  offset: number,
) {
  const { text, values } = pageSql(geofenceAlertStatement(scope, filter), limit, offset);
  return (await db.query(text, values)).rows.map(toGeofenceAlert);
}

/**
 * One alert in scope, locked for an update in the caller's transaction, with the position
 * of the transition that opened it; null when not visible.
 */
export async function lockGeofenceAlert(
  db: Queryable,
  scope: TelemetryScope,
  id: string,
): Promise<{ alert: TelemetryGeofenceAlertBody; latitude: number | null; longitude: number | null } | null> {
  const params = new SqlParams();
  const conditions = [
    `ga.id = ${params.add(id, 'uuid')}`,
    `ga.tenant_id = ${params.add(scope.tenantId, 'uuid')}`,
    assetScopeCondition(params, scope),
  ];
  const { rows } = await db.query(
    `/* api:lockGeofenceAlert */
     SELECT ${alertColumns.map((column) => `${column.sql} AS "${column.name}"`).join(', ')}
     FROM geofence_alerts ga
     ${alertJoins}
     WHERE ${conditions.join(' AND ')}
     FOR UPDATE OF ga`,
    params.values,
  );
  const row = rows[0] as Row | undefined;
  if (!row) return null;
  return {
    alert: toGeofenceAlert(row),
    latitude: (row.latitude as number | null) ?? null,
    longitude: (row.longitude as number | null) ?? null,
  };
}

export async function markGeofenceAlertAcknowledged(db: Queryable, id: string, acknowledgedBy: string): Promise<Date> {
  const { rows } = await db.query<{ acknowledged_at: Date }>(
    `/* api:acknowledgeGeofenceAlert */
     UPDATE geofence_alerts
        SET status = 'acknowledged', acknowledged_at = now(), acknowledged_by = $2, updated_at = now()
      WHERE id = $1
      RETURNING acknowledged_at`,
    [id, acknowledgedBy],
  );
  return (rows[0] as { acknowledged_at: Date }).acknowledged_at;
}
