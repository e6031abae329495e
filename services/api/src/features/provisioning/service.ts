import { geometryBbox } from '@gantry/contracts';
import { withTransaction, type Outbox, type Pool, type Queryable } from '@gantry/db';
import { ConflictError, NotFoundError, ValidationError } from '../../errors.ts';
import { generateApiKey } from '../../http/auth.ts';
import { iso } from '../../http/common-schemas.ts';
import {
  findAsset,
  findInspection,
  findReport,
  toReportingAssetType,
  toReportingTemplate,
  type ReportingScope,
} from '../reporting/repository.ts';
import { toTelemetryGeofence } from '../telemetry/geofences.repository.ts';
import type {
  ApiKeyCreate,
  AssetCreate,
  AssetTypeCreate,
  DeviceCreate,
  DeviceUpdate,
  GeofenceCreate,
  GeofenceUpdate,
  InspectionCreate,
  OperatorCreate,
  ReportCreate,
  TemplateCreate,
  TenantCreate,
} from './schemas.ts';

/**
 * The back office: creates what the external API reads. Used by the admin API and the
 * `gantry` CLI alike. Every function takes plain objects and returns the created object;
 * a resource the external API also shows is read back through the external API's own
 * query and row mapper, so both APIs answer it alike.
 */
export interface ProvisioningDeps {
  pool: Pool;
  outbox: Outbox;
}

type Row = Record<string, unknown>;

function uniqueViolation(error: unknown, constraint?: string): boolean {
  const pgError = error as { code?: string; constraint?: string };
  return pgError.code === '23505' && (constraint === undefined || pgError.constraint === constraint);
}

async function assertTenant(db: Queryable, tenantId: string): Promise<void> {
  const { rowCount } = await db.query('SELECT 1 FROM tenants WHERE id = $1', [tenantId]);
  if (rowCount === 0) throw new NotFoundError(`tenant ${tenantId} not found`);
}

async function rememberCustomer(db: Queryable, tenantId: string, name: string | null | undefined): Promise<void> {
  if (!name) return;
  await db.query(`INSERT INTO customers (tenant_id, name) VALUES ($1, $2) ON CONFLICT DO NOTHING`, [tenantId, name]);
}

// Tenants and keys -----------------------------------------------------------------

export function toTenant(row: Row) {
  return { id: row.id as string, name: row.name as string, createdAt: iso(row.created_at as Date) };
}

export async function createTenant(deps: ProvisioningDeps, input: TenantCreate) {
  const { rows } = await deps.pool.query(
    `/* admin:createTenant */ INSERT INTO tenants (name) VALUES ($1) RETURNING id, name, created_at`,
    [input.name],
  );
  return toTenant(rows[0] as Row);
}

export async function listTenants(deps: ProvisioningDeps) {
  const { rows } = await deps.pool.query(
    `/* admin:listTenants */ SELECT id, name, created_at FROM tenants ORDER BY created_at, id`,
  );
  return rows.map(toTenant);
}

export function toApiKey(row: Row) {
  const customerName = (row.customer_name as string | null) ?? null;
  return {
    id: row.id as string,
    name: row.name as string,
    customerName,
    customerScoped: customerName !== null,
    enabled: row.enabled as boolean,
    createdAt: iso(row.created_at as Date),
    disabledAt: iso(row.disabled_at as Date | null),
    lastUsedAt: iso(row.last_used_at as Date | null),
  };
}

/** Creates a key; the clear key is in the answer once and never stored. */
export async function createApiKey(deps: ProvisioningDeps, tenantId: string, input: ApiKeyCreate) {
  await assertTenant(deps.pool, tenantId);
  const generated = generateApiKey();
  const row = await withTransaction(deps.pool, async (client) => {
    await rememberCustomer(client, tenantId, input.customerName);
    const { rows } = await client.query(
      `/* admin:createApiKey */
       INSERT INTO api_keys (tenant_id, name, customer_name, key_prefix, key_hash)
       VALUES ($1, $2, $3, $4, $5)
       RETURNING id, name, customer_name, enabled, created_at, disabled_at, last_used_at`,
      [tenantId, input.name, input.customerName ?? null, generated.prefix, generated.hash],
    );
    return rows[0] as Row;
  });
  return { ...toApiKey(row), key: generated.key };
}

