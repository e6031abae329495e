import { parse as parseCsv } from 'csv-parse/sync';
import { withTransaction, type PoolClient } from '@gantry/db';
import { ConflictError, NotFoundError, RowProblemsError } from '../../errors.ts';
import { ImportRow, type ImportProblem, type ImportResult } from './import.schemas.ts';
import type { ProvisioningDeps } from './service.ts';

/**
 * Bulk provisioning: assets (with type, customer, identifier) and their devices from one
 * CSV or JSON file, in one transaction. Assets are matched by identifier, devices by
 * device id, so running the same file again changes nothing; a value a row leaves empty
 * keeps what is stored. Any row at fault refuses the whole file with every problem listed.
 */

/** Problems listed at most: past that, the file has a systematic fault one look shows. */
const MAX_PROBLEMS = 1000;

export type ImportFormat = 'csv' | 'json';

interface ReadRows {
  rows: ImportRow[];
  problems: ImportProblem[];
}

function reject(problems: ImportProblem[]): never {
  const shown = problems.slice(0, MAX_PROBLEMS);
  throw new RowProblemsError(
    `the file was not imported: ${problems.length} problem${problems.length === 1 ? '' : 's'} (row numbers count data rows from 1)`,
    shown,
  );
}

/** The records of a CSV file with a header row; a malformed file is one problem at its line. */
function csvRecords(content: string): unknown[] {
  let records: Record<string, string>[];
  try {
    records = parseCsv(content, { columns: true, bom: true, skip_empty_lines: true, trim: true });
  } catch (error) {
    const { lines, message } = error as { lines?: number; message: string };
    // csv-parse counts lines including the header; a problem's row counts data rows.
    reject([
      { row: Math.max((lines ?? 1) - 1, 0), field: '', message: message.replace(/^Invalid Record Length: /, '') },
    ]);
  }
  // A misspelt header is one problem, not one per row.
  const columns = Object.keys(ImportRow.shape);
  const unknown = Object.keys(records[0] ?? {}).filter((name) => !columns.includes(name));
  if (unknown.length > 0)
    reject([{ row: 0, field: unknown.join(', '), message: `unknown column; the columns are ${columns.join(', ')}` }]);
  return records;
}

/** The records of a JSON file: `{"rows": [...]}` or the array itself. */
function jsonRecords(content: unknown): unknown[] {
  if (Array.isArray(content)) return content;
  const rows = (content as { rows?: unknown } | null)?.rows;
  if (Array.isArray(rows)) return rows;
  reject([{ row: 0, field: 'rows', message: 'a JSON file holds {"rows": [...]} or an array of rows' }]);
}

function validateRecords(records: unknown[]): ReadRows {
  const rows: ImportRow[] = [];
  const problems: ImportProblem[] = [];
  records.forEach((record, index) => {
    const parsed = ImportRow.safeParse(record);
    if (parsed.success) rows.push(parsed.data);
    else
      for (const issue of parsed.error.issues) {
        const keys = issue.code === 'unrecognized_keys' ? issue.keys.join(', ') : issue.path.join('.');
        problems.push({ row: index + 1, field: keys, message: issue.message });
      }
  });
  if (records.length === 0) problems.push({ row: 0, field: '', message: 'the file holds no rows' });
  return { rows, problems };
}

const assetColumns = ['name', 'assetType', 'customerName', 'displayCode', 'location', 'externalRef'] as const;

/** Rows of one asset must agree on its columns, and a device may appear once. */
function crossRowProblems(rows: ImportRow[]): ImportProblem[] {
  const problems: ImportProblem[] = [];
  const firstOfAsset = new Map<string, { row: ImportRow; at: number }>();
  const deviceAt = new Map<string, number>();
  rows.forEach((row, index) => {
    const at = index + 1;
    const first = firstOfAsset.get(row.identifier);
    if (!first) firstOfAsset.set(row.identifier, { row, at });
    else
      for (const column of assetColumns)
        if (row[column] !== undefined && first.row[column] !== undefined && row[column] !== first.row[column])
          problems.push({
            row: at,
            field: column,
            message: `differs from row ${first.at}, which has the same identifier "${row.identifier}"`,
          });
    if (row.deviceId === undefined) return;
    const seen = deviceAt.get(row.deviceId);
    if (seen !== undefined)
      problems.push({ row: at, field: 'deviceId', message: `device "${row.deviceId}" is already in row ${seen}` });
    else deviceAt.set(row.deviceId, at);
  });
  return problems;
}

