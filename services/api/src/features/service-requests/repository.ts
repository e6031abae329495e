import type { Queryable } from '@gantry/db';
import { iso } from '../../http/common-schemas.ts';
import type { ServiceRequest, ServiceRequestEvent, ServiceRequestFile, ServiceRequestStatus } from './schemas.ts';

// SQL of service requests, their history and files. Every read takes the caller's scope:
// a customer-scoped key only ever sees rows whose customer_name equals its own.

export interface RequestScope {
  tenantId: string;
  /** Non-null for customer-scoped keys. */
  customerName: string | null;
}

type Row = Record<string, unknown>;

/** The service request row with its asset (an AssetRef, null when none or out of the caller's scope). */
const requestColumns = `sr.id, sr.display_code, sr.title, sr.description, sr.category, sr.priority, sr.status, sr.source,
  sr.asset_id, sr.assigned_to_user_id, sr.assigned_to, sr.customer_name, sr.customer_email, sr.customer_phone,
  sr.reported_by_name, sr.reported_by_email, sr.location, sr.external_ref, sr.resolution, sr.resolution_reviewed,
  sr.metadata, sr.due_at, sr.resolved_at, sr.closed_at, sr.created_at, sr.updated_at,
  a.id AS asset_ref_id, a.identifier AS asset_identifier, a.name AS asset_name, a.display_code AS asset_display_code,
  coalesce(t.name, '') AS asset_type_name, a.location AS asset_location, a.customer_name AS asset_customer_name`;

/** $2 is the caller's customer scope (null for tenant keys). */
const requestFrom = `service_requests sr
  LEFT JOIN assets a ON a.id = sr.asset_id AND a.tenant_id = sr.tenant_id AND ($2::text IS NULL OR a.customer_name = $2)
  LEFT JOIN asset_types t ON t.id = a.asset_type_id`;

export type ServiceRequestCore = Omit<ServiceRequest, 'files' | 'history'>;

export function toServiceRequestCore(row: Row): ServiceRequestCore {
  const assetRefId = (row.asset_ref_id as string | null) ?? null;
  return {
    id: row.id as string,
    displayCode: row.display_code as string,
    title: row.title as string,
    description: row.description as string,
    category: row.category as ServiceRequest['category'],
    priority: row.priority as ServiceRequest['priority'],
    status: row.status as ServiceRequestStatus,
    source: row.source as string,
    assetId: (row.asset_id as string | null) ?? null,
    asset:
      assetRefId === null
        ? null
        : {
            id: assetRefId,
            identifier: row.asset_identifier as string,
            name: row.asset_name as string,
            displayCode: row.asset_display_code as string,
            assetType: row.asset_type_name as string,
            location: row.asset_location as string,
            customerName: row.asset_customer_name as string,
          },
    assignedToUserId: (row.assigned_to_user_id as string | null) ?? null,
    assignedTo: (row.assigned_to as Record<string, unknown> | null) ?? {},
    customerName: row.customer_name as string,
    customerEmail: row.customer_email as string,
    customerPhone: row.customer_phone as string,
    reportedByName: row.reported_by_name as string,
    reportedByEmail: row.reported_by_email as string,
    location: row.location as string,
    externalRef: row.external_ref as string,
    resolution: row.resolution as string,
    metadata: (row.metadata as Record<string, unknown> | null) ?? {},
    dueAt: iso(row.due_at as Date | null),
    resolvedAt: iso(row.resolved_at as Date | null),
    closedAt: iso(row.closed_at as Date | null),
    createdAt: iso(row.created_at as Date),
    updatedAt: iso(row.updated_at as Date),
  };
}

export function toServiceRequestFile(row: Row): ServiceRequestFile {
  return {
    id: row.id as string,
    filename: row.filename as string,
    mimeType: row.mime_type as string,
    sizeBytes: row.size_bytes as number,
    source: row.source as string,
    sha256: row.sha256 as string,
    createdAt: iso(row.created_at as Date),
  };
}

