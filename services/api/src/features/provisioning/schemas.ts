import { z } from 'zod';
import { zoneGeometrySchema } from '@gantry/contracts';

// Admin API bodies: the external API's field names (the CLI takes the same bodies).

const text = (max: number) => z.string().trim().max(max);
const requiredText = (max: number) => z.string().trim().min(1, 'must not be empty').max(max);
const timestamp = z.iso.datetime({ offset: true, error: 'must be an RFC 3339 timestamp' });

export const TenantCreate = z
  .object({ name: requiredText(200).meta({ description: 'Name of the tenant (the company whose fleet it is)' }) })
  .meta({ id: 'AdminTenantCreate' });

export const ApiKeyCreate = z
  .object({
    name: requiredText(200).meta({ description: 'What the key is for (shown in lists; the key itself is shown once)' }),
    customerName: requiredText(200).nullable().optional().meta({
      description:
        'Set: a customer-scoped key that sees only assets whose customerName is exactly this; absent: a tenant-wide key',
    }),
  })
  .meta({ id: 'AdminApiKeyCreate' });

export const AssetTypeCreate = z
  .object({
    name: requiredText(200).meta({
      description: 'Name of the kind of machine, unique in the tenant (e.g. Straddle carrier)',
    }),
    description: text(2000).optional().meta({ description: 'Free text' }),
    fields: z
      .record(z.string(), z.unknown())
      .optional()
      .meta({ description: 'Free-form JSON object of attributes of this type' }),
  })
  .meta({ id: 'AdminAssetTypeCreate' });

export const AssetCreate = z
  .object({
    name: requiredText(200).meta({ description: 'Name of the machine' }),
    identifier: requiredText(200).meta({
      description: 'Your own unique id of the machine in the tenant (fleet number, serial)',
    }),
    displayCode: text(100).optional().meta({ description: 'Short code shown in lists (default: identifier)' }),
    assetType: requiredText(200).optional().meta({ description: 'Name of an existing asset type of the tenant' }),
    assetTypeId: z.uuid().optional().meta({ description: 'Id of an existing asset type (instead of assetType)' }),
    location: text(500).optional().meta({ description: 'Where the machine works (free text)' }),
    customerName: text(200)
      .optional()
      .meta({ description: 'The customer the machine works for; customer-scoped keys see it when this matches' }),
    customerEmail: text(320).optional().meta({ description: 'E-mail address of the customer' }),
    customerPhone: text(50).optional().meta({ description: 'Phone number of the customer' }),
    lifecycleStatus: requiredText(50).optional().meta({ description: 'Lifecycle status (default active)' }),
    operationalStatus: requiredText(50).optional().meta({ description: 'Operational status (default operational)' }),
    status: requiredText(50)
      .optional()
      .meta({ description: 'The external API name of operationalStatus (used when operationalStatus is absent)' }),
    externalRef: text(200).optional().meta({ description: 'Id of the machine in another system of yours' }),
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
    deviceId: z
      .string()
      .regex(/^[A-Za-z0-9._:-]{1,64}$/, 'must be 1–64 letters, digits or . _ : -')
      .meta({
        description: 'The id the device publishes under: gantry/v1/devices/{deviceId}/{type}; unique in the deployment',
      }),
    assetId: z.uuid().meta({ description: 'The asset (machine) the device is fitted to' }),
    displayName: text(200).optional().meta({ description: 'Name shown for the device' }),
    notes: text(2000).optional().meta({ description: 'Free text' }),
    enabled: z
      .boolean()
      .optional()
      .meta({ description: 'false: its messages are kept in bronze but not used (default true)' }),
  })
  .meta({ id: 'AdminDeviceCreate' });

export const DeviceUpdate = z
  .object({
    assetId: z.uuid().optional().meta({ description: 'Move the device to this asset' }),
    displayName: text(200).optional().meta({ description: 'Name shown for the device' }),
    notes: text(2000).optional().meta({ description: 'Free text' }),
    enabled: z.boolean().optional().meta({ description: 'false: its messages are kept in bronze but not used' }),
  })
  .meta({ id: 'AdminDeviceUpdate' });

export const OperatorCreate = z
  .object({
    identifier: requiredText(64).meta({ description: 'The RFID / operator id devices send in identifier messages' }),
    operatorName: requiredText(200).meta({ description: 'The name of the person' }),
  })
  .meta({ id: 'AdminOperatorCreate' });

export const GeofenceCreate = z
  .object({
    name: requiredText(200).meta({ description: 'Name of the zone' }),
    type: z
      .enum(['allowed', 'forbidden'])
      .meta({ description: 'forbidden: entering raises an alert; allowed: leaving raises an alert' }),
    enabled: z.boolean().optional().meta({ description: 'Default true' }),
    geometry: zoneGeometrySchema.meta({ description: 'GeoJSON Polygon or MultiPolygon, [lon, lat] pairs' }),
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
