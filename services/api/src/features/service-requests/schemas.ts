import { z } from 'zod';
import { AssetRef, nullableDateTime, Paging, Scope } from '../../http/common-schemas.ts';
import { limitParam, offsetParam, timeParam } from '../../http/query.ts';

// The spec's Service requests part: the resource, its history and files, the bodies of
// create / update / cancel, and the list query.

export const serviceRequestCategories = [
  'defect',
  'maintenance_request',
  'safety',
  'cleaning',
  'access',
  'other',
] as const;
export const serviceRequestPriorities = ['low', 'normal', 'high', 'urgent'] as const;
export const serviceRequestStatuses = [
  'new',
  'reopened',
  'triaged',
  'in_progress',
  'waiting_customer',
  'resolved',
  'closed',
  'cancelled',
] as const;

export const ServiceRequestCategory = z.enum(serviceRequestCategories);
export const ServiceRequestPriority = z.enum(serviceRequestPriorities);
export const ServiceRequestStatus = z.enum(serviceRequestStatuses);
export type ServiceRequestStatus = z.infer<typeof ServiceRequestStatus>;

export const ServiceRequestFile = z
  .object({
    id: z.uuid(),
    filename: z.string().meta({ description: 'Original file name as uploaded (sanitised)' }),
    mimeType: z.string().meta({ description: 'Detected from the bytes where possible, else the declared type' }),
    sizeBytes: z.number().int(),
    source: z.string().meta({ description: 'Upload source: external (tenant key) or customer (customer key)' }),
    sha256: z.string().meta({ description: 'Hex SHA-256 of the stored bytes' }),
    createdAt: nullableDateTime,
  })
  .meta({ id: 'ServiceRequestFile' });
export type ServiceRequestFile = z.infer<typeof ServiceRequestFile>;

export const ServiceRequestEvent = z
  .object({
    id: z.uuid(),
    type: z
      .string()
      .meta({ description: 'created, status_changed, updated, comment, cancelled, file_added or file_deleted' }),
    fromStatus: z
      .string()
      .meta({ description: 'Status before a status change; empty for entries that change no status' }),
    toStatus: z
      .string()
      .meta({ description: 'Status after a status change (or at creation); empty for entries that change no status' }),
    message: z.string(),
    source: z.string().meta({ description: 'internal, external or customer' }),
    actorName: z.string(),
    actorEmail: z.string(),
    changes: z.record(z.string(), z.unknown()).nullable().meta({
      description:
        'For updated entries: each changed field with its old and new value ({"priority": {"from": "normal", "to": "high"}})',
    }),
    createdAt: nullableDateTime,
  })
  .meta({ id: 'ServiceRequestEvent' });
export type ServiceRequestEvent = z.infer<typeof ServiceRequestEvent>;

export const ServiceRequest = z
  .object({
    id: z.uuid(),
    displayCode: z.string().meta({ description: 'Human-readable code, unique per tenant', example: 'SR-000123' }),
    title: z.string(),
    description: z.string(),
    category: ServiceRequestCategory,
    priority: ServiceRequestPriority,
    status: ServiceRequestStatus,
    source: z.string().meta({ description: 'internal, external, customer or widget' }),
    assetId: z.uuid().nullable(),
    // null without a linked asset, or when the linked asset is outside the caller's
    // customer scope (assetId stays): a placeholder object would read as a real asset.
    // (No .meta here: it would inline AssetRef instead of referring to it.)
    asset: AssetRef.nullable(),
    assignedToUserId: z.uuid().nullable(),
    assignedTo: z.record(z.string(), z.unknown()).meta({ description: 'The assignee; {} when unassigned' }),
    customerName: z.string(),
    customerEmail: z.string(),
    customerPhone: z.string(),
    reportedByName: z.string(),
    reportedByEmail: z.string(),
    location: z.string(),
    externalRef: z.string(),
    resolution: z.string(),
    metadata: z.record(z.string(), z.unknown()),
    dueAt: nullableDateTime,
    resolvedAt: nullableDateTime,
    closedAt: nullableDateTime,
    createdAt: nullableDateTime,
    updatedAt: nullableDateTime,
    files: z.array(ServiceRequestFile),
    history: z.array(ServiceRequestEvent),
  })
  .meta({ id: 'ServiceRequest' });
export type ServiceRequest = z.infer<typeof ServiceRequest>;

export const ServiceRequestListResponse = z
  .object({ items: z.array(ServiceRequest), paging: Paging, scope: Scope })
  .meta({ id: 'ServiceRequestListResponse' });

