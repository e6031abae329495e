import { createHash } from 'node:crypto';
import type { Queryable } from '@gantry/db';
import { iso } from '../../http/common-schemas.ts';
import { splitRange, type PeriodSpan, type SplitRange, type Window } from './periods.ts';
import type {
  ReportingAsset,
  ReportingAssetType,
  ReportingInspection,
  ReportingRecentReport,
  ReportingReport,
  ReportingTemplate,
} from './schemas.ts';

// Reporting reads. Every query is scoped by tenant and, when `customerName` is set, by
// exact customer name; callers never pass a wider scope than the key allows.

type Row = Record<string, unknown>;

export interface ReportingScope {
  tenantId: string;
  /** Exact customer name rows must carry; null = the whole tenant. */
  customerName: string | null;
}

/** Numbered parameters for a statement assembled from fixed fragments. */
class Params {
  readonly values: unknown[] = [];
  add(value: unknown, cast: string): string {
    this.values.push(value);
    return `$${this.values.length}::${cast}`;
  }
}

/** A stable name for a statement's text, so pg prepares it once per connection. */
function statementName(tag: string, text: string): string {
  return `${tag}_${createHash('sha1').update(text).digest('hex').slice(0, 16)}`;
}

/** LIKE pattern matching `text` anywhere, case-insensitively, pattern characters taken literally. */
export function containsPattern(text: string): string {
  return `%${text.toLowerCase().replace(/[\\%_]/g, (char) => `\\${char}`)}%`;
}

// Mappers -------------------------------------------------------------------------------

const assetRefColumns = `a.id AS asset_id, a.identifier AS asset_identifier, a.name AS asset_name,
  a.display_code AS asset_display_code, coalesce(at.name, '') AS asset_type_name, a.location AS asset_location,
  a.customer_name AS asset_customer_name`;

function toAssetRef(row: Row) {
  return {
    id: row.asset_id as string,
    identifier: row.asset_identifier as string,
    name: row.asset_name as string,
    displayCode: row.asset_display_code as string,
    assetType: row.asset_type_name as string,
    location: row.asset_location as string,
    customerName: row.asset_customer_name as string,
  };
}

export function toReportingAsset(row: Row): ReportingAsset {
  return {
    id: row.id as string,
    name: row.name as string,
    identifier: row.identifier as string,
    displayCode: row.display_code as string,
    assetType: row.asset_type_name as string,
    assetTypeId: (row.asset_type_id as string | null) ?? null,
    location: row.location as string,
    customerName: row.customer_name as string,
    customerEmail: row.customer_email as string,
    customerPhone: row.customer_phone as string,
    lifecycleStatus: row.lifecycle_status as string,
    operationalStatus: row.operational_status as string,
    status: row.operational_status as string,
    externalRef: row.external_ref as string,
    latestImpact: row.latest_impact as string,
    latestOutcome: row.latest_outcome as string,
    createdAt: iso(row.created_at as Date),
    updatedAt: iso(row.updated_at as Date),
    latestInspectionAt: iso(row.latest_inspection_at as Date | null),
    latestReportAt: iso(row.latest_report_at as Date | null),
    inspectionCount: row.inspection_count as number,
    reportCount: row.report_count as number,
  };
}

export function toReportingAssetType(row: Row): ReportingAssetType {
  return {
    id: row.id as string,
    name: row.name as string,
    description: row.description as string,
    assetCount: row.asset_count as number,
    fields: row.fields as Record<string, unknown>,
    createdAt: iso(row.created_at as Date),
    updatedAt: iso(row.updated_at as Date),
  };
}

export function toReportingTemplate(row: Row): ReportingTemplate {
  return {
    id: row.id as string,
    name: row.name as string,
    description: row.description as string,
    status: row.status as string,
    latestVersion: row.latest_version as number,
    assetTypeIds: row.asset_type_ids as string[],
    createdAt: iso(row.created_at as Date),
    updatedAt: iso(row.updated_at as Date),
  };
}

/**
 * Media counters from the stored media object: numbers are counts, arrays count their
 * items, anything else is ignored; `total` sums them.
 */
export function toMediaCounters(media: unknown): { total: number } & Record<string, number> {
  const counters: Record<string, number> = {};
  let total = 0;
  if (media !== null && typeof media === 'object' && !Array.isArray(media)) {
    for (const [kind, value] of Object.entries(media as Record<string, unknown>)) {
      if (kind === 'total') continue;
      const count = Array.isArray(value)
        ? value.length
        : typeof value === 'number' && Number.isFinite(value)
          ? Math.max(0, Math.trunc(value))
          : null;
      if (count === null) continue;
      counters[kind] = count;
      total += count;
    }
  }
  return { ...counters, total };
}

const templateRefColumns = `t.id AS template_id, t.name AS template_name, t.status AS template_status,
  t.latest_version AS template_latest_version`;

function toTemplateRef(row: Row, version: number | null) {
  const id = (row.template_id as string | null) ?? null;
  return {
    id,
    name: (row.template_name as string | null) ?? null,
    status: (row.template_status as string | null) ?? null,
    version: id === null ? null : version,
    latestVersion: (row.template_latest_version as number | null) ?? null,
  };
}