/** The rows of a file, checked; throws RowProblemsError (422) listing every row at fault. */
export function readImportFile(content: unknown, format: ImportFormat): ImportRow[] {
  const records = format === 'csv' ? csvRecords(String(content)) : jsonRecords(content);
  const { rows, problems } = validateRecords(records);
  // Row numbers stay the file's: cross-row checks run only on a file whose every row parsed.
  if (problems.length === 0) problems.push(...crossRowProblems(rows));
  if (problems.length > 0) reject(problems);
  return rows;
}

/** One entry per asset: the first non-empty value of each column among its rows. */
function assetsOf(rows: ImportRow[]) {
  const assets = new Map<string, ImportRow>();
  for (const row of rows) {
    const known = assets.get(row.identifier);
    if (!known) assets.set(row.identifier, { ...row });
    else for (const column of assetColumns) known[column] ??= row[column] as never;
  }
  return [...assets.values()];
}

const column = <T>(rows: ImportRow[], pick: (row: ImportRow) => T | undefined) => rows.map((row) => pick(row) ?? null);

async function lockTenant(client: PoolClient, tenantId: string): Promise<void> {
  // Two imports of one tenant run one after the other, so both see whole files.
  const { rowCount } = await client.query(
    `/* admin:importLockTenant */ SELECT pg_advisory_xact_lock(hashtext('gantry:import'), hashtext($1::text))
       FROM tenants WHERE id = $1::uuid`,
    [tenantId],
  );
  if (rowCount === 0) throw new NotFoundError(`tenant ${tenantId} not found`);
}

async function devicesOfOtherTenants(client: PoolClient, tenantId: string, rows: ImportRow[]) {
  const { rows: taken } = await client.query<{ device_id: string }>(
    `/* admin:importForeignDevices */
     SELECT device_id FROM devices WHERE device_id = ANY($2::text[]) AND tenant_id <> $1`,
    [tenantId, rows.flatMap((row) => (row.deviceId ? [row.deviceId] : []))],
  );
  const takenIds = new Set(taken.map((row) => row.device_id));
  return rows.flatMap((row, index) =>
    row.deviceId && takenIds.has(row.deviceId)
      ? [{ row: index + 1, field: 'deviceId', message: `device "${row.deviceId}" is registered to another tenant` }]
      : [],
  );
}

async function createMissingAssetTypes(client: PoolClient, tenantId: string, assets: ImportRow[]): Promise<number> {
  const names = [...new Set(assets.flatMap((asset) => (asset.assetType ? [asset.assetType] : [])))];
  const { rowCount } = await client.query(
    `/* admin:importAssetTypes */
     INSERT INTO asset_types (tenant_id, name) SELECT $1, unnest($2::text[]) ON CONFLICT (tenant_id, name) DO NOTHING`,
    [tenantId, names],
  );
  await client.query(
    `/* admin:importCustomers */
     INSERT INTO customers (tenant_id, name) SELECT $1, unnest($2::text[]) ON CONFLICT DO NOTHING`,
    [tenantId, [...new Set(assets.flatMap((asset) => (asset.customerName ? [asset.customerName] : [])))]],
  );
  return rowCount ?? 0;
}

/** The assets of the file as a relation: unnest of one array per column. */
const assetRelation = `unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[])
    AS r(identifier, name, asset_type, customer_name, display_code, location, external_ref)
  LEFT JOIN asset_types t ON t.tenant_id = $1 AND t.name = r.asset_type`;