export function toServiceRequestEvent(row: Row): ServiceRequestEvent {
  return {
    id: row.id as string,
    type: row.type as string,
    fromStatus: (row.from_status as string | null) ?? '',
    toStatus: (row.to_status as string | null) ?? '',
    message: row.message as string,
    source: row.source as string,
    actorName: row.actor_name as string,
    actorEmail: row.actor_email as string,
    changes: (row.changes as Record<string, unknown> | null) ?? null,
    createdAt: iso(row.created_at as Date),
  };
}

const fileColumns =
  'id, service_request_id, filename, stored_name, storage_key, mime_type, size_bytes, sha256, source, created_at';

/** Adds files and history to service request rows, two queries for the whole page. */
async function withFilesAndHistory(db: Queryable, tenantId: string, rows: Row[]): Promise<ServiceRequest[]> {
  if (rows.length === 0) return [];
  const ids = rows.map((row) => row.id as string);
  const [files, events] = await Promise.all([
    db.query(
      `/* api:listServiceRequestFilesOf */
       SELECT ${fileColumns} FROM service_request_files
        WHERE tenant_id = $1 AND service_request_id = ANY ($2::uuid[]) AND deleted_at IS NULL
        ORDER BY created_at, id`,
      [tenantId, ids],
    ),
    db.query(
      `/* api:listServiceRequestEventsOf */
       SELECT id, service_request_id, type, from_status, to_status, message, changes, source, actor_name, actor_email, created_at
         FROM service_request_events
        WHERE tenant_id = $1 AND service_request_id = ANY ($2::uuid[])
        ORDER BY created_at, id`,
      [tenantId, ids],
    ),
  ]);
  const filesOf = groupBy(files.rows as Row[], toServiceRequestFile);
  const historyOf = groupBy(events.rows as Row[], toServiceRequestEvent);
  return rows.map((row) => ({
    ...toServiceRequestCore(row),
    files: filesOf.get(row.id as string) ?? [],
    history: historyOf.get(row.id as string) ?? [],
  }));
}

function groupBy<T>(rows: Row[], map: (row: Row) => T): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const row of rows) {
    const key = row.service_request_id as string;
    const list = groups.get(key) ?? [];
    list.push(map(row));
    groups.set(key, list);
  }
  return groups;
}

/**
 * The newest service requests created in the range (from inclusive, to exclusive; null
 * bounds are open), complete with files and history. Used by the reporting overview.
 */
export async function findRecentServiceRequests(
  db: Queryable,
  scope: { tenantId: string; customerName: string | null },
  range: { from: Date | null; to: Date | null },
  limit: number,
): Promise<ServiceRequest[]> {
  const { rows } = await db.query(
    `/* api:findRecentServiceRequests */
     SELECT ${requestColumns} FROM ${requestFrom}
      WHERE sr.tenant_id = $1 AND ($2::text IS NULL OR sr.customer_name = $2)
        AND ($3::timestamptz IS NULL OR sr.created_at >= $3)
        AND ($4::timestamptz IS NULL OR sr.created_at < $4)
      ORDER BY sr.created_at DESC, sr.seq DESC
      LIMIT $5`,
    [scope.tenantId, scope.customerName, range.from, range.to, limit],
  );
  return withFilesAndHistory(db, scope.tenantId, rows as Row[]);
}

/** One service request in the caller's scope, with files and history; null when not visible. */
export async function readServiceRequest(
  db: Queryable,
  scope: RequestScope,
  id: string,
): Promise<ServiceRequest | null> {
  const { rows } = await db.query(
    `/* api:readServiceRequest */
     SELECT ${requestColumns} FROM ${requestFrom}
      WHERE sr.tenant_id = $1 AND ($2::text IS NULL OR sr.customer_name = $2) AND sr.id = $3`,
    [scope.tenantId, scope.customerName, id],
  );
  const [found] = await withFilesAndHistory(db, scope.tenantId, rows as Row[]);
  return found ?? null;
}

export interface ServiceRequestFilters {
  status?: string[] | undefined;
  priority?: string[] | undefined;
  category?: string[] | undefined;
  assetId?: string | undefined;
  customerName?: string | undefined;
  q?: string | undefined;
  createdFrom: Date | null;
  createdTo: Date | null;
  limit: number;
  offset: number;
}