export async function listApiKeys(deps: ProvisioningDeps, tenantId: string) {
  await assertTenant(deps.pool, tenantId);
  const { rows } = await deps.pool.query(
    `/* admin:listApiKeys */
     SELECT id, name, customer_name, enabled, created_at, disabled_at, last_used_at
       FROM api_keys WHERE tenant_id = $1 ORDER BY created_at, id`,
    [tenantId],
  );
  return rows.map(toApiKey);
}

export async function disableApiKey(deps: ProvisioningDeps, tenantId: string, keyId: string) {
  const { rows } = await deps.pool.query(
    `/* admin:disableApiKey */
     UPDATE api_keys SET enabled = false, disabled_at = coalesce(disabled_at, now())
      WHERE tenant_id = $1 AND id = $2
      RETURNING id, name, customer_name, enabled, created_at, disabled_at, last_used_at`,
    [tenantId, keyId],
  );
  if (rows.length === 0) throw new NotFoundError(`api key ${keyId} not found`);
  return toApiKey(rows[0] as Row);
}

/** The admin API sees a whole tenant, as a tenant-wide key does. */
function tenantScope(tenantId: string): ReportingScope {
  return { tenantId, customerName: null };
}

// Reporting master data ----------------------------------------------------------------

export async function createAssetType(deps: ProvisioningDeps, tenantId: string, input: AssetTypeCreate) {
  await assertTenant(deps.pool, tenantId);
  try {
    const { rows } = await deps.pool.query(
      `/* admin:createAssetType */
       INSERT INTO asset_types (tenant_id, name, description, fields) VALUES ($1, $2, $3, $4)
       RETURNING id, name, description, fields, created_at, updated_at, 0 AS asset_count`,
      [tenantId, input.name, input.description ?? '', JSON.stringify(input.fields ?? {})],
    );
    return toReportingAssetType(rows[0] as Row);
  } catch (error) {
    if (uniqueViolation(error)) throw new ConflictError(`asset type "${input.name}" already exists`, 'duplicate');
    throw error;
  }
}

async function resolveAssetTypeId(db: Queryable, tenantId: string, input: AssetCreate): Promise<string | null> {
  if (input.assetTypeId) {
    const { rowCount } = await db.query('SELECT 1 FROM asset_types WHERE tenant_id = $1 AND id = $2', [
      tenantId,
      input.assetTypeId,
    ]);
    if (rowCount === 0)
      throw new ValidationError(
        `invalid body field assetTypeId: no asset type ${input.assetTypeId} in this tenant`,
        'invalid_body',
      );
    return input.assetTypeId;
  }
  if (input.assetType) {
    const { rows } = await db.query<{ id: string }>('SELECT id FROM asset_types WHERE tenant_id = $1 AND name = $2', [
      tenantId,
      input.assetType,
    ]);
    if (!rows[0])
      throw new ValidationError(
        `invalid body field assetType: no asset type named "${input.assetType}" in this tenant`,
        'invalid_body',
      );
    return rows[0].id;
  }
  return null;
}

export async function createAsset(deps: ProvisioningDeps, tenantId: string, input: AssetCreate) {
  await assertTenant(deps.pool, tenantId);
  return withTransaction(deps.pool, async (client) => {
    const assetTypeId = await resolveAssetTypeId(client, tenantId, input);
    await rememberCustomer(client, tenantId, input.customerName);
    let id: string;
    try {
      const { rows } = await client.query<{ id: string }>(
        `/* admin:createAsset */
         INSERT INTO assets (tenant_id, asset_type_id, name, identifier, display_code, location, customer_name,
           customer_email, customer_phone, lifecycle_status, operational_status, external_ref)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, coalesce($10, 'active'), coalesce($11, 'operational'), $12)
         RETURNING id`,
        [
          tenantId,
          assetTypeId,
          input.name,
          input.identifier,
          input.displayCode ?? input.identifier,
          input.location ?? '',
          input.customerName ?? '',
          input.customerEmail ?? '',
          input.customerPhone ?? '',
          input.lifecycleStatus ?? null,
          input.operationalStatus ?? input.status ?? null,
          input.externalRef ?? '',
        ],
      );
      id = (rows[0] as { id: string }).id;
    } catch (error) {
      if (uniqueViolation(error))
        throw new ConflictError(`an asset with identifier "${input.identifier}" already exists`, 'duplicate');
      throw error;
    }
    return readBack(await findAsset(client, tenantScope(tenantId), id), 'asset', id);
  });
}

