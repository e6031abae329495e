import { randomUUID } from 'node:crypto';
import type { Readable } from 'node:stream';
import { withTransaction, type Outbox, type Pool, type PoolClient } from '@gantry/db';
import type { Logger } from '@gantry/logger';
import { ConflictError, ForbiddenError, NotFoundError, ValidationError } from '../../errors.ts';
import type { ApiKeyAuth } from '../../http/auth.ts';
import { parseTimeValue, resolveOptionalRange } from '../../http/query.ts';
import { storageKey, type FileStorage } from '../../storage/index.ts';
import * as repository from './repository.ts';
import type {
  ServiceRequest,
  ServiceRequestCancelRequest,
  ServiceRequestCreateRequest,
  ServiceRequestFile,
  ServiceRequestListQuery,
  ServiceRequestStatus,
  ServiceRequestUpdateRequest,
} from './schemas.ts';
import {
  assertResolutionGiven,
  assertTransitionAllowed,
  creatableStatuses,
  isResolvingStatus,
  uncancellableStatuses,
} from './transitions.ts';
import { detectMimeType, type IncomingFile } from './uploads.ts';

export interface ServiceRequestDeps {
  pool: Pool;
  outbox: Outbox;
  storage: FileStorage;
  logger: Logger;
}

/** Who makes a change: the API key, its scope, and how history and files record it. */
export interface Actor extends repository.RequestScope {
  keyId: string;
  keyName: string;
  /** external for tenant keys, customer for customer-scoped keys. */
  source: 'external' | 'customer';
}

export function actorOf(auth: ApiKeyAuth): Actor {
  return {
    tenantId: auth.tenantId,
    customerName: auth.customerName,
    keyId: auth.keyId,
    keyName: auth.keyName,
    source: auth.customerScoped ? 'customer' : 'external',
  };
}

/** Runs inside the change's transaction before it commits (stores an idempotent answer). */
export type Finalize<T> = (client: PoolClient, result: T) => Promise<void>;

type Changes = Record<string, { from: unknown; to: unknown }>;

function notFound(id: string): NotFoundError {
  return new NotFoundError(`service request ${id} not found`, 'service_request_not_found');
}

/** The webhook `data`: the request as the API shows it, without files and history. */
function eventData(request: ServiceRequest): Record<string, unknown> {
  const { files: _files, history: _history, ...core } = request;
  return core;
}

/** A customer key may only name its own customer (403 otherwise); absent means its own. */
function scopedCustomerName(actor: Actor, requested: string | undefined): string | undefined {
  if (actor.customerName === null) return requested;
  if (requested !== undefined && requested !== actor.customerName) {
    throw new ForbiddenError(
      `this API key is scoped to customer "${actor.customerName}" and cannot file or move service requests for customer "${requested}"`,
      'customer_scope',
    );
  }
  return actor.customerName;
}

async function visibleAssetOrFail(client: PoolClient, actor: Actor, assetId: string) {
  const asset = await repository.findVisibleAsset(client, actor, assetId);
  if (!asset)
    throw new ValidationError(
      `invalid body field assetId: no asset ${assetId} visible to this API key`,
      'unknown_asset',
    );
  return asset;
}

function dueDate(value: string | null | undefined): Date | null | undefined {
  if (value === undefined || value === null) return value;
  const parsed = parseTimeValue(value);
  if (!parsed)
    throw new ValidationError('invalid body field dueAt: must be YYYY-MM-DD or an RFC 3339 timestamp', 'invalid_body');
  return parsed.instant;
}

async function transactionNow(client: PoolClient): Promise<Date> {
  const { rows } = await client.query<{ now: Date }>('/* api:transactionNow */ SELECT now() AS now');
  return (rows[0] as { now: Date }).now;
}

async function readOrFail(client: PoolClient, actor: Actor, id: string): Promise<ServiceRequest> {
  const request = await repository.readServiceRequest(client, actor, id);
  if (!request) throw notFound(id);
  return request;
}

// Create ------------------------------------------------------------------------------

