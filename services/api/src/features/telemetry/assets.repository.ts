import type { Queryable } from '@gantry/db';
import { NotFoundError } from '../../errors.ts';
import {
  assetRefColumns,
  assetScopeCondition,
  selectList,
  SqlParams,
  toAssetRef,
  type Row,
  type TelemetryScope,
} from './sql.ts';

/**
 * The AssetRef of an asset the key may see; 404 otherwise, whether the asset is in
 * another tenant, belongs to another customer or does not exist (no existence leak).
 */
export async function visibleAsset(db: Queryable, scope: TelemetryScope, assetId: string) {
  const params = new SqlParams();
  const condition = `a.id = ${params.add(assetId, 'uuid')} AND ${assetScopeCondition(params, scope)}`;
  const { rows } = await db.query(
    `/* api:visibleTelemetryAsset */
     SELECT ${selectList(assetRefColumns)}
       FROM assets a LEFT JOIN asset_types t ON t.id = a.asset_type_id
      WHERE ${condition}`,
    params.values,
  );
  if (!rows[0]) throw new NotFoundError(`asset ${assetId} not found`);
  return toAssetRef(rows[0] as Row);
}

/** For list filters: an assetId the key may not see is a 404, not an empty page. */
export async function assertAssetFilterVisible(
  db: Queryable,
  scope: TelemetryScope,
  assetId: string | undefined,
): Promise<void> {
  if (assetId !== undefined) await visibleAsset(db, scope, assetId);
}
