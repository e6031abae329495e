import { z } from 'zod';
import { ExternalApiKeyScope, nullableDateTime } from '../../http/common-schemas.ts';
import { MeResponse } from '../me/routes.ts';
import {
  ReportingAsset,
  ReportingAssetType,
  ReportingInspection,
  ReportingReport,
  ReportingTemplate,
} from '../reporting/schemas.ts';
import { TelemetryDevice, TelemetryGeofence, TelemetryOperator } from '../telemetry/schemas.ts';

// What the admin API answers: the created objects. One model per resource: a resource
// the external API shows is answered with the external API's very schema and read
// through its row mapper, so the two never drift apart. Where the admin view differs
// (a registration rather than live figures, fields only the back office sees), its
// schema is derived from the external one (pick, extend) rather than written again.

export const AdminTenant = MeResponse.shape.tenant.extend({ createdAt: nullableDateTime }).meta({ id: 'AdminTenant' });

/** The key's scope as `GET /me` shows it, with what only the back office sees. */
export const AdminApiKey = ExternalApiKeyScope.extend({
  id: z.uuid(),
  enabled: z.boolean(),
  createdAt: nullableDateTime,
  disabledAt: nullableDateTime,
  lastUsedAt: nullableDateTime,
}).meta({ id: 'AdminApiKey' });

export const AdminApiKeyCreated = AdminApiKey.extend({
  key: z.string().meta({ description: 'The key itself; shown in this answer only' }),
}).meta({ id: 'AdminApiKeyCreated' });

export const AdminAssetType = ReportingAssetType;

export const AdminAsset = ReportingAsset;

export const AdminTemplate = ReportingTemplate;

export const AdminInspection = ReportingInspection;

export const AdminReport = ReportingReport;

export const AdminGeofence = TelemetryGeofence;

/**
 * A device's registration. The external API shows a device with its live state (and
 * only while it has an asset); the admin API answers what was written, including a
 * device whose asset was deleted (assetId null). The shared fields are the external
 * API's own.
 */
export const AdminDevice = TelemetryDevice.pick({
  id: true,
  deviceId: true,
  displayName: true,
  notes: true,
  enabled: true,
})
  .extend({ assetId: z.uuid().nullable(), createdAt: nullableDateTime, updatedAt: nullableDateTime })
  .meta({ id: 'AdminDevice' });

/**
 * A registered operator (identifier → name). The external API shows operators with
 * their activity in a range; the name fields are its own.
 */
export const AdminOperator = TelemetryOperator.pick({ identifier: true, operatorName: true })
  .extend({ id: z.uuid(), createdAt: nullableDateTime })
  .meta({ id: 'AdminOperator' });

export const AdminDeleted = z.object({ id: z.uuid(), deleted: z.boolean() });
