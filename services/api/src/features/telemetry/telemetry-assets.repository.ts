import type { Queryable } from '@gantry/db';
import {
  assetRefColumns,
  assetScopeCondition,
  assetSearchCondition,
  selectList,
  SqlParams,
  toAssetRef,
  type Row,
  type TelemetryScope,
} from './sql.ts';

export type AssetRefBody = ReturnType<typeof toAssetRef>;

/**
 * The assets in scope that have at least one telemetry device, with their AssetRef: the
 * fleet that utilization and container work are measured over (an asset without a
 * device has no utilization to report and does not dilute the fleet's percentages).
 */
export async function listTelemetryAssets(
  db: Queryable,
  scope: TelemetryScope,
  assetId?: string,
  q?: string,
): Promise<AssetRefBody[]> {
  const params = new SqlParams();
  const conditions = [assetScopeCondition(params, scope), 'EXISTS (SELECT 1 FROM devices d WHERE d.asset_id = a.id)'];
  if (assetId) conditions.push(`a.id = ${params.add(assetId, 'uuid')}`);
  if (q) conditions.push(assetSearchCondition(params, q));
  const { rows } = await db.query(
    `/* api:listTelemetryAssets */
     SELECT ${selectList(assetRefColumns)}
       FROM assets a LEFT JOIN asset_types t ON t.id = a.asset_type_id
      WHERE ${conditions.join(' AND ')}
      ORDER BY a.id`,
    params.values,
  );
  return rows.map((row: Row) => toAssetRef(row));
}

/** The AssetRef of each of these assets (ids the caller already read within the key's scope). */
export async function assetRefs(db: Queryable, ids: string[]): Promise<AssetRefBody[]> {
  if (ids.length === 0) return [];
  const { rows } = await db.query(
    `/* api:assetRefs */
     SELECT ${selectList(assetRefColumns)}
       FROM assets a LEFT JOIN asset_types t ON t.id = a.asset_type_id
      WHERE a.id = ANY ($1::uuid[])`,
    [ids],
  );
  return rows.map((row: Row) => toAssetRef(row));
}