function toReportingInspection(row: Row): ReportingInspection {
  return {
    id: row.id as string,
    asset: toAssetRef(row),
    status: row.status as string,
    startedAt: iso(row.started_at as Date | null),
    completedAt: iso(row.completed_at as Date | null),
    occurredAt: iso(row.occurred_at as Date | null),
    createdAt: iso(row.created_at as Date | null),
    inspectorName: row.inspector_name as string,
    operatorIdentifier: row.operator_identifier as string,
    externalRef: row.external_ref as string,
    notes: row.notes as string,
    media: toMediaCounters(row.media),
    report: {
      id: (row.report_id as string | null) ?? null,
      status: (row.report_status as string | null) ?? null,
      impact: (row.report_impact_latest as string | null) ?? null,
      outcome: (row.report_outcome_latest as string | null) ?? null,
      rejectionReason: (row.report_rejection_reason as string | null) ?? null,
      summary: (row.report_summary as string | null) ?? null,
      createdAt: iso(row.report_created_at as Date | null),
      count: row.report_count as number,
    },
    template: toTemplateRef(row, (row.template_version as number | null) ?? null),
  };
}

function toReportingReport(row: Row): ReportingReport {
  return {
    id: row.id as string,
    inspectionId: row.inspection_id as string,
    asset: toAssetRef(row),
    createdAt: iso(row.created_at as Date | null),
    updatedAt: iso(row.updated_at as Date | null),
    status: row.status as string,
    impact: row.impact as string,
    outcome: row.outcome as string,
    rejectionReason: row.rejection_reason as string,
    summary: row.summary as string,
    externalRef: row.external_ref as string,
    media: toMediaCounters(row.media),
    template: toTemplateRef(row, (row.inspection_template_version as number | null) ?? null),
  };
}

// Assets --------------------------------------------------------------------------------

export interface AssetFilters {
  q?: string | undefined;
  status?: string | undefined;
  assetType?: string | undefined;
  limit: number;
  offset: number;
}

const assetColumns = `a.id, a.name, a.identifier, a.display_code, a.location, a.customer_name, a.customer_email,
  a.customer_phone, a.lifecycle_status, a.operational_status, a.external_ref, a.inspection_count, a.report_count,
  a.latest_inspection_at, a.latest_report_at, a.latest_impact, a.latest_outcome, a.created_at, a.updated_at,
  a.asset_type_id, coalesce(at.name, '') AS asset_type_name`;

/** Asset ids whose name, identifier, display code, external reference or device id contain the pattern. */
function matchingAssetIds(params: Params, tenant: string, pattern: string): string {
  const like = params.add(pattern, 'text');
  return `SELECT sa.id FROM assets sa WHERE sa.tenant_id = ${tenant} AND sa.search_text LIKE ${like}
          UNION SELECT d.asset_id FROM devices d WHERE d.tenant_id = ${tenant} AND lower(d.device_id) LIKE ${like} AND d.asset_id IS NOT NULL`;
}

export async function listAssets(
  db: Queryable,
  scope: ReportingScope,
  filters: AssetFilters,
): Promise<ReportingAsset[]> {
  const params = new Params();
  const tenant = params.add(scope.tenantId, 'uuid');
  const where = [`a.tenant_id = ${tenant}`];
  if (scope.customerName !== null) where.push(`a.customer_name = ${params.add(scope.customerName, 'text')}`);
  if (filters.status !== undefined) where.push(`a.operational_status = ${params.add(filters.status, 'text')}`);
  if (filters.assetType !== undefined) {
    where.push(
      `a.asset_type_id = (SELECT id FROM asset_types WHERE tenant_id = ${tenant} AND name = ${params.add(filters.assetType, 'text')})`,
    );
  }
  if (filters.q !== undefined) where.push(`a.id IN (${matchingAssetIds(params, tenant, containsPattern(filters.q))})`);
  const limit = params.add(filters.limit, 'integer');
  const offset = params.add(filters.offset, 'integer');
  // The page's ids come from the (tenant, [customer,] name, id) index alone; only the
  // rows shown are read in full.
  const { rows } = await db.query(
    `/* api:listReportingAssets */
     WITH page AS (
       SELECT a.id, a.name FROM assets a WHERE ${where.join(' AND ')}
        ORDER BY a.name, a.id LIMIT ${limit} OFFSET ${offset}
     )
     SELECT ${assetColumns}
       FROM page JOIN assets a ON a.id = page.id LEFT JOIN asset_types at ON at.id = a.asset_type_id
      ORDER BY page.name, page.id`,
    params.values,
  );
  return rows.map(toReportingAsset);
}

