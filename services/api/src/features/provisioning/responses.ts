import { z } from 'zod';
import { GeoJSONGeometry, nullableDateTime } from '../../http/common-schemas.ts';

// What the admin API answers: the created objects, named as in the external API.

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

export const AdminAssetType = z
  .object({
    id: z.uuid(),
    name: z.string(),
    description: z.string(),
    fields: z.record(z.string(), z.unknown()),
    assetCount: z.number().int(),
    createdAt: nullableDateTime,
    updatedAt: nullableDateTime,
  })
  .meta({ id: 'AdminAssetType' });

export const AdminAsset = z
  .object({
    id: z.uuid(),
    name: z.string(),
    identifier: z.string(),
    displayCode: z.string(),
    assetType: z.string(),
    assetTypeId: z.uuid().nullable(),
    location: z.string(),
    customerName: z.string(),
    customerEmail: z.string(),
    customerPhone: z.string(),
    lifecycleStatus: z.string(),
    operationalStatus: z.string(),
    status: z.string(),
    externalRef: z.string(),
    latestImpact: z.string(),
    latestOutcome: z.string(),
    createdAt: nullableDateTime,
    updatedAt: nullableDateTime,
    latestInspectionAt: nullableDateTime,
    latestReportAt: nullableDateTime,
    inspectionCount: z.number().int(),
    reportCount: z.number().int(),
  })
  .meta({ id: 'AdminAsset' });

export const AdminTemplate = z
  .object({
    id: z.uuid(),
    name: z.string(),
    description: z.string(),
    status: z.string(),
    latestVersion: z.number().int(),
    assetTypeIds: z.array(z.uuid()),
    createdAt: nullableDateTime,
    updatedAt: nullableDateTime,
  })
  .meta({ id: 'AdminTemplate' });

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

export const AdminGeofence = z
  .object({
    id: z.uuid(),
    name: z.string(),
    type: z.enum(['allowed', 'forbidden']),
    enabled: z.boolean(),
    geometry: GeoJSONGeometry,
    activeAlertCount: z.number().int(),
    assetCount: z.number().int(),
    createdAt: nullableDateTime,
    updatedAt: nullableDateTime,
  })
  .meta({ id: 'AdminGeofence' });

export const AdminDeleted = z.object({ id: z.uuid(), deleted: z.boolean() });
