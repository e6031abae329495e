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

/** The service request row with its asset (as an AssetRef, null when out of the caller's scope). */
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
    assignedTo: (row.assigned_to as Record<string, unknown> | null) ?? null,
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
    fromStatus: (row.from_status as string | null) ?? null,
    toStatus: (row.to_status as string | null) ?? null,
    message: row.message as string,
    source: row.source as string,
    actorName: row.actor_name as string,
    actorEmail: row.actor_email as string,
    changes: (row.changes as Record<string, unknown> | null) ?? null,
    createdAt: iso(row.created_at as Date),
  };
}

const fileColumns = 'id, service_request_id, filename, stored_name, storage_key, mime_type, size_bytes, sha256, source, created_at';

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