export async function findAsset(db: Queryable, scope: ReportingScope, id: string): Promise<ReportingAsset | null> {
  const { rows } = await db.query(
    `/* api:getReportingAsset */
     SELECT ${assetColumns} FROM assets a LEFT JOIN asset_types at ON at.id = a.asset_type_id
      WHERE a.tenant_id = $1 AND a.id = $2 AND ($3::text IS NULL OR a.customer_name = $3)`,
    [scope.tenantId, id, scope.customerName],
  );
  return rows[0] ? toReportingAsset(rows[0] as Row) : null;
}

// Asset types and templates ------------------------------------------------------------------

export async function listAssetTypes(db: Queryable, scope: ReportingScope, q: string | undefined) {
  // Counts come from the asset rollup (trigger-maintained, the same numbers the
  // overview's assetType breakdown shows); customer scopes list only types in use.
  const { rows } = await db.query(
    `/* api:listReportingAssetTypes */
     SELECT t.id, t.name, t.description, t.fields, t.created_at, t.updated_at, coalesce(f.assets, 0)::int AS asset_count
       FROM asset_types t
       LEFT JOIN reporting_asset_facets f
         ON f.tenant_id = t.tenant_id AND f.facet = 'assetType' AND f.label = t.id::text
        AND ${scope.customerName === null ? 'f.customer_name IS NULL' : 'f.customer_name = $2'}
      WHERE t.tenant_id = $1
        AND ($2::text IS NULL OR coalesce(f.assets, 0) > 0)
        AND ($3::text IS NULL OR lower(t.name || ' ' || t.description) LIKE $3)
      ORDER BY t.name, t.id`,
    [scope.tenantId, scope.customerName, q === undefined ? null : containsPattern(q)],
  );
  return rows.map(toReportingAssetType);
}

export async function listTemplates(db: Queryable, tenantId: string) {
  const { rows } = await db.query(
    `/* api:listReportingTemplates */
     SELECT id, name, description, status, latest_version, asset_type_ids, created_at, updated_at
       FROM templates WHERE tenant_id = $1 ORDER BY name, id`,
    [tenantId],
  );
  return rows.map(toReportingTemplate);
}

// Inspections and reports --------------------------------------------------------------------

export interface RecordFilters {
  from: Date | null;
  to: Date | null;
  status?: string | undefined;
  assetId?: string | undefined;
  outcome?: string | undefined;
  impact?: string | undefined;
  q?: string | undefined;
  assetType?: string | undefined;
}

/** WHERE of inspections (alias i) for a scope and filters; shared by the list and the export. */
function inspectionConditions(params: Params, scope: ReportingScope, filters: RecordFilters): string[] {
  const tenant = params.add(scope.tenantId, 'uuid');
  const where = [`i.tenant_id = ${tenant}`];
  if (scope.customerName !== null) where.push(`i.customer_name = ${params.add(scope.customerName, 'text')}`);
  if (filters.from !== null) where.push(`i.occurred_at >= ${params.add(filters.from, 'timestamptz')}`);
  if (filters.to !== null) where.push(`i.occurred_at < ${params.add(filters.to, 'timestamptz')}`);
  if (filters.status !== undefined) where.push(`i.status = ${params.add(filters.status, 'text')}`);
  if (filters.assetId !== undefined) where.push(`i.asset_id = ${params.add(filters.assetId, 'uuid')}`);
  if (filters.outcome !== undefined) where.push(`i.report_outcome = ${params.add(filters.outcome, 'text')}`);
  if (filters.impact !== undefined) where.push(`i.report_impact = ${params.add(filters.impact, 'text')}`);
  if (filters.assetType !== undefined) where.push(assetTypeCondition(params, tenant, filters.assetType));
  if (filters.q !== undefined) {
    const pattern = containsPattern(filters.q);
    // Two indexed paths: the asset's searchable fields (and device ids), or the
    // inspection's own operator identifier / external reference.
    where.push(`i.id IN (
      SELECT si.id FROM inspections si WHERE si.tenant_id = ${tenant} AND si.asset_id IN (${matchingAssetIds(params, tenant, pattern)})
      UNION
      SELECT si.id FROM inspections si WHERE si.tenant_id = ${tenant}
         AND lower(si.operator_identifier || ' ' || si.external_ref) LIKE ${params.add(pattern, 'text')})`);
  }
  return where;
}

function assetTypeCondition(params: Params, tenant: string, assetType: string, alias = 'i'): string {
  return `${alias}.asset_id IN (SELECT ta.id FROM assets ta JOIN asset_types tt ON tt.id = ta.asset_type_id
                              WHERE ta.tenant_id = ${tenant} AND tt.tenant_id = ${tenant} AND tt.name = ${params.add(assetType, 'text')})`;
}

const inspectionColumns = `i.id, i.status, i.started_at, i.completed_at, i.occurred_at, i.created_at, i.inspector_name,
  i.operator_identifier, i.external_ref, i.notes, i.media, i.template_version, i.report_count,
  ${assetRefColumns}, ${templateRefColumns},
  lr.id AS report_id, lr.status AS report_status, lr.impact AS report_impact_latest, lr.outcome AS report_outcome_latest,
  lr.rejection_reason AS report_rejection_reason, lr.summary AS report_summary, lr.created_at AS report_created_at`;

