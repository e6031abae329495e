import { z } from 'zod';
import { nullableDateTime } from '../../http/common-schemas.ts';
import { ReportingAsset, ReportingAssetType, ReportingTemplate } from '../reporting/schemas.ts';
import { TelemetryGeofence } from '../telemetry/schemas.ts';

// What the admin API answers: the created objects. A resource the external API also
// shows is answered with the external API's very schema (and row mapper), so the two
// never drift apart; the rest are admin-only views.

export const AdminTenant = z
  .object({ id: z.uuid(), name: z.string(), createdAt: nullableDateTime })
  .meta({ id: 'AdminTenant' });

export const AdminApiKey = z
  .object({
    id: z.uuid(),
    name: z.string(),
    customerName: z.string().nullable(),
    customerScoped: z.boolean(),
    enabled: z.boolean(),
    createdAt: nullableDateTime,
    disabledAt: nullableDateTime,
    lastUsedAt: nullableDateTime,
  })
  .meta({ id: 'AdminApiKey' });

export const AdminApiKeyCreated = AdminApiKey.extend({
  key: z.string().meta({ description: 'The key itself; shown in this answer only' }),
}).meta({ id: 'AdminApiKeyCreated' });

/** One model per resource: the admin API answers the external API's asset type. */
export const AdminAssetType = ReportingAssetType;

export const AdminAsset = ReportingAsset;

export const AdminTemplate = ReportingTemplate;

export const AdminInspection = z
  .object({
    id: z.uuid(),
    assetId: z.uuid(),
    templateId: z.uuid().nullable(),
    status: z.string(),
    startedAt: nullableDateTime,
    completedAt: nullableDateTime,
    inspectorName: z.string(),
    operatorIdentifier: z.string(),
    externalRef: z.string(),
    media: z.record(z.string(), z.unknown()),
    createdAt: nullableDateTime,
  })
  .meta({ id: 'AdminInspection' });

export const AdminReport = z
  .object({
    id: z.uuid(),
    inspectionId: z.uuid(),
    assetId: z.uuid(),
    templateId: z.uuid().nullable(),
    status: z.string(),
    impact: z.string(),
    outcome: z.string(),
    rejectionReason: z.string(),
    summary: z.string(),
    media: z.record(z.string(), z.unknown()),
    createdAt: nullableDateTime,
  })
  .meta({ id: 'AdminReport' });

export const AdminDevice = z
  .object({
    id: z.uuid(),
    deviceId: z.string(),
    assetId: z.uuid().nullable(),
    displayName: z.string(),
    notes: z.string(),
    enabled: z.boolean(),
    createdAt: nullableDateTime,
    updatedAt: nullableDateTime,
  })
  .meta({ id: 'AdminDevice' });

export const AdminOperator = z
  .object({ id: z.uuid(), identifier: z.string(), operatorName: z.string(), createdAt: nullableDateTime })
  .meta({ id: 'AdminOperator' });

export const AdminGeofence = TelemetryGeofence;

export const AdminDeleted = z.object({ id: z.uuid(), deleted: z.boolean() });