export async function createServiceRequest(
  deps: ServiceRequestDeps,
  actor: Actor,
  input: ServiceRequestCreateRequest,
  finalize?: Finalize<ServiceRequest>,
): Promise<ServiceRequest> {
  const status = input.status ?? 'new';
  if (!creatableStatuses.includes(status)) {
    throw new ValidationError(
      `invalid body field status: a service request cannot be created as ${status}; use one of ${creatableStatuses.join(', ')}`,
      'invalid_status',
    );
  }
  const resolution = input.resolution ?? '';
  if (isResolvingStatus(status)) assertResolutionGiven(status, resolution, input.resolutionReviewed);
  const customerName = scopedCustomerName(actor, input.customerName);
  const dueAt = dueDate(input.dueAt) ?? null;

  return withTransaction(deps.pool, async (client) => {
    const asset = input.assetId ? await visibleAssetOrFail(client, actor, input.assetId) : null;
    const now = await transactionNow(client);
    const { seq, displayCode } = await repository.nextDisplayCode(client, actor.tenantId);
    const id = await repository.insertServiceRequest(client, {
      tenantId: actor.tenantId,
      seq,
      displayCode,
      createdByKeyId: actor.keyId,
      title: input.title,
      description: input.description ?? '',
      category: input.category ?? 'other',
      priority: input.priority ?? 'normal',
      status,
      source: actor.source,
      asset_id: asset?.id ?? null,
      // A tenant key filing for an asset files for the asset's customer unless told otherwise.
      customer_name: customerName ?? asset?.customerName ?? '',
      customer_email: input.customerEmail ?? '',
      customer_phone: input.customerPhone ?? '',
      reported_by_name: input.reportedByName ?? '',
      reported_by_email: input.reportedByEmail ?? '',
      location: input.location ?? '',
      external_ref: input.externalRef ?? '',
      resolution,
      resolution_reviewed: input.resolutionReviewed ?? false,
      metadata: input.metadata ?? {},
      due_at: dueAt,
      resolved_at: isResolvingStatus(status) ? now : null,
      closed_at: status === 'closed' ? now : null,
    });
    const actorFields = { source: actor.source, actorName: actor.keyName };
    const events: repository.NewServiceRequestEvent[] = [
      { type: 'created', fromStatus: null, toStatus: status, message: `created as ${displayCode}`, ...actorFields },
    ];
    if (input.comment) events.push({ type: 'comment', message: input.comment, ...actorFields });
    await repository.insertServiceRequestEvents(client, actor.tenantId, id, events);

    const created = await readOrFail(client, actor, id);
    await deps.outbox.enqueue(client, {
      tenantId: actor.tenantId,
      event: 'service_request.created',
      entityType: 'service_request',
      entityId: id,
      customerName: created.customerName || null,
      data: eventData(created),
    });
    await finalize?.(client, created);
    return created;
  });
}

// Update ------------------------------------------------------------------------------

