import { DEVICE_ID_PATTERN } from '@gantry/contracts';
import { withTransaction } from '@gantry/db';
import { z } from 'zod';
import { NotFoundError, ValidationError } from '../../errors.ts';
import { iso } from '../../http/common-schemas.ts';
import { createDevice, type ProvisioningDeps } from './service.ts';

// Devices nobody registered yet: ids seen on the broker that no tenant has. Ingest keeps
// the table (services/ingest/src/storage/unknown-devices.ts, at most 1000 ids, least
// recently seen evicted); the back office lists it and registers an id onto an asset.

export const UnknownDeviceRegister = z
  .object({
    assetId: z.uuid().meta({ description: 'The asset the device is fitted to; the device joins its tenant' }),
    displayName: z.string().trim().max(200).optional().meta({ description: 'Name shown for the device' }),
    notes: z.string().trim().max(2000).optional().meta({ description: 'Free text' }),
  })
  .meta({ id: 'AdminUnknownDeviceRegister' });
export type UnknownDeviceRegister = z.infer<typeof UnknownDeviceRegister>;

export const UnknownDevicesQuery = z.object({
  limit: z.coerce
    .number({ error: 'must be an integer between 1 and 500' })
    .int('must be an integer between 1 and 500')
    .min(1, 'must be an integer between 1 and 500')
    .max(500, 'must be an integer between 1 and 500')
    .default(100)
    .meta({ description: 'Page size, 1–500' }),
  offset: z.coerce
    .number({ error: 'must be an integer ≥ 0' })
    .int('must be an integer ≥ 0')
    .min(0, 'must be an integer ≥ 0')
    .max(1_000_000, 'is too large')
    .default(0)
    .meta({ description: 'Zero-based offset of the first row' }),
});
export type UnknownDevicesQuery = z.infer<typeof UnknownDevicesQuery>;

type Row = Record<string, unknown>;

/** The sample payload as text: UTF-8 with invalid bytes replaced, NUL shown as U+FFFD. */
function sampleText(payload: Buffer): string {
  return payload.toString('utf8').replaceAll('\u0000', '\uFFFD');
}

export function toUnknownDevice(row: Row) {
  const payload = row.sample_payload as Buffer;
  const size = row.sample_size as number;
  return {
    deviceId: row.device_key as string,
    firstSeenAt: iso(row.first_seen_at as Date),
    lastSeenAt: iso(row.last_seen_at as Date),
    messageCount: Number(row.message_count),
    sample: {
      topic: row.sample_topic as string,
      payload: sampleText(payload),
      sizeBytes: size,
      truncated: size > payload.length,
    },
  };
}

/** Most recently seen first; registered ids never show (registration may race ingest). */
export async function listUnknownDevices(deps: ProvisioningDeps, query: UnknownDevicesQuery) {
  const { rows } = await deps.pool.query(
    `/* admin:listUnknownDevices */
     SELECT u.*, count(*) OVER () AS total FROM unknown_devices u
     WHERE NOT EXISTS (SELECT 1 FROM devices d WHERE d.device_id = u.device_key)
     ORDER BY u.last_seen_at DESC, u.device_key
     LIMIT $1 OFFSET $2`,
    [query.limit, query.offset],
  );
  let total = Number((rows[0] as Row | undefined)?.total ?? 0);
  if (rows.length === 0 && query.offset > 0) {
    const counted = await deps.pool.query<{ total: number }>(
      `/* admin:countUnknownDevices */ SELECT count(*)::int AS total FROM unknown_devices u
       WHERE NOT EXISTS (SELECT 1 FROM devices d WHERE d.device_id = u.device_key)`,
    );
    total = counted.rows[0]?.total ?? 0;
  }
  return { items: rows.map((row) => toUnknownDevice(row as Row)), total, limit: query.limit, offset: query.offset };
}

/**
 * Registers an id from the list onto an asset (the device joins the asset's tenant) and
 * takes it off the list. Its next messages are accepted; the ones already kept in bronze
 * as unknown_device can be re-parsed with `gantry replay --device <id>`.
 */
export async function registerUnknownDevice(deps: ProvisioningDeps, deviceId: string, input: UnknownDeviceRegister) {
  if (!DEVICE_ID_PATTERN.test(deviceId)) throw new NotFoundError(`device "${deviceId}" has not been seen`);
  const seen = await deps.pool.query(
    `/* admin:readUnknownDevice */ SELECT * FROM unknown_devices WHERE device_key = $1`,
    [deviceId],
  );
  if (!seen.rows[0])
    throw new NotFoundError(
      `device "${deviceId}" is not in the list of unknown devices; register it with POST /tenants/{tenantId}/devices`,
    );
  const asset = await deps.pool.query<{ tenant_id: string }>(
    `/* admin:assetTenant */ SELECT tenant_id FROM assets WHERE id = $1`,
    [input.assetId],
  );
  const tenantId = asset.rows[0]?.tenant_id;
  if (!tenantId) throw new ValidationError(`invalid body field assetId: no asset ${input.assetId}`, 'invalid_body');
  const device = await createDevice(deps, tenantId, { deviceId, ...input });
  const before = toUnknownDevice(seen.rows[0] as Row);
  await withTransaction(deps.pool, (client) =>
    client.query(`/* admin:forgetUnknownDevice */ DELETE FROM unknown_devices WHERE device_key = $1`, [deviceId]),
  );
  return {
    tenantId,
    device,
    seen: { firstSeenAt: before.firstSeenAt, lastSeenAt: before.lastSeenAt, messageCount: before.messageCount },
  };
}