/** LIKE pattern matching `text` anywhere, with the pattern characters taken literally. */
function containsPattern(text: string): string {
  return `%${text.toLowerCase().replace(/[\\%_]/g, (char) => `\\${char}`)}%`;
}

/** A page of the caller's service requests, newest first, with files and history. */
export async function listServiceRequests(
  db: Queryable,
  scope: RequestScope,
  filters: ServiceRequestFilters,
): Promise<ServiceRequest[]> {
  const params: unknown[] = [scope.tenantId, scope.customerName];
  const where = ['sr.tenant_id = $1', '($2::text IS NULL OR sr.customer_name = $2)'];
  const add = (sql: (placeholder: string) => string, value: unknown) => {
    params.push(value);
    where.push(sql(`$${params.length}`));
  };
  if (filters.status?.length) add((p) => `sr.status = ANY (${p}::text[])`, filters.status);
  if (filters.priority?.length) add((p) => `sr.priority = ANY (${p}::text[])`, filters.priority);
  if (filters.category?.length) add((p) => `sr.category = ANY (${p}::text[])`, filters.category);
  if (filters.assetId !== undefined) add((p) => `sr.asset_id = ${p}`, filters.assetId);
  if (filters.customerName !== undefined) add((p) => `sr.customer_name = ${p}`, filters.customerName);
  if (filters.q) add((p) => `sr.search_text LIKE ${p}`, containsPattern(filters.q));
  if (filters.createdFrom) add((p) => `sr.created_at >= ${p}`, filters.createdFrom);
  if (filters.createdTo) add((p) => `sr.created_at < ${p}`, filters.createdTo);
  params.push(filters.limit, filters.offset);
  const { rows } = await db.query(
    `/* api:listServiceRequests */
     SELECT ${requestColumns} FROM ${requestFrom}
      WHERE ${where.join(' AND ')}
      ORDER BY sr.created_at DESC, sr.seq DESC
      LIMIT $${params.length - 1} OFFSET $${params.length}`,
    params,
  );
  return withFilesAndHistory(db, scope.tenantId, rows as Row[]);
}

/** The stored request plus what the rules need and responses do not show. */
export type StoredServiceRequest = ServiceRequestCore & { resolutionReviewed: boolean };

/** Locks a request of the caller's scope for a change (FOR UPDATE); null when not visible. */
export async function lockServiceRequest(
  db: Queryable,
  scope: RequestScope,
  id: string,
): Promise<StoredServiceRequest | null> {
  const { rows } = await db.query(
    `/* api:lockServiceRequest */
     SELECT ${requestColumns} FROM ${requestFrom}
      WHERE sr.tenant_id = $1 AND ($2::text IS NULL OR sr.customer_name = $2) AND sr.id = $3
        FOR UPDATE OF sr`,
    [scope.tenantId, scope.customerName, id],
  );
  const row = rows[0] as Row | undefined;
  return row ? { ...toServiceRequestCore(row), resolutionReviewed: row.resolution_reviewed as boolean } : null;
}

/** True when the request exists in the caller's scope. */
export async function serviceRequestVisible(db: Queryable, scope: RequestScope, id: string): Promise<boolean> {
  const { rowCount } = await db.query(
    `/* api:serviceRequestVisible */
     SELECT 1 FROM service_requests WHERE tenant_id = $1 AND ($2::text IS NULL OR customer_name = $2) AND id = $3`,
    [scope.tenantId, scope.customerName, id],
  );
  return (rowCount ?? 0) > 0;
}

/** A request of the caller's scope by id or displayCode (case-insensitive), for duplicateOf. */
export async function findServiceRequestRef(
  db: Queryable,
  scope: RequestScope,
  reference: string,
): Promise<{ id: string; displayCode: string } | null> {
  const isUuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(reference);
  const { rows } = await db.query<{ id: string; display_code: string }>(
    `/* api:findServiceRequestRef */
     SELECT id, display_code FROM service_requests
      WHERE tenant_id = $1 AND ($2::text IS NULL OR customer_name = $2)
        AND ${isUuid ? 'id = $3::uuid' : 'display_code = upper($3)'}`,
    [scope.tenantId, scope.customerName, reference],
  );
  const row = rows[0];
  return row ? { id: row.id, displayCode: row.display_code } : null;
}