function sameValue(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

const textFields = [
  ['title', 'title'],
  ['description', 'description'],
  ['category', 'category'],
  ['priority', 'priority'],
  ['location', 'location'],
  ['customerEmail', 'customer_email'],
  ['customerPhone', 'customer_phone'],
  ['reportedByName', 'reported_by_name'],
  ['reportedByEmail', 'reported_by_email'],
  ['externalRef', 'external_ref'],
  ['resolution', 'resolution'],
] as const;

/**
 * Applies a PATCH: field changes, a status change by the transition table, a comment.
 * Each kind adds its history entry; a PATCH that changes nothing writes nothing.
 */
export async function updateServiceRequest(
  deps: ServiceRequestDeps,
  actor: Actor,
  id: string,
  input: ServiceRequestUpdateRequest,
  finalize?: Finalize<ServiceRequest>,
): Promise<ServiceRequest> {
  const requestedCustomer =
    input.customerName === undefined ? undefined : scopedCustomerName(actor, input.customerName);
  const dueAt = dueDate(input.dueAt);

  return withTransaction(deps.pool, async (client) => {
    const current = await repository.lockServiceRequest(client, actor, id);
    if (!current) throw notFound(id);
    const columns: Partial<repository.ServiceRequestColumns> = {};
    const changes: Changes = {};

    for (const [field, column] of textFields) {
      const next = input[field];
      if (next === undefined || next === current[field]) continue;
      (columns as Record<string, unknown>)[column] = next;
      changes[field] = { from: current[field], to: next };
    }
    if (requestedCustomer !== undefined && requestedCustomer !== current.customerName) {
      columns.customer_name = requestedCustomer;
      changes.customerName = { from: current.customerName, to: requestedCustomer };
    }
    if (input.assetId !== undefined && input.assetId !== current.assetId) {
      if (input.assetId !== null) await visibleAssetOrFail(client, actor, input.assetId);
      columns.asset_id = input.assetId;
      changes.assetId = { from: current.assetId, to: input.assetId };
    }
    if (dueAt !== undefined) {
      const next = dueAt === null ? null : dueAt.toISOString();
      if (next !== current.dueAt) {
        columns.due_at = dueAt;
        changes.dueAt = { from: current.dueAt, to: next };
      }
    }
    if (input.metadata !== undefined && !sameValue(input.metadata, current.metadata)) {
      columns.metadata = input.metadata;
      changes.metadata = { from: current.metadata, to: input.metadata };
    }
    if (input.resolutionReviewed !== undefined && input.resolutionReviewed !== current.resolutionReviewed) {
      columns.resolution_reviewed = input.resolutionReviewed;
      changes.resolutionReviewed = { from: current.resolutionReviewed, to: input.resolutionReviewed };
    }

    const resolution = columns.resolution ?? current.resolution;
    let statusChange: { from: ServiceRequestStatus; to: ServiceRequestStatus } | null = null;
    if (input.status !== undefined && input.status !== current.status) {
      assertTransitionAllowed(current.displayCode, current.status, input.status);
      if (isResolvingStatus(input.status)) assertResolutionGiven(input.status, resolution, input.resolutionReviewed);
      statusChange = { from: current.status, to: input.status };
      const now = await transactionNow(client);
      columns.status = input.status;
      if (input.status === 'resolved') {
        columns.resolved_at = now;
        columns.closed_at = null;
      } else if (input.status === 'closed') {
        // Closing also resolves: keep the time it was resolved, or resolve it now.
        columns.resolved_at = current.resolvedAt === null ? now : new Date(current.resolvedAt);
        columns.closed_at = now;
      } else {
        columns.resolved_at = null;
        columns.closed_at = null;
        if (input.status === 'reopened' && input.resolutionReviewed === undefined) columns.resolution_reviewed = false;
      }
    } else if (isResolvingStatus(current.status) && resolution.trim() === '') {
      throw new ValidationError(
        `invalid body field resolution: a ${current.status} service request keeps a non-empty resolution`,
        'resolution_required',
      );
    }

    const comment = input.comment ?? '';
    if (Object.keys(columns).length === 0 && comment === '') {
      const unchanged = await readOrFail(client, actor, id);
      await finalize?.(client, unchanged);
      return unchanged;
    }

    await repository.updateServiceRequestColumns(client, actor.tenantId, id, columns);
    const actorFields = { source: actor.source, actorName: actor.keyName };
    const events: repository.NewServiceRequestEvent[] = [];
    if (Object.keys(changes).length > 0) {
      const names = Object.keys(changes).join(', ');
      events.push({ type: 'updated', message: `changed ${names}`, changes, ...actorFields });
    }
    if (statusChange) {
      events.push({
        type: 'status_changed',
        fromStatus: statusChange.from,
        toStatus: statusChange.to,
        message: `status changed from ${statusChange.from} to ${statusChange.to}`,
        ...actorFields,
      });
    }
    if (comment !== '') events.push({ type: 'comment', message: comment, ...actorFields });
    await repository.insertServiceRequestEvents(client, actor.tenantId, id, events);

    const updated = await readOrFail(client, actor, id);
    const allChanges: Changes = statusChange ? { ...changes, status: statusChange } : changes;
    await deps.outbox.enqueue(client, {
      tenantId: actor.tenantId,
      event: 'service_request.updated',
      entityType: 'service_request',
      entityId: id,
      customerName: updated.customerName || null,
      data: { ...eventData(updated), changes: allChanges, comment: comment === '' ? null : comment },
    });
    await finalize?.(client, updated);
    return updated;
  });
}

// Cancel ------------------------------------------------------------------------------

export interface CancelResult {
  id: string;
  cancelled: boolean;
}

export async function cancelServiceRequest(
  deps: ServiceRequestDeps,
  actor: Actor,
  id: string,
  input: ServiceRequestCancelRequest,
  finalize?: Finalize<CancelResult>,
): Promise<CancelResult> {
  return withTransaction(deps.pool, async (client) => {
    const current = await repository.lockServiceRequest(client, actor, id);
    if (!current) throw notFound(id);
    if (uncancellableStatuses.includes(current.status)) {
      const cancellable = (['new', 'reopened', 'triaged', 'in_progress', 'waiting_customer'] as const).join(', ');
      throw new ConflictError(
        `service request ${current.displayCode} is ${current.status} and cannot be cancelled; only ${cancellable} requests can`,
        'invalid_transition',
      );
    }
    let duplicate: { id: string; displayCode: string } | null = null;
    if (input.duplicateOf !== undefined) {
      duplicate = await repository.findServiceRequestRef(client, actor, input.duplicateOf);
      if (!duplicate) {
        throw new ValidationError(
          `invalid body field duplicateOf: no service request "${input.duplicateOf}" visible to this API key`,
          'unknown_duplicate',
        );
      }
      if (duplicate.id === current.id) {
        throw new ValidationError(
          'invalid body field duplicateOf: a service request cannot duplicate itself',
          'invalid_duplicate',
        );
      }
    }
    const now = await transactionNow(client);
    await repository.updateServiceRequestColumns(client, actor.tenantId, id, {
      status: 'cancelled',
      cancelled_at: now,
      cancel_reason: input.reason,
      duplicate_of: duplicate?.id ?? null,
    });
    await repository.insertServiceRequestEvents(client, actor.tenantId, id, [
      {
        type: 'cancelled',
        fromStatus: current.status,
        toStatus: 'cancelled',
        message: input.reason,
        changes: { reason: input.reason, duplicateOf: duplicate },
        source: actor.source,
        actorName: actor.keyName,
      },
    ]);
    const cancelled = await readOrFail(client, actor, id);
    await deps.outbox.enqueue(client, {
      tenantId: actor.tenantId,
      event: 'service_request.cancelled',
      entityType: 'service_request',
      entityId: id,
      customerName: cancelled.customerName || null,
      data: { ...eventData(cancelled), cancelReason: input.reason, duplicateOf: duplicate },
    });
    const result = { id, cancelled: true };
    await finalize?.(client, result);
    return result;
  });
}

// Read --------------------------------------------------------------------------------

export async function getServiceRequest(deps: ServiceRequestDeps, actor: Actor, id: string): Promise<ServiceRequest> {
  const request = await repository.readServiceRequest(deps.pool, actor, id);
  if (!request) throw notFound(id);
  return request;
}

export async function listServiceRequests(deps: ServiceRequestDeps, actor: Actor, query: ServiceRequestListQuery) {
  const range = resolveOptionalRange(query);
  const items = await repository.listServiceRequests(deps.pool, actor, {
    status: query.status,
    priority: query.priority,
    category: query.category,
    assetId: query.assetId,
    customerName: query.customerName,
    q: query.q,
    createdFrom: range.from,
    createdTo: range.to,
    limit: query.limit,
    offset: query.offset,
  });
  return {
    items,
    paging: { limit: query.limit, offset: query.offset },
    scope: { customerName: actor.customerName, customerScoped: actor.customerName !== null },
  };
}

// Files -------------------------------------------------------------------------------

export async function assertServiceRequestVisible(deps: ServiceRequestDeps, actor: Actor, id: string): Promise<void> {
  if (!(await repository.serviceRequestVisible(deps.pool, actor, id))) throw notFound(id);
}

export interface StoredUpload {
  fileId: string;
  storageKey: string;
}

/** Streams an uploaded file into storage (before anything is written to the database). */
export async function storeUploadBytes(
  deps: ServiceRequestDeps,
  actor: Actor,
  requestId: string,
  file: IncomingFile,
): Promise<StoredUpload> {
  const fileId = randomUUID();
  const key = storageKey(actor.tenantId, requestId, fileId);
  await deps.storage.put(key, file.stream);
  return { fileId, storageKey: key };
}

export async function discardUploadBytes(deps: ServiceRequestDeps, stored: StoredUpload): Promise<void> {
  await deps.storage.delete(stored.storageKey);
}

/** Records a stored upload: the file row, a history entry, the updated event. */
export async function recordUpload(
  deps: ServiceRequestDeps,
  actor: Actor,
  requestId: string,
  file: IncomingFile,
  stored: StoredUpload,
) {
  const mimeType = await detectMimeType(file.inspection.head, file.declaredMimeType);
  try {
    return await withTransaction(deps.pool, async (client) => {
      const current = await repository.lockServiceRequest(client, actor, requestId);
      if (!current) throw notFound(requestId);
      const row = await repository.insertServiceRequestFile(client, {
        id: stored.fileId,
        tenantId: actor.tenantId,
        serviceRequestId: requestId,
        filename: file.filename,
        storedName: file.storedName,
        storageKey: stored.storageKey,
        mimeType,
        sizeBytes: file.inspection.sizeBytes,
        sha256: file.inspection.sha256,
        source: actor.source,
      });
      await fileChanged(deps, client, actor, requestId, 'file_added', `added file ${row.filename}`, {
        fileAdded: { id: row.id, filename: row.filename, mimeType, sizeBytes: row.sizeBytes },
      });
      return {
        id: row.id,
        filename: row.storedName,
        mimeType: row.mimeType,
        sizeBytes: row.sizeBytes,
        sha256: row.sha256,
      };
    });
  } catch (error) {
    await deps.storage.delete(stored.storageKey).catch(() => undefined);
    throw error;
  }
}

/** History entry, updated_at and the service_request.updated event of a file change. */
async function fileChanged(
  deps: ServiceRequestDeps,
  client: PoolClient,
  actor: Actor,
  requestId: string,
  type: 'file_added' | 'file_deleted',
  message: string,
  changes: Record<string, unknown>,
): Promise<void> {
  await repository.updateServiceRequestColumns(client, actor.tenantId, requestId, {});
  await repository.insertServiceRequestEvents(client, actor.tenantId, requestId, [
    { type, message, changes, source: actor.source, actorName: actor.keyName },
  ]);
  const updated = await readOrFail(client, actor, requestId);
  await deps.outbox.enqueue(client, {
    tenantId: actor.tenantId,
    event: 'service_request.updated',
    entityType: 'service_request',
    entityId: requestId,
    customerName: updated.customerName || null,
    data: { ...eventData(updated), changes, comment: null },
  });
}

export async function listFiles(
  deps: ServiceRequestDeps,
  actor: Actor,
  requestId: string,
): Promise<{ items: ServiceRequestFile[] }> {
  await assertServiceRequestVisible(deps, actor, requestId);
  return { items: await repository.listServiceRequestFiles(deps.pool, actor.tenantId, requestId) };
}

export async function openFile(
  deps: ServiceRequestDeps,
  actor: Actor,
  requestId: string,
  fileId: string,
): Promise<{ file: repository.StoredServiceRequestFile; stream: Readable; sizeBytes: number }> {
  await assertServiceRequestVisible(deps, actor, requestId);
  const file = await repository.findServiceRequestFile(deps.pool, actor.tenantId, requestId, fileId);
  if (!file) throw new NotFoundError(`file ${fileId} not found on service request ${requestId}`, 'file_not_found');
  const object = await deps.storage.get(file.storageKey);
  if (!object) {
    deps.logger.error({ fileId, storageKey: file.storageKey }, 'stored file is missing from storage');
    throw new NotFoundError(`the content of file ${fileId} is no longer available`, 'file_not_found');
  }
  return { file, ...object };
}

export async function deleteFile(deps: ServiceRequestDeps, actor: Actor, requestId: string, fileId: string) {
  const file = await withTransaction(deps.pool, async (client) => {
    const current = await repository.lockServiceRequest(client, actor, requestId);
    if (!current) throw notFound(requestId);
    const found = await repository.findServiceRequestFile(client, actor.tenantId, requestId, fileId, true);
    if (!found) throw new NotFoundError(`file ${fileId} not found on service request ${requestId}`, 'file_not_found');
    await repository.markServiceRequestFileDeleted(client, actor.tenantId, fileId);
    await fileChanged(deps, client, actor, requestId, 'file_deleted', `deleted file ${found.filename}`, {
      fileDeleted: { id: found.id, filename: found.filename },
    });
    return found;
  });
  // After the commit: the row says deleted, so losing the bytes now cannot hurt a reader.
  await deps.storage
    .delete(file.storageKey)
    .catch((error: unknown) =>
      deps.logger.warn({ fileId, error: (error as Error).message }, 'could not remove a deleted file from storage'),
    );
  return { id: fileId, deleted: true };
}