const inspectionJoins = `JOIN assets a ON a.id = i.asset_id
  LEFT JOIN asset_types at ON at.id = a.asset_type_id
  LEFT JOIN templates t ON t.id = i.template_id
  LEFT JOIN LATERAL (
    SELECT r.id, r.status, r.impact, r.outcome, r.rejection_reason, r.summary, r.created_at
      FROM reports r WHERE r.inspection_id = i.id ORDER BY r.created_at DESC, r.id DESC LIMIT 1
  ) lr ON true`;

/**
 * From this offset on, a page whose filters the rollups can count (scope, range, and
 * status for inspections; outcome and impact for reports) skips whole months and days by
 * their rollup counts instead of walking the index row by row: the month holding row
 * `offset` is found from the month rows, the day inside it from the day rows, and the
 * page query starts at that day and skips at most that day's rows. Rollups and rows are
 * read in one statement, so the skip is exact.
 */
const DAY_SKIP_FROM_OFFSET = 10_000;

interface DaySkip {
  /** WITH entries that define `page_start (bound_day, newer)`. */
  ctes: string;
  /** Upper bound on the time column for the page query. */
  bound: string;
  /** OFFSET expression for the page query. */
  offset: string;
}

function daySkip(
  params: Params,
  options: {
    scope: ReportingScope;
    tenant: string;
    range: Window;
    offset: string;
    rollup: string;
    counter: string;
    rollupFilters: Array<[column: string, value: string | undefined]>;
    rowTable: string;
    timeColumn: string;
  },
): DaySkip {
  const split = splitRange(options.range.from, options.range.to);
  const rollupWhere = [`tenant_id = ${options.tenant}`, rollupScope(params, options.scope)];
  const rowWhere = [`x.tenant_id = ${options.tenant}`];
  if (options.scope.customerName !== null)
    rowWhere.push(`x.customer_name = ${params.add(options.scope.customerName, 'text')}`);
  for (const [column, value] of options.rollupFilters) {
    if (value === undefined) continue;
    const bound = params.add(value, 'text');
    rollupWhere.push(`${column} = ${bound}`);
    rowWhere.push(`x.${column} = ${bound}`);
  }
  const rollupFrom = `${options.rollup} WHERE ${rollupWhere.join(' AND ')}`;
  const ranges = rollupRanges(params, split).map(
    (range) => `SELECT grain, period, ${options.counter} AS n FROM ${rollupFrom} AND ${range}`,
  );
  const live = liveWindows(params, `x.${options.timeColumn}`, split.live);
  return {
    ctes: `spans AS (
         SELECT grain, period AS lo, CASE WHEN grain = 'm' THEN (period + interval '1 month')::date ELSE period + 1 END AS hi,
                sum(n)::bigint AS n
           FROM (${ranges.join('\n UNION ALL ')}) rollup GROUP BY grain, period
         UNION ALL
         SELECT 'd'::"char", (x.${options.timeColumn} AT TIME ZONE 'UTC')::date, (x.${options.timeColumn} AT TIME ZONE 'UTC')::date + 1, count(*)::bigint
           FROM ${options.rowTable} x WHERE ${rowWhere.join(' AND ')} AND (${live}) GROUP BY 2, 3
       ),
       coarse AS (
         SELECT grain, lo, hi, newer FROM (
           SELECT grain, lo, hi, (sum(n) OVER (ORDER BY lo DESC) - n)::bigint AS newer
             FROM (SELECT grain, lo, hi, sum(n) AS n FROM spans GROUP BY 1, 2, 3 HAVING sum(n) > 0) merged
         ) cumulative
          WHERE newer <= ${options.offset} ORDER BY lo LIMIT 1
       ),
       page_start AS (
         SELECT lo + 1 AS bound_day, newer FROM (
           SELECT d.lo, ((SELECT newer FROM coarse) + sum(d.n) OVER (ORDER BY d.lo DESC) - d.n)::bigint AS newer
             FROM (SELECT period AS lo, sum(${options.counter}) AS n FROM ${rollupFrom} AND grain = 'd'
                      AND period >= (SELECT lo FROM coarse WHERE grain = 'm') AND period < (SELECT hi FROM coarse WHERE grain = 'm')
                    GROUP BY period HAVING sum(${options.counter}) > 0) d
         ) in_month
          WHERE newer <= ${options.offset}
         UNION ALL
         SELECT hi, newer FROM coarse WHERE grain = 'd'
         ORDER BY bound_day LIMIT 1
       ),`,
    bound: `((SELECT bound_day FROM page_start)::timestamp AT TIME ZONE 'UTC')`,
    offset: `(${options.offset} - (SELECT newer FROM page_start))`,
  };
}