/** An asset the caller may see (tenant, and the customer of a customer key); null otherwise. */
export async function findVisibleAsset(
  db: Queryable,
  scope: RequestScope,
  assetId: string,
): Promise<{ id: string; customerName: string } | null> {
  const { rows } = await db.query<{ id: string; customer_name: string }>(
    `/* api:findVisibleAsset */
     SELECT id, customer_name FROM assets WHERE tenant_id = $1 AND ($2::text IS NULL OR customer_name = $2) AND id = $3`,
    [scope.tenantId, scope.customerName, assetId],
  );
  const row = rows[0];
  return row ? { id: row.id, customerName: row.customer_name } : null;
}

/** The next human-readable code of the tenant (SR-000001, …); the counter row serialises creators. */
export async function nextDisplayCode(db: Queryable, tenantId: string): Promise<{ seq: number; displayCode: string }> {
  const { rows } = await db.query<{ last_seq: number }>(
    `/* api:nextServiceRequestSeq */
     INSERT INTO service_request_counters (tenant_id, last_seq) VALUES ($1, 1)
     ON CONFLICT (tenant_id) DO UPDATE SET last_seq = service_request_counters.last_seq + 1
     RETURNING last_seq`,
    [tenantId],
  );
  const seq = (rows[0] as { last_seq: number }).last_seq;
  return { seq, displayCode: `SR-${String(seq).padStart(6, '0')}` };
}

/** Columns a create or update writes, by their SQL names. */
export interface ServiceRequestColumns {
  title: string;
  description: string;
  category: string;
  priority: string;
  status: string;
  source: string;
  asset_id: string | null;
  customer_name: string;
  customer_email: string;
  customer_phone: string;
  reported_by_name: string;
  reported_by_email: string;
  location: string;
  external_ref: string;
  resolution: string;
  resolution_reviewed: boolean;
  metadata: Record<string, unknown>;
  due_at: Date | null;
  resolved_at: Date | null;
  closed_at: Date | null;
  cancelled_at: Date | null;
  cancel_reason: string | null;
  duplicate_of: string | null;
}

const jsonColumns = new Set<keyof ServiceRequestColumns>(['metadata']);

export async function insertServiceRequest(
  db: Queryable,
  values: { tenantId: string; seq: number; displayCode: string; createdByKeyId: string } & Omit<
    ServiceRequestColumns,
    'cancelled_at' | 'cancel_reason' | 'duplicate_of'
  >,
): Promise<string> {
  const { rows } = await db.query<{ id: string }>(
    `/* api:insertServiceRequest */
     INSERT INTO service_requests (tenant_id, seq, display_code, title, description, category, priority, status, source,
       asset_id, customer_name, customer_email, customer_phone, reported_by_name, reported_by_email, location,
       external_ref, resolution, resolution_reviewed, metadata, due_at, resolved_at, closed_at, created_by_key_id)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24)
     RETURNING id`,
    [
      values.tenantId,
      values.seq,
      values.displayCode,
      values.title,
      values.description,
      values.category,
      values.priority,
      values.status,
      values.source,
      values.asset_id,
      values.customer_name,
      values.customer_email,
      values.customer_phone,
      values.reported_by_name,
      values.reported_by_email,
      values.location,
      values.external_ref,
      values.resolution,
      values.resolution_reviewed,
      JSON.stringify(values.metadata),
      values.due_at,
      values.resolved_at,
      values.closed_at,
      values.createdByKeyId,
    ],
  );
  return (rows[0] as { id: string }).id;
}

/** Writes the given columns and bumps updated_at. */
export async function updateServiceRequestColumns(
  db: Queryable,
  tenantId: string,
  id: string,
  columns: Partial<ServiceRequestColumns>,
): Promise<void> {
  const params: unknown[] = [tenantId, id];
  const sets = ['updated_at = now()'];
  for (const [name, value] of Object.entries(columns) as [keyof ServiceRequestColumns, unknown][]) {
    params.push(jsonColumns.has(name) ? JSON.stringify(value) : value);
    sets.push(`${name} = $${params.length}`);
  }
  await db.query(
    `/* api:updateServiceRequest */ UPDATE service_requests SET ${sets.join(', ')} WHERE tenant_id = $1 AND id = $2`,
    params,
  );
}