/** The object just written, as the external API reads it. */
function readBack<T>(found: T | null, kind: string, id: string): T {
  if (found === null) throw new Error(`${kind} ${id} written but not found`);
  return found;
}

export async function createTemplate(deps: ProvisioningDeps, tenantId: string, input: TemplateCreate) {
  await assertTenant(deps.pool, tenantId);
  const typeIds = input.assetTypeIds ?? [];
  if (typeIds.length > 0) {
    const { rows } = await deps.pool.query<{ count: number }>(
      'SELECT count(*)::int AS count FROM asset_types WHERE tenant_id = $1 AND id = ANY($2::uuid[])',
      [tenantId, typeIds],
    );
    if ((rows[0]?.count ?? 0) !== new Set(typeIds).size) {
      throw new ValidationError(
        'invalid body field assetTypeIds: every id must be an asset type of this tenant',
        'invalid_body',
      );
    }
  }
  const { rows } = await deps.pool.query(
    `/* admin:createTemplate */
     INSERT INTO templates (tenant_id, name, description, status, latest_version, asset_type_ids)
     VALUES ($1, $2, $3, coalesce($4, 'active'), coalesce($5, 1), $6)
     RETURNING id, name, description, status, latest_version, asset_type_ids, created_at, updated_at`,
    [tenantId, input.name, input.description ?? '', input.status ?? null, input.latestVersion ?? null, typeIds],
  );
  return toReportingTemplate(rows[0] as Row);
}

// Inspections and reports ----------------------------------------------------------------

async function assetForWrite(db: Queryable, tenantId: string, assetId: string) {
  const { rows } = await db.query<{ id: string; name: string; identifier: string; customer_name: string }>(
    'SELECT id, name, identifier, customer_name FROM assets WHERE tenant_id = $1 AND id = $2',
    [tenantId, assetId],
  );
  if (!rows[0])
    throw new ValidationError(`invalid body field assetId: no asset ${assetId} in this tenant`, 'invalid_body');
  return rows[0];
}

/** Creates an inspection; a completed one raises inspection.completed. */
export async function createInspection(deps: ProvisioningDeps, tenantId: string, input: InspectionCreate) {
  await assertTenant(deps.pool, tenantId);
  return withTransaction(deps.pool, async (client) => {
    const asset = await assetForWrite(client, tenantId, input.assetId);
    if (input.templateId) {
      const { rowCount } = await client.query('SELECT 1 FROM templates WHERE tenant_id = $1 AND id = $2', [
        tenantId,
        input.templateId,
      ]);
      if (rowCount === 0)
        throw new ValidationError(
          `invalid body field templateId: no template ${input.templateId} in this tenant`,
          'invalid_body',
        );
    }
    const status = input.status ?? 'completed';
    const completedAt = input.completedAt ?? (status === 'completed' ? new Date().toISOString() : null);
    const { rows } = await client.query(
      `/* admin:createInspection */
       INSERT INTO inspections (tenant_id, asset_id, template_id, template_version, status, started_at, completed_at,
         inspector_name, operator_identifier, external_ref, notes, media, created_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, coalesce($7, $6, now()))
       RETURNING id, template_id, started_at, completed_at`,
      [
        tenantId,
        asset.id,
        input.templateId ?? null,
        input.templateVersion ?? null,
        status,
        input.startedAt ?? completedAt,
        completedAt,
        input.inspectorName ?? '',
        input.operatorIdentifier ?? '',
        input.externalRef ?? '',
        input.notes ?? '',
        JSON.stringify(input.media ?? {}),
      ],
    );
    const row = rows[0] as Row;
    const id = row.id as string;
    if (status === 'completed') {
      await deps.outbox.enqueue(client, {
        tenantId,
        event: 'inspection.completed',
        entityType: 'inspection',
        entityId: id,
        customerName: asset.customer_name || null,
        data: {
          id,
          assetId: asset.id,
          assetName: asset.name,
          assetIdentifier: asset.identifier,
          customerName: asset.customer_name,
          templateId: (row.template_id as string | null) ?? null,
          status,
          startedAt: iso(row.started_at as Date | null),
          completedAt: iso(row.completed_at as Date | null),
        },
      });
    }
    return readBack(await findInspection(client, tenantScope(tenantId), id), 'inspection', id);
  });
}