export async function listInspections(
  db: Queryable,
  scope: ReportingScope,
  filters: RecordFilters,
  page: { limit: number; offset: number },
): Promise<ReportingInspection[]> {
  const params = new Params();
  const where = inspectionConditions(params, scope, filters);
  const limit = params.add(page.limit, 'integer');
  let offset = params.add(page.offset, 'bigint');
  let ctes = '';
  const countable = [filters.assetId, filters.outcome, filters.impact, filters.q, filters.assetType].every(
    (value) => value === undefined,
  );
  if (countable && page.offset >= DAY_SKIP_FROM_OFFSET) {
    const skip = daySkip(params, {
      scope,
      tenant: '$1::uuid',
      range: { from: filters.from, to: filters.to },
      offset,
      rollup: 'reporting_inspection_rollup',
      counter: 'inspections',
      rollupFilters: [['status', filters.status]],
      rowTable: 'inspections',
      timeColumn: 'occurred_at',
    });
    ctes = skip.ctes;
    where.push(`i.occurred_at < ${skip.bound}`);
    offset = skip.offset;
  }
  const { rows } = await db.query(
    `/* api:listReportingInspections */
     WITH ${ctes} page AS (
       SELECT i.id, i.occurred_at FROM inspections i WHERE ${where.join(' AND ')}
        ORDER BY i.occurred_at DESC, i.id LIMIT ${limit} OFFSET ${offset}
     )
     SELECT ${inspectionColumns}
       FROM page JOIN inspections i ON i.id = page.id ${inspectionJoins}
      ORDER BY page.occurred_at DESC, page.id`,
    params.values,
  );
  return rows.map(toReportingInspection);
}

export async function findInspection(
  db: Queryable,
  scope: ReportingScope,
  id: string,
): Promise<ReportingInspection | null> {
  const { rows } = await db.query(
    `/* api:getReportingInspection */
     SELECT ${inspectionColumns} FROM inspections i ${inspectionJoins}
      WHERE i.tenant_id = $1 AND i.id = $2 AND ($3::text IS NULL OR i.customer_name = $3)`,
    [scope.tenantId, id, scope.customerName],
  );
  return rows[0] ? toReportingInspection(rows[0] as Row) : null;
}

const reportColumns = `r.id, r.inspection_id, r.created_at, r.updated_at, r.status, r.impact, r.outcome, r.rejection_reason,
  r.summary, r.external_ref, r.media, ri.template_version AS inspection_template_version,
  ${assetRefColumns}, ${templateRefColumns}`;

const reportJoins = `JOIN inspections ri ON ri.id = r.inspection_id
  JOIN assets a ON a.id = r.asset_id
  LEFT JOIN asset_types at ON at.id = a.asset_type_id
  LEFT JOIN templates t ON t.id = r.template_id`;

export async function listReports(
  db: Queryable,
  scope: ReportingScope,
  filters: RecordFilters,
  page: { limit: number; offset: number },
): Promise<ReportingReport[]> {
  const params = new Params();
  const tenant = params.add(scope.tenantId, 'uuid');
  const where = [`r.tenant_id = ${tenant}`];
  if (scope.customerName !== null) where.push(`r.customer_name = ${params.add(scope.customerName, 'text')}`);
  if (filters.from !== null) where.push(`r.created_at >= ${params.add(filters.from, 'timestamptz')}`);
  if (filters.to !== null) where.push(`r.created_at < ${params.add(filters.to, 'timestamptz')}`);
  if (filters.status !== undefined) where.push(`r.status = ${params.add(filters.status, 'text')}`);
  if (filters.assetId !== undefined) where.push(`r.asset_id = ${params.add(filters.assetId, 'uuid')}`);
  if (filters.outcome !== undefined) where.push(`r.outcome = ${params.add(filters.outcome, 'text')}`);
  if (filters.impact !== undefined) where.push(`r.impact = ${params.add(filters.impact, 'text')}`);
  if (filters.assetType !== undefined) where.push(assetTypeCondition(params, tenant, filters.assetType, 'r'));
  if (filters.q !== undefined) {
    const pattern = containsPattern(filters.q);
    // The asset's fields, the report's external reference, or its inspection's
    // operator identifier / external reference.
    where.push(`r.id IN (
      SELECT sr.id FROM reports sr WHERE sr.tenant_id = ${tenant} AND sr.asset_id IN (${matchingAssetIds(params, tenant, pattern)})
      UNION
      SELECT sr.id FROM reports sr WHERE sr.tenant_id = ${tenant} AND lower(sr.external_ref) LIKE ${params.add(pattern, 'text')}
      UNION
      SELECT sr.id FROM reports sr JOIN inspections si ON si.id = sr.inspection_id
       WHERE si.tenant_id = ${tenant} AND lower(si.operator_identifier || ' ' || si.external_ref) LIKE ${params.add(pattern, 'text')})`);
  }
  const limit = params.add(page.limit, 'integer');
  let offset = params.add(page.offset, 'bigint');
  let ctes = '';
  const countable = [filters.status, filters.assetId, filters.q, filters.assetType].every(
    (value) => value === undefined,
  );
  if (countable && page.offset >= DAY_SKIP_FROM_OFFSET) {
    const skip = daySkip(params, {
      scope,
      tenant,
      range: { from: filters.from, to: filters.to },
      offset,
      rollup: 'reporting_report_rollup',
      counter: 'reports',
      rollupFilters: [
        ['outcome', filters.outcome],
        ['impact', filters.impact],
      ],
      rowTable: 'reports',
      timeColumn: 'created_at',
    });
    ctes = skip.ctes;
    where.push(`r.created_at < ${skip.bound}`);
    offset = skip.offset;
  }
  const { rows } = await db.query(
    `/* api:listReportingReports */
     WITH ${ctes} page AS (
       SELECT r.id, r.created_at FROM reports r WHERE ${where.join(' AND ')}
        ORDER BY r.created_at DESC, r.id LIMIT ${limit} OFFSET ${offset}
     )
     SELECT ${reportColumns}
       FROM page JOIN reports r ON r.id = page.id ${reportJoins}
      ORDER BY page.created_at DESC, page.id`,
    params.values,
  );
  return rows.map(toReportingReport);
}