export interface NewServiceRequestEvent {
  type: string;
  fromStatus?: string | null;
  toStatus?: string | null;
  message?: string;
  changes?: Record<string, unknown> | null;
  source: string;
  actorName: string;
  actorEmail?: string;
}

/** Appends history entries in the given order (created_at is the clock time of each insert). */
export async function insertServiceRequestEvents(
  db: Queryable,
  tenantId: string,
  serviceRequestId: string,
  events: NewServiceRequestEvent[],
): Promise<void> {
  for (const event of events) {
    await db.query(
      `/* api:insertServiceRequestEvent */
       INSERT INTO service_request_events
         (tenant_id, service_request_id, type, from_status, to_status, message, changes, source, actor_name, actor_email)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
      [
        tenantId,
        serviceRequestId,
        event.type,
        event.fromStatus ?? null,
        event.toStatus ?? null,
        event.message ?? '',
        event.changes ? JSON.stringify(event.changes) : null,
        event.source,
        event.actorName,
        event.actorEmail ?? '',
      ],
    );
  }
}

// Files ------------------------------------------------------------------------------

export type StoredServiceRequestFile = ServiceRequestFile & { storedName: string; storageKey: string };

function toStoredFile(row: Row): StoredServiceRequestFile {
  return { ...toServiceRequestFile(row), storedName: row.stored_name as string, storageKey: row.storage_key as string };
}

export async function insertServiceRequestFile(
  db: Queryable,
  values: {
    id: string;
    tenantId: string;
    serviceRequestId: string;
    filename: string;
    storedName: string;
    storageKey: string;
    mimeType: string;
    sizeBytes: number;
    sha256: string;
    source: string;
  },
): Promise<StoredServiceRequestFile> {
  const { rows } = await db.query(
    `/* api:insertServiceRequestFile */
     INSERT INTO service_request_files
       (id, tenant_id, service_request_id, filename, stored_name, storage_key, mime_type, size_bytes, sha256, source)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
     RETURNING ${fileColumns}`,
    [
      values.id,
      values.tenantId,
      values.serviceRequestId,
      values.filename,
      values.storedName,
      values.storageKey,
      values.mimeType,
      values.sizeBytes,
      values.sha256,
      values.source,
    ],
  );
  return toStoredFile(rows[0] as Row);
}

export async function listServiceRequestFiles(
  db: Queryable,
  tenantId: string,
  serviceRequestId: string,
): Promise<ServiceRequestFile[]> {
  const { rows } = await db.query(
    `/* api:listServiceRequestFiles */
     SELECT ${fileColumns} FROM service_request_files
      WHERE tenant_id = $1 AND service_request_id = $2 AND deleted_at IS NULL
      ORDER BY created_at, id`,
    [tenantId, serviceRequestId],
  );
  return (rows as Row[]).map(toServiceRequestFile);
}

/** A live (not deleted) file of a request; `lock` takes a row lock for deleting it. */
export async function findServiceRequestFile(
  db: Queryable,
  tenantId: string,
  serviceRequestId: string,
  fileId: string,
  lock = false,
): Promise<StoredServiceRequestFile | null> {
  const { rows } = await db.query(
    `/* api:findServiceRequestFile */
     SELECT ${fileColumns} FROM service_request_files
      WHERE tenant_id = $1 AND service_request_id = $2 AND id = $3 AND deleted_at IS NULL
      ${lock ? 'FOR UPDATE' : ''}`,
    [tenantId, serviceRequestId, fileId],
  );
  const row = rows[0] as Row | undefined;
  return row ? toStoredFile(row) : null;
}

/** Soft-deletes the row (kept for the audit trail); the bytes are removed from storage. */
export async function markServiceRequestFileDeleted(db: Queryable, tenantId: string, fileId: string): Promise<void> {
  await db.query(
    `/* api:deleteServiceRequestFile */ UPDATE service_request_files SET deleted_at = now() WHERE tenant_id = $1 AND id = $2`,
    [tenantId, fileId],
  );
}