/** Creates the report of an inspection; raises report.created. */
export async function createReport(deps: ProvisioningDeps, tenantId: string, input: ReportCreate) {
  await assertTenant(deps.pool, tenantId);
  return withTransaction(deps.pool, async (client) => {
    const { rows: inspections } = await client.query<{
      id: string;
      asset_id: string;
      template_id: string | null;
      customer_name: string;
      asset_name: string;
    }>(
      `SELECT i.id, i.asset_id, i.template_id, a.customer_name, a.name AS asset_name
         FROM inspections i JOIN assets a ON a.id = i.asset_id
        WHERE i.tenant_id = $1 AND i.id = $2`,
      [tenantId, input.inspectionId],
    );
    const inspection = inspections[0];
    if (!inspection)
      throw new ValidationError(
        `invalid body field inspectionId: no inspection ${input.inspectionId} in this tenant`,
        'invalid_body',
      );
    const outcome = input.outcome ?? 'completed';
    const { rows } = await client.query(
      `/* admin:createReport */
       INSERT INTO reports (tenant_id, inspection_id, asset_id, template_id, status, impact, outcome, rejection_reason,
         summary, external_ref, media, created_at)
       VALUES ($1, $2, $3, $4, coalesce($5, 'final'), coalesce($6, 'none'), $7, $8, $9, $10, $11, coalesce($12, now()))
       RETURNING id, impact, outcome, rejection_reason, created_at`,
      [
        tenantId,
        inspection.id,
        inspection.asset_id,
        inspection.template_id,
        input.status ?? null,
        input.impact ?? null,
        outcome,
        input.rejectionReason ?? '',
        input.summary ?? '',
        input.externalRef ?? '',
        JSON.stringify(input.media ?? {}),
        input.createdAt ?? null,
      ],
    );
    const row = rows[0] as Row;
    const id = row.id as string;
    await deps.outbox.enqueue(client, {
      tenantId,
      event: 'report.created',
      entityType: 'report',
      entityId: id,
      customerName: inspection.customer_name || null,
      data: {
        id,
        inspectionId: inspection.id,
        assetId: inspection.asset_id,
        assetName: inspection.asset_name,
        customerName: inspection.customer_name,
        impact: row.impact as string,
        outcome: row.outcome as string,
        rejectionReason: row.rejection_reason as string,
        createdAt: iso(row.created_at as Date),
      },
    });
    return readBack(await findReport(client, tenantScope(tenantId), id), 'report', id);
  });
}

// Telemetry master data -----------------------------------------------------------------

export function toDevice(row: Row) {
  return {
    id: row.id as string,
    deviceId: row.device_id as string,
    assetId: (row.asset_id as string | null) ?? null,
    displayName: row.display_name as string,
    notes: row.notes as string,
    enabled: row.enabled as boolean,
    createdAt: iso(row.created_at as Date),
    updatedAt: iso(row.updated_at as Date),
  };
}

export async function createDevice(deps: ProvisioningDeps, tenantId: string, input: DeviceCreate) {
  await assertTenant(deps.pool, tenantId);
  await assetForWrite(deps.pool, tenantId, input.assetId);
  try {
    const { rows } = await deps.pool.query(
      `/* admin:createDevice */
       INSERT INTO devices (tenant_id, device_id, asset_id, display_name, notes, enabled)
       VALUES ($1, $2, $3, $4, $5, coalesce($6, true)) RETURNING *`,
      [tenantId, input.deviceId, input.assetId, input.displayName ?? '', input.notes ?? '', input.enabled ?? null],
    );
    return toDevice(rows[0] as Row);
  } catch (error) {
    if (uniqueViolation(error))
      throw new ConflictError(`device id "${input.deviceId}" is already registered`, 'duplicate');
    throw error;
  }
}