export const ServiceRequestFileListResponse = z
  .object({ items: z.array(ServiceRequestFile) })
  .meta({ id: 'ServiceRequestFileListResponse' });

export const FileUploadResponse = z
  .object({
    id: z.uuid(),
    filename: z.string().meta({ description: 'Stored (sanitised) file name' }),
    mimeType: z.string(),
    sizeBytes: z.number().int(),
    sha256: z.string(),
  })
  .meta({ id: 'FileUploadResponse' });

// Request bodies ---------------------------------------------------------------------

const text = (max: number) => z.string().trim().max(max, `must be at most ${max} characters`);
const dueAt = timeParam.meta({ description: 'YYYY-MM-DD (start of that UTC day) or RFC 3339' });
const metadata = z
  .record(z.string(), z.unknown())
  .refine((value) => JSON.stringify(value).length <= 64 * 1024, 'must be at most 64 KiB as JSON');

const title = z.string().trim().min(1, 'must not be empty').max(500, 'must be at most 500 characters');

/** Every field a client may set; create requires title, update requires nothing. */
const ServiceRequestFields = z.object({
  title,
  description: text(20_000),
  category: ServiceRequestCategory,
  priority: ServiceRequestPriority,
  status: ServiceRequestStatus,
  assetId: z.uuid('must be a UUID').nullable(),
  location: text(500),
  customerName: text(200),
  customerEmail: text(320),
  customerPhone: text(50),
  reportedByName: text(200),
  reportedByEmail: text(320),
  externalRef: text(200),
  dueAt: dueAt.nullable(),
  comment: text(20_000).meta({ description: 'Adds a comment entry to the history' }),
  resolution: text(20_000).meta({ description: 'Required (non-empty) when resolving or closing' }),
  resolutionReviewed: z.boolean().meta({ description: 'Must be true when resolving or closing' }),
  metadata,
});

export const ServiceRequestCreateRequest = ServiceRequestFields.partial()
  .required({ title: true })
  .meta({ id: 'ServiceRequestCreateRequest' });
export type ServiceRequestCreateRequest = z.infer<typeof ServiceRequestCreateRequest>;

export const ServiceRequestUpdateRequest = ServiceRequestFields.partial().meta({ id: 'ServiceRequestUpdateRequest' });
export type ServiceRequestUpdateRequest = z.infer<typeof ServiceRequestUpdateRequest>;

export const ServiceRequestCancelRequest = z
  .object({
    reason: z.string().trim().min(1, 'must not be empty').max(2000, 'must be at most 2000 characters'),
    duplicateOf: z
      .string()
      .trim()
      .min(1, 'must not be empty')
      .max(200)
      .optional()
      .meta({ description: 'The id (UUID) or displayCode of the request this one duplicates' }),
  })
  .meta({ id: 'ServiceRequestCancelRequest' });
export type ServiceRequestCancelRequest = z.infer<typeof ServiceRequestCancelRequest>;

// List query -------------------------------------------------------------------------

/** A comma-separated list of enum values ("new,triaged"). */
function enumList<T extends readonly [string, ...string[]]>(values: T) {
  return z
    .string()
    .transform((raw) =>
      raw
        .split(',')
        .map((part) => part.trim())
        .filter((part) => part !== ''),
    )
    .refine(
      (parts) => parts.every((part) => (values as readonly string[]).includes(part)),
      `must be one or more of ${values.join(', ')} (comma-separated)`,
    )
    .transform((parts) => parts as T[number][])
    .meta({ description: `One or more of ${values.join(', ')}, comma-separated` });
}

export const ServiceRequestListQuery = z.object({
  status: enumList(serviceRequestStatuses).optional(),
  priority: enumList(serviceRequestPriorities).optional(),
  category: enumList(serviceRequestCategories).optional(),
  assetId: z.uuid('must be a UUID').optional(),
  customerName: z
    .string()
    .max(200)
    .optional()
    .meta({ description: 'Exact customer name (customer keys are always limited to their own)' }),
  q: z
    .string()
    .trim()
    .max(200)
    .optional()
    .meta({ description: 'Case-insensitive search over title, displayCode and externalRef' }),
  from: timeParam.optional().meta({ description: 'Created at or after (YYYY-MM-DD = start of that UTC day)' }),
  to: timeParam.optional().meta({ description: 'Created before (a date-only value includes that whole day)' }),
  limit: limitParam,
  offset: offsetParam,
});
export type ServiceRequestListQuery = z.infer<typeof ServiceRequestListQuery>;