export async function findReport(db: Queryable, scope: ReportingScope, id: string): Promise<ReportingReport | null> {
  const { rows } = await db.query(
    `/* api:getReportingReport */
     SELECT ${reportColumns} FROM reports r ${reportJoins}
      WHERE r.tenant_id = $1 AND r.id = $2 AND ($3::text IS NULL OR r.customer_name = $3)`,
    [scope.tenantId, id, scope.customerName],
  );
  return rows[0] ? toReportingReport(rows[0] as Row) : null;
}

// Export ---------------------------------------------------------------------------------

export const exportColumns = [
  { name: 'inspectionId' },
  { name: 'inspectionStatus' },
  { name: 'occurredAt', type: 'timestamp' },
  { name: 'startedAt', type: 'timestamp' },
  { name: 'completedAt', type: 'timestamp' },
  { name: 'assetId' },
  { name: 'assetIdentifier' },
  { name: 'assetName' },
  { name: 'assetDisplayCode' },
  { name: 'assetType' },
  { name: 'location' },
  { name: 'customerName' },
  { name: 'templateName' },
  { name: 'templateVersion', type: 'integer' },
  { name: 'inspectorName' },
  { name: 'operatorIdentifier' },
  { name: 'inspectionExternalRef' },
  { name: 'reportId' },
  { name: 'reportStatus' },
  { name: 'reportCreatedAt', type: 'timestamp' },
  { name: 'impact' },
  { name: 'outcome' },
  { name: 'rejectionReason' },
  { name: 'reportSummary' },
  { name: 'reportExternalRef' },
] as const;

/**
 * One row per inspection in range and scope and each of its reports (an inspection
 * without report is one row with empty report columns), oldest first so pages stay put
 * while new inspections arrive.
 */
export function exportStatement(
  scope: ReportingScope,
  filters: RecordFilters,
  empty: boolean,
): { text: string; values: unknown[] } {
  const params = new Params();
  const where = inspectionConditions(params, scope, filters);
  // A customer key asking for another customer's name exports the header row only.
  if (empty) where.push('false');
  return {
    text: `/* api:exportReporting */
      SELECT i.id AS "inspectionId", i.status AS "inspectionStatus", i.occurred_at AS "occurredAt",
             i.started_at AS "startedAt", i.completed_at AS "completedAt",
             a.id AS "assetId", a.identifier AS "assetIdentifier", a.name AS "assetName", a.display_code AS "assetDisplayCode",
             coalesce(at.name, '') AS "assetType", a.location AS "location", a.customer_name AS "customerName",
             t.name AS "templateName", i.template_version AS "templateVersion", i.inspector_name AS "inspectorName",
             i.operator_identifier AS "operatorIdentifier", i.external_ref AS "inspectionExternalRef",
             r.id AS "reportId", r.status AS "reportStatus", r.created_at AS "reportCreatedAt", r.impact AS "impact",
             r.outcome AS "outcome", r.rejection_reason AS "rejectionReason", r.summary AS "reportSummary",
             r.external_ref AS "reportExternalRef"
        FROM inspections i
        JOIN assets a ON a.id = i.asset_id
        LEFT JOIN asset_types at ON at.id = a.asset_type_id
        LEFT JOIN templates t ON t.id = i.template_id
        LEFT JOIN reports r ON r.inspection_id = i.id
       WHERE ${where.join(' AND ')}
       ORDER BY i.occurred_at, i.id DESC, r.created_at NULLS FIRST, r.id NULLS FIRST`,
    values: params.values,
  };
}

// Overview -------------------------------------------------------------------------------------

export interface InspectionFact {
  month: string;
  status: string;
  templateName: string;
  rejected: boolean;
  count: number;
}

export interface ReportFact {
  month: string;
  outcome: string;
  impact: string;
  count: number;
}

export interface AssetFacet {
  facet: 'assetType' | 'location' | 'customer' | 'lifecycle';
  label: string;
  count: number;
}

export interface ServiceRequestFact {
  status: string;
  category: string;
  priority: string;
  cancelReason: string | null;
  count: number;
}