export async function updateDevice(deps: ProvisioningDeps, tenantId: string, id: string, input: DeviceUpdate) {
  if (input.assetId) await assetForWrite(deps.pool, tenantId, input.assetId);
  const { rows } = await deps.pool.query(
    `/* admin:updateDevice */
     UPDATE devices SET
       asset_id = coalesce($3, asset_id),
       display_name = coalesce($4, display_name),
       notes = coalesce($5, notes),
       enabled = coalesce($6, enabled),
       updated_at = now()
     WHERE tenant_id = $1 AND id = $2 RETURNING *`,
    [tenantId, id, input.assetId ?? null, input.displayName ?? null, input.notes ?? null, input.enabled ?? null],
  );
  if (!rows[0]) throw new NotFoundError(`device ${id} not found`);
  return toDevice(rows[0] as Row);
}

export function toOperator(row: Row) {
  return {
    id: row.id as string,
    identifier: row.identifier as string,
    operatorName: row.operator_name as string,
    createdAt: iso(row.created_at as Date),
  };
}

export async function createOperator(deps: ProvisioningDeps, tenantId: string, input: OperatorCreate) {
  await assertTenant(deps.pool, tenantId);
  try {
    const { rows } = await deps.pool.query(
      `/* admin:createOperator */
       INSERT INTO operators (tenant_id, identifier, operator_name) VALUES ($1, $2, $3) RETURNING *`,
      [tenantId, input.identifier, input.operatorName],
    );
    return toOperator(rows[0] as Row);
  } catch (error) {
    if (uniqueViolation(error)) throw new ConflictError(`operator "${input.identifier}" already exists`, 'duplicate');
    throw error;
  }
}

// The counts of a geofence as a tenant-wide key sees them in the external API.
const geofenceCounts = `(SELECT count(*) FROM geofence_alerts ga JOIN assets a ON a.id = ga.asset_id
     WHERE ga.geofence_id = geofences.id AND ga.is_active) AS active_alert_count,
  (SELECT count(*) FROM geofence_memberships m JOIN assets a ON a.id = m.asset_id
     WHERE m.geofence_id = geofences.id AND m.inside) AS asset_count`;

export async function createGeofence(deps: ProvisioningDeps, tenantId: string, input: GeofenceCreate) {
  await assertTenant(deps.pool, tenantId);
  const { rows } = await deps.pool.query(
    `/* admin:createGeofence */
     INSERT INTO geofences (tenant_id, name, type, enabled, geometry, bbox)
     VALUES ($1, $2, $3, coalesce($4, true), $5, $6) RETURNING *, ${geofenceCounts}`,
    [
      tenantId,
      input.name,
      input.type,
      input.enabled ?? null,
      JSON.stringify(input.geometry),
      geometryBbox(input.geometry),
    ],
  );
  return toTelemetryGeofence(rows[0] as Row);
}

export async function updateGeofence(deps: ProvisioningDeps, tenantId: string, id: string, input: GeofenceUpdate) {
  const { rows } = await deps.pool.query(
    `/* admin:updateGeofence */
     UPDATE geofences SET
       name = coalesce($3, name),
       type = coalesce($4, type),
       enabled = coalesce($5, enabled),
       geometry = coalesce($6, geometry),
       bbox = coalesce($7, bbox),
       updated_at = now()
     WHERE tenant_id = $1 AND id = $2 RETURNING *, ${geofenceCounts}`,
    [
      tenantId,
      id,
      input.name ?? null,
      input.type ?? null,
      input.enabled ?? null,
      input.geometry ? JSON.stringify(input.geometry) : null,
      input.geometry ? geometryBbox(input.geometry) : null,
    ],
  );
  if (!rows[0]) throw new NotFoundError(`geofence ${id} not found`);
  return toTelemetryGeofence(rows[0] as Row);
}

export async function deleteGeofence(deps: ProvisioningDeps, tenantId: string, id: string) {
  const { rowCount } = await deps.pool.query(
    `/* admin:deleteGeofence */ DELETE FROM geofences WHERE tenant_id = $1 AND id = $2`,
    [tenantId, id],
  );
  if (rowCount === 0) throw new NotFoundError(`geofence ${id} not found`);
  return { id, deleted: true };
}