async function upsertAssets(client: PoolClient, tenantId: string, assets: ImportRow[]) {
  const values = [
    tenantId,
    column(assets, (a) => a.identifier),
    column(assets, (a) => a.name),
    column(assets, (a) => a.assetType),
    column(assets, (a) => a.customerName),
    column(assets, (a) => a.displayCode),
    column(assets, (a) => a.location),
    column(assets, (a) => a.externalRef),
  ];
  // Only assets that differ are written: a row that changes nothing keeps its updated_at.
  const updated = await client.query(
    `/* admin:importUpdateAssets */
     WITH wanted AS (
       SELECT a.id, r.name, coalesce(t.id, a.asset_type_id) AS asset_type_id,
              coalesce(r.customer_name, a.customer_name) AS customer_name,
              coalesce(r.display_code, a.display_code) AS display_code, coalesce(r.location, a.location) AS location,
              coalesce(r.external_ref, a.external_ref) AS external_ref
         FROM ${assetRelation}
         JOIN assets a ON a.tenant_id = $1 AND a.identifier = r.identifier
     )
     UPDATE assets a SET name = w.name, asset_type_id = w.asset_type_id, customer_name = w.customer_name,
            display_code = w.display_code, location = w.location, external_ref = w.external_ref, updated_at = now()
       FROM wanted w
      WHERE a.id = w.id
        AND (a.name, a.asset_type_id, a.customer_name, a.display_code, a.location, a.external_ref)
            IS DISTINCT FROM (w.name, w.asset_type_id, w.customer_name, w.display_code, w.location, w.external_ref)`,
    values,
  );
  const created = await client.query(
    `/* admin:importInsertAssets */
     INSERT INTO assets (tenant_id, asset_type_id, name, identifier, display_code, location, customer_name, external_ref)
     SELECT $1, t.id, r.name, r.identifier, coalesce(r.display_code, r.identifier), coalesce(r.location, ''),
            coalesce(r.customer_name, ''), coalesce(r.external_ref, '')
       FROM ${assetRelation}
      WHERE NOT EXISTS (SELECT 1 FROM assets a WHERE a.tenant_id = $1 AND a.identifier = r.identifier)`,
    values,
  );
  return counts(assets.length, created.rowCount, updated.rowCount);
}

function counts(total: number, created: number | null, updated: number | null) {
  const made = created ?? 0;
  const changed = updated ?? 0;
  return { created: made, updated: changed, unchanged: total - made - changed };
}

const deviceRelation = `unnest($2::text[], $3::text[], $4::text[], $5::boolean[]) AS r(device_id, identifier, display_name, enabled)
  JOIN assets a ON a.tenant_id = $1 AND a.identifier = r.identifier`;

async function upsertDevices(client: PoolClient, tenantId: string, rows: ImportRow[]) {
  const devices = rows.filter((row) => row.deviceId !== undefined);
  const values = [
    tenantId,
    column(devices, (d) => d.deviceId),
    column(devices, (d) => d.identifier),
    column(devices, (d) => d.deviceName),
    column(devices, (d) => d.enabled),
  ];
  const updated = await client.query(
    `/* admin:importUpdateDevices */
     UPDATE devices d SET asset_id = a.id, display_name = coalesce(r.display_name, d.display_name),
            enabled = coalesce(r.enabled, d.enabled), updated_at = now()
       FROM ${deviceRelation}
      WHERE d.device_id = r.device_id AND d.tenant_id = $1
        AND (d.asset_id, d.display_name, d.enabled)
            IS DISTINCT FROM (a.id, coalesce(r.display_name, d.display_name), coalesce(r.enabled, d.enabled))`,
    values,
  );
  try {
    const created = await client.query(
      `/* admin:importInsertDevices */
       INSERT INTO devices (tenant_id, device_id, asset_id, display_name, enabled)
       SELECT $1, r.device_id, a.id, coalesce(r.display_name, ''), coalesce(r.enabled, true)
         FROM ${deviceRelation}
        WHERE NOT EXISTS (SELECT 1 FROM devices d WHERE d.device_id = r.device_id)`,
      values,
    );
    return counts(devices.length, created.rowCount, updated.rowCount);
  } catch (error) {
    // Registered elsewhere between the check and the insert.
    if ((error as { code?: string }).code === '23505')
      throw new ConflictError(
        'a device of the file was registered at the same time; run the import again',
        'duplicate',
      );
    throw error;
  }
}

/** Imports checked rows (readImportFile) into a tenant, all or nothing. */
export async function importRows(deps: ProvisioningDeps, tenantId: string, rows: ImportRow[]): Promise<ImportResult> {
  return withTransaction(deps.pool, async (client) => {
    await lockTenant(client, tenantId);
    const foreign = await devicesOfOtherTenants(client, tenantId, rows);
    if (foreign.length > 0) reject(foreign);
    const assets = assetsOf(rows);
    const assetTypesCreated = await createMissingAssetTypes(client, tenantId, assets);
    const assetCounts = await upsertAssets(client, tenantId, assets);
    const deviceCounts = await upsertDevices(client, tenantId, rows);
    return {
      rows: rows.length,
      assetTypes: { created: assetTypesCreated },
      assets: assetCounts,
      devices: deviceCounts,
    };
  });
}

/** Reads, checks and imports one file. */
export async function importFile(deps: ProvisioningDeps, tenantId: string, content: unknown, format: ImportFormat) {
  return importRows(deps, tenantId, readImportFile(content, format));
}