export interface OverviewFacts {
  inspections: InspectionFact[];
  reports: ReportFact[];
  assets: AssetFacet[];
  serviceRequests: ServiceRequestFact[];
  recentReports: ReportingRecentReport[];
  /** First and last UTC month with an inspection or report in scope (YYYY-MM). */
  activity: { first: string | null; last: string | null };
}

function rollupScope(params: Params, scope: ReportingScope): string {
  return scope.customerName === null
    ? 'customer_name IS NULL'
    : `customer_name = ${params.add(scope.customerName, 'text')}`;
}

function liveWindows(params: Params, column: string, windows: Window[]): string {
  if (windows.length === 0) return 'false';
  return windows
    .map((window) => {
      const parts: string[] = [];
      if (window.from !== null) parts.push(`${column} >= ${params.add(window.from, 'timestamptz')}`);
      if (window.to !== null) parts.push(`${column} < ${params.add(window.to, 'timestamptz')}`);
      return `(${parts.join(' AND ') || 'true'})`;
    })
    .join(' OR ');
}

function spanBounds(params: Params, span: PeriodSpan): string {
  const parts: string[] = [];
  if (span.from !== null) parts.push(`period >= ${params.add(span.from, 'date')}`);
  if (span.to !== null) parts.push(`period < ${params.add(span.to, 'date')}`);
  return `(${parts.join(' AND ') || 'true'})`;
}

/**
 * The rollup rows of a split range — whole months from grain 'm', whole days from grain
 * 'd' — as one range condition per branch of a UNION ALL, so each is an index-only range
 * scan of the rollup key.
 */
function rollupRanges(params: Params, split: SplitRange): string[] {
  const ranges: string[] = [];
  if (split.months !== null) ranges.push(`grain = 'm' AND ${spanBounds(params, split.months)}`);
  for (const span of split.days) ranges.push(`grain = 'd' AND ${spanBounds(params, span)}`);
  return ranges.length === 0 ? ['false'] : ranges;
}

/** `SELECT <columns> FROM <table> WHERE <base> AND <range>` for each range, glued with UNION ALL. */
function rollupSelect(table: string, columns: string, base: string, ranges: string[]): string {
  return ranges.map((range) => `SELECT ${columns} FROM ${table} WHERE ${base} AND ${range}`).join('\n UNION ALL ');
}

function timeBounds(params: Params, column: string, window: Window): string {
  const parts: string[] = [];
  if (window.from !== null) parts.push(`${column} >= ${params.add(window.from, 'timestamptz')}`);
  if (window.to !== null) parts.push(`${column} < ${params.add(window.to, 'timestamptz')}`);
  return parts.length === 0 ? 'true' : parts.join(' AND ');
}

/**
 * Everything the overview counts, in one statement (one snapshot, one round trip):
 * inspections, reports and service requests by month from the rollups (whole months and
 * days) and the rows (partial days), the asset inventory by facet, the recent reports
 * and, for open ranges, the first and last month with activity.
 */
