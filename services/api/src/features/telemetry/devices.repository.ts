import type { Queryable } from '@gantry/db';
import { iso } from '../../http/common-schemas.ts';
import { bboxCondition, type Bbox } from './device-map/bbox.ts';
import type { TelemetryDeviceBody } from './schemas.ts';
import { adcStateSql, onlineStatusSql, workStateSql, type StatusRules } from './status.ts';
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

export interface DeviceFilter {
  assetId?: string | undefined;
  q?: string | undefined;
  status?: TelemetryDeviceBody['onlineStatus'] | undefined;
  enabled?: boolean | undefined;
  /** Only devices whose last position lies in the box. */
  bbox?: Bbox | undefined;
}

const deviceColumns = (rules: StatusRules): Column[] => [
  { name: 'id', sql: 'd.id', type: 'text' },
  { name: 'deviceId', sql: 'd.device_id', type: 'text' },
  { name: 'displayName', sql: 'd.display_name', type: 'text' },
  { name: 'notes', sql: 'd.notes', type: 'text' },
  { name: 'assetId', sql: 'a.id', type: 'text' },
  { name: 'assetName', sql: 'a.name', type: 'text' },
  { name: 'assetIdentifier', sql: 'a.identifier', type: 'text' },
  { name: 'assetDisplayCode', sql: 'a.display_code', type: 'text' },
  { name: 'enabled', sql: 'd.enabled', type: 'bool' },
  { name: 'onlineStatus', sql: onlineStatusSql(rules), type: 'text' },
  { name: 'adcState', sql: adcStateSql, type: 'text' },
  { name: 'workState', sql: workStateSql, type: 'text' },
  { name: 'containerAttached', sql: 's.adc_on', type: 'bool' },
  { name: 'spreaderLocked', sql: 's.adc_on', type: 'bool' },
  { name: 'hourmeterValue', sql: 's.hourmeter', type: 'int' },
  { name: 'latitude', sql: 's.latitude', type: 'number' },
  { name: 'longitude', sql: 's.longitude', type: 'number' },
  { name: 'lastIdentifier', sql: "coalesce(s.identifier, '')", type: 'text' },
  { name: 'lastMessageType', sql: "coalesce(s.last_message_type, '')", type: 'text' },
  { name: 'firstSeenAt', sql: 's.first_seen_at', type: 'time' },
  { name: 'lastMessageAt', sql: 's.last_message_at', type: 'time' },
  { name: 'lastSeenAt', sql: 's.last_seen_at', type: 'time' },
];

/**
 * The conditions on devices `d` (of assets `a`, with their state `s`) that the key's
 * scope and the filter put: the device list, its export and the map's clusters share them.
 */
export function deviceConditions(
  params: SqlParams,
  scope: TelemetryScope,
  filter: DeviceFilter,
  rules: StatusRules,
): string[] {
  // d.tenant_id lets the planner walk devices in device-id order; the asset condition applies the scope.
  const conditions = [`d.tenant_id = ${params.add(scope.tenantId, 'uuid')}`, assetScopeCondition(params, scope)];
  if (filter.assetId) conditions.push(`a.id = ${params.add(filter.assetId, 'uuid')}`);
  if (filter.enabled !== undefined) conditions.push(`d.enabled = ${params.add(filter.enabled, 'boolean')}`);
  if (filter.status) conditions.push(`(${onlineStatusSql(rules)}) = ${params.add(filter.status, 'text')}`);
  if (filter.q) {
    const pattern = params.add(likePattern(filter.q), 'text');
    conditions.push(
      `(lower(d.device_id) LIKE ${pattern} OR lower(d.display_name) LIKE ${pattern} OR a.search_text LIKE ${pattern})`,
    );
  }
  if (filter.bbox) conditions.push(bboxCondition(params, filter.bbox));
  return conditions;
}

/**
 * Devices of the assets in scope. A device without an asset (its asset was deleted) has
 * nothing to tell an integrator and is left out; the admin API still lists it.
 */
export function deviceListStatement(scope: TelemetryScope, filter: DeviceFilter, rules: StatusRules): ListStatement {
  const params = new SqlParams();
  const conditions = deviceConditions(params, scope, filter, rules);
  return {
    tag: 'listTelemetryDevices',
    columns: deviceColumns(rules),
    body: `FROM devices d
JOIN assets a ON a.id = d.asset_id
LEFT JOIN device_state s ON s.device_id = d.id
WHERE ${conditions.join(' AND ')}`,
    orderBy: 'd.device_id',
    params,
  };
}

export function toTelemetryDevice(row: Row): TelemetryDeviceBody {
  return {
    id: row.id as string,
    deviceId: row.deviceId as string,
    displayName: row.displayName as string,
    notes: row.notes as string,
    assetId: row.assetId as string,
    assetName: row.assetName as string,
    assetIdentifier: row.assetIdentifier as string,
    assetDisplayCode: row.assetDisplayCode as string,
    enabled: row.enabled as boolean,
    onlineStatus: row.onlineStatus as TelemetryDeviceBody['onlineStatus'],
    adcState: row.adcState as string,
    workState: row.workState as string,
    containerAttached: (row.containerAttached as boolean | null) ?? null,
    spreaderLocked: (row.spreaderLocked as boolean | null) ?? null,
    hourmeterValue: (row.hourmeterValue as number | null) ?? null,
    latitude: (row.latitude as number | null) ?? null,
    longitude: (row.longitude as number | null) ?? null,
    lastIdentifier: row.lastIdentifier as string,
    lastMessageType: row.lastMessageType as string,
    firstSeenAt: iso(row.firstSeenAt as Date | null),
    lastMessageAt: iso(row.lastMessageAt as Date | null),
    lastSeenAt: iso(row.lastSeenAt as Date | null),
  };
}

export async function listDevices(
  db: Queryable,
  scope: TelemetryScope,
  filter: DeviceFilter,
  rules: StatusRules,
  limit: number,
  offset: number,
) {
  const { text, values } = pageSql(deviceListStatement(scope, filter, rules), limit, offset);
  const { rows } = await db.query(text, values);
  return rows.map(toTelemetryDevice);
}

/** How many devices the filter matches over every page (one pass over the devices in scope). */
export async function countDevices(db: Queryable, scope: TelemetryScope, filter: DeviceFilter, rules: StatusRules) {
  const statement = deviceListStatement(scope, filter, rules);
  const { rows } = await db.query<{ total: number }>(
    `/* api:countTelemetryDevices */ SELECT count(*)::int AS total ${statement.body}`,
    statement.params.values,
  );
  return rows[0]!.total;
}
