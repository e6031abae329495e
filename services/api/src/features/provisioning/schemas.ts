import { z } from 'zod';
import { zoneGeometrySchema } from '@gantry/contracts';

// Admin API bodies (DESIGN §6): the external API's field names.

const text = (max: number) => z.string().trim().max(max);
const requiredText = (max: number) => z.string().trim().min(1, 'must not be empty').max(max);
const timestamp = z.iso.datetime({ offset: true, error: 'must be an RFC 3339 timestamp' });

export const TenantCreate = z.object({ name: requiredText(200) }).meta({ id: 'AdminTenantCreate' });

export const ApiKeyCreate = z
  .object({
    name: requiredText(200),
    customerName: requiredText(200).nullable().optional(),
  })
  .meta({ id: 'AdminApiKeyCreate' });

export const AssetTypeCreate = z
  .object({
    name: requiredText(200),
    description: text(2000).optional(),
    fields: z.record(z.string(), z.unknown()).optional(),
  })
  .meta({ id: 'AdminAssetTypeCreate' });

export const AssetCreate = z
  .object({
    name: requiredText(200),
    identifier: requiredText(200),
    displayCode: text(100).optional(),
    assetType: requiredText(200).optional(),
    assetTypeId: z.uuid().optional(),
    location: text(500).optional(),
    customerName: text(200).optional(),
    customerEmail: text(320).optional(),
    customerPhone: text(50).optional(),
    lifecycleStatus: requiredText(50).optional(),
    operationalStatus: requiredText(50).optional(),
    status: requiredText(50)
      .optional()
      .meta({ description: 'The external API name of operationalStatus (used when operationalStatus is absent)' }),
    externalRef: text(200).optional(),
  })
  .meta({ id: 'AdminAssetCreate' });

export const TemplateCreate = z
  .object({
    name: requiredText(200),
    description: text(2000).optional(),
    status: requiredText(50).optional(),
    latestVersion: z.number().int().min(1).optional(),
    assetTypeIds: z.array(z.uuid()).max(1000).optional(),
  })
  .meta({ id: 'AdminTemplateCreate' });

const media = z.record(z.string(), z.unknown());

export const InspectionCreate = z
  .object({
    assetId: z.uuid(),
    templateId: z.uuid().nullable().optional(),
    templateVersion: z.number().int().min(1).optional(),
    status: requiredText(50).optional(),
    startedAt: timestamp.nullable().optional(),
    completedAt: timestamp.nullable().optional(),
    inspectorName: text(200).optional(),
    operatorIdentifier: text(64).optional(),
    externalRef: text(200).optional(),
    notes: text(5000).optional(),
    media: media.optional(),
  })
  .meta({ id: 'AdminInspectionCreate' });

export const ReportCreate = z
  .object({
    inspectionId: z.uuid(),
    status: requiredText(50).optional(),
    impact: requiredText(50).optional(),
    outcome: requiredText(50).optional(),
    rejectionReason: text(2000).optional(),
    summary: text(5000).optional(),
    externalRef: text(200).optional(),
    media: media.optional(),
    createdAt: timestamp.optional(),
  })
  .meta({ id: 'AdminReportCreate' });

export const DeviceCreate = z
  .object({
    deviceId: z.string().regex(/^[A-Za-z0-9._:-]{1,64}$/, 'must be 1–64 letters, digits or . _ : -'),
    assetId: z.uuid(),
    displayName: text(200).optional(),
    notes: text(2000).optional(),
    enabled: z.boolean().optional(),
  })
  .meta({ id: 'AdminDeviceCreate' });

export const DeviceUpdate = z
  .object({
    assetId: z.uuid().optional(),
    displayName: text(200).optional(),
    notes: text(2000).optional(),
    enabled: z.boolean().optional(),
  })
  .meta({ id: 'AdminDeviceUpdate' });

export const OperatorCreate = z
  .object({ identifier: requiredText(64), operatorName: requiredText(200) })
  .meta({ id: 'AdminOperatorCreate' });

export const GeofenceCreate = z
  .object({
    name: requiredText(200),
    type: z.enum(['allowed', 'forbidden']),
    enabled: z.boolean().optional(),
    geometry: zoneGeometrySchema,
  })
  .meta({ id: 'AdminGeofenceCreate' });

export const GeofenceUpdate = z
  .object({
    name: requiredText(200).optional(),
    type: z.enum(['allowed', 'forbidden']).optional(),
    enabled: z.boolean().optional(),
    geometry: zoneGeometrySchema.optional(),
  })
  .meta({ id: 'AdminGeofenceUpdate' });

export type TenantCreate = z.infer<typeof TenantCreate>;
export type ApiKeyCreate = z.infer<typeof ApiKeyCreate>;
export type AssetTypeCreate = z.infer<typeof AssetTypeCreate>;
export type AssetCreate = z.infer<typeof AssetCreate>;
export type TemplateCreate = z.infer<typeof TemplateCreate>;
export type InspectionCreate = z.infer<typeof InspectionCreate>;
export type ReportCreate = z.infer<typeof ReportCreate>;
export type DeviceCreate = z.infer<typeof DeviceCreate>;
export type DeviceUpdate = z.infer<typeof DeviceUpdate>;
export type OperatorCreate = z.infer<typeof OperatorCreate>;
export type GeofenceCreate = z.infer<typeof GeofenceCreate>;
export type GeofenceUpdate = z.infer<typeof GeofenceUpdate>;