export async function overviewFacts(
  db: Queryable,
  scope: ReportingScope,
  range: { split: SplitRange; window: Window },
  options: { recentReports: number; activity: boolean },
): Promise<OverviewFacts> {
  const params = new Params();
  const tenant = params.add(scope.tenantId, 'uuid');
  const rollup = rollupScope(params, scope);
  const customer = scope.customerName === null ? null : params.add(scope.customerName, 'text');
  const base = `tenant_id = ${tenant} AND ${rollup}`;
  const ranges = rollupRanges(params, range.split);
  const inspectionsLive = liveWindows(params, 'i.occurred_at', range.split.live);
  const reportsLive = liveWindows(params, 'r.created_at', range.split.live);
  const requestsLive = liveWindows(params, 'sr.created_at', range.split.live);
  const byCustomer = (column: string) => (customer === null ? '' : `AND ${column} = ${customer}`);
  const activityEdge = (table: string, counter: string, direction: 'ASC' | 'DESC') =>
    `(SELECT period FROM ${table} WHERE tenant_id = ${tenant} AND ${rollup} AND grain = 'm' AND ${counter} > 0 ORDER BY period ${direction} LIMIT 1)`;
  const activity = options.activity
    ? `(SELECT json_build_object('first', to_char(min(period), 'YYYY-MM'), 'last', to_char(max(period), 'YYYY-MM')) FROM (
         ${activityEdge('reporting_inspection_rollup', 'inspections', 'ASC')}
         UNION ALL ${activityEdge('reporting_inspection_rollup', 'inspections', 'DESC')}
         UNION ALL ${activityEdge('reporting_report_rollup', 'reports', 'ASC')}
         UNION ALL ${activityEdge('reporting_report_rollup', 'reports', 'DESC')}) edges)`
    : `json_build_object('first', NULL, 'last', NULL)`;

  const overviewText = `/* api:reportingOverview */
     SELECT
       (SELECT coalesce(json_agg(f), '[]') FROM (
          SELECT to_char(facts.month, 'YYYY-MM') AS month, facts.status, coalesce(t.name, '') AS "templateName", facts.rejected,
                 sum(facts.n)::int AS count
            FROM (
              SELECT date_trunc('month', period::timestamp) AS month, status, template_id, rejected, sum(inspections) AS n
                FROM (${rollupSelect('reporting_inspection_rollup', 'period, status, template_id, rejected, inspections', base, ranges)}) rollup
               GROUP BY 1, 2, 3, 4
              UNION ALL
              SELECT date_trunc('month', i.occurred_at AT TIME ZONE 'UTC'), i.status, i.template_id,
                     i.status = 'rejected' OR i.report_outcome = 'rejected', count(*)
                FROM inspections i WHERE i.tenant_id = ${tenant} ${byCustomer('i.customer_name')} AND (${inspectionsLive})
               GROUP BY 1, 2, 3, 4
            ) facts
            LEFT JOIN templates t ON t.id = facts.template_id
           GROUP BY 1, 2, 3, 4
          HAVING sum(facts.n) <> 0) f) AS inspections,
       (SELECT coalesce(json_agg(f), '[]') FROM (
          SELECT to_char(month, 'YYYY-MM') AS month, outcome, impact, sum(n)::int AS count
            FROM (
              SELECT date_trunc('month', period::timestamp) AS month, outcome, impact, sum(reports) AS n
                FROM (${rollupSelect('reporting_report_rollup', 'period, outcome, impact, reports', base, ranges)}) rollup
               GROUP BY 1, 2, 3
              UNION ALL
              SELECT date_trunc('month', r.created_at AT TIME ZONE 'UTC'), r.outcome, r.impact, count(*)
                FROM reports r WHERE r.tenant_id = ${tenant} ${byCustomer('r.customer_name')} AND (${reportsLive})
               GROUP BY 1, 2, 3
            ) facts
           GROUP BY 1, 2, 3
          HAVING sum(n) <> 0) f) AS reports,
       (SELECT coalesce(json_agg(f), '[]') FROM (
          SELECT a.facet, CASE WHEN a.facet = 'assetType' THEN coalesce(t.name, '') ELSE a.label END AS label, sum(a.assets)::int AS count
            FROM reporting_asset_facets a
            LEFT JOIN asset_types t ON t.id = CASE WHEN a.facet = 'assetType' AND a.label <> '' THEN a.label::uuid END
           WHERE a.tenant_id = ${tenant} AND a.${rollup}
           GROUP BY 1, 2
          HAVING sum(a.assets) <> 0) f) AS assets,
       (SELECT coalesce(json_agg(f), '[]') FROM (
          SELECT status, category, priority, CASE WHEN status = 'cancelled' THEN cancel_reason END AS "cancelReason", sum(n)::int AS count
            FROM (
              SELECT status, category, priority, cancel_reason, sum(requests) AS n
                FROM (${rollupSelect('reporting_service_request_rollup', 'status, category, priority, cancel_reason, requests', base, ranges)}) rollup
               GROUP BY 1, 2, 3, 4
              UNION ALL
              SELECT sr.status, sr.category, sr.priority, CASE WHEN sr.status = 'cancelled' THEN coalesce(sr.cancel_reason, '') ELSE '' END, count(*)
                FROM service_requests sr WHERE sr.tenant_id = ${tenant} ${byCustomer('sr.customer_name')} AND (${requestsLive})
               GROUP BY 1, 2, 3, 4
            ) facts
           GROUP BY 1, 2, 3, 4
          HAVING sum(n) <> 0) f) AS service_requests,
       (SELECT coalesce(json_agg(f ORDER BY f."createdAt" DESC, f."reportId"), '[]') FROM (
          SELECT r.id AS "reportId", r.inspection_id AS "inspectionId", a.name AS "assetName", a.customer_name AS "customerName",
                 a.location, r.impact, r.outcome, r.rejection_reason AS "rejectionReason", coalesce(t.name, '') AS "templateName",
                 r.created_at AS "createdAt"
            FROM reports r
            JOIN assets a ON a.id = r.asset_id
            LEFT JOIN templates t ON t.id = r.template_id
           WHERE r.tenant_id = ${tenant} ${byCustomer('r.customer_name')} AND ${timeBounds(params, 'r.created_at', range.window)}
           ORDER BY r.created_at DESC, r.id
           LIMIT ${params.add(options.recentReports, 'integer')}) f) AS recent_reports,
       ${activity} AS activity`;
  const { rows } = await db.query({
    // Prepared once per connection: planning this statement costs more than running it.
    name: statementName('reportingOverview', overviewText),
    text: overviewText,
    values: params.values,
  });
  const row = rows[0] as Row;
  const recent = row.recent_reports as Array<Omit<ReportingRecentReport, 'createdAt'> & { createdAt: string | null }>;
  return {
    inspections: row.inspections as InspectionFact[],
    reports: row.reports as ReportFact[],
    assets: row.assets as AssetFacet[],
    serviceRequests: row.service_requests as ServiceRequestFact[],
    recentReports: recent.map((report) => ({ ...report, createdAt: iso(report.createdAt) })),
    activity: row.activity as OverviewFacts['activity'],
  };
}
