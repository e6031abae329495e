import { z } from 'zod';
import { ErrorResponse, nullableDateTime } from '../../http/common-schemas.ts';
import { defineRoute, type RouteSpec } from '../../http/route.ts';
import { AdminDevice } from './responses.ts';
import type { ProvisioningDeps } from './service.ts';
import {
  listUnknownDevices,
  registerUnknownDevice,
  UnknownDeviceRegister,
  UnknownDevicesQuery,
} from './unknown-devices.service.ts';

const UnknownDevice = z
  .object({
    deviceId: z.string().meta({ description: 'The id in the topic gantry/v1/devices/{deviceId}/{type}' }),
    firstSeenAt: nullableDateTime,
    lastSeenAt: nullableDateTime,
    messageCount: z.number().int().meta({ description: 'Messages received since first seen' }),
    sample: z
      .object({
        topic: z.string(),
        payload: z.string().meta({ description: 'Start of the latest payload as text (at most 512 bytes)' }),
        sizeBytes: z.number().int(),
        truncated: z.boolean(),
      })
      .meta({ description: 'The latest message' }),
  })
  .meta({ id: 'AdminUnknownDevice' });

const UnknownDeviceList = z
  .object({ items: z.array(UnknownDevice), total: z.number().int(), limit: z.number().int(), offset: z.number().int() })
  .meta({ id: 'AdminUnknownDeviceList' });

const UnknownDeviceRegistered = z
  .object({
    tenantId: z.uuid(),
    device: AdminDevice,
    seen: z.object({ firstSeenAt: nullableDateTime, lastSeenAt: nullableDateTime, messageCount: z.number().int() }),
  })
  .meta({ id: 'AdminUnknownDeviceRegistered' });

const errors = {
  400: { description: 'Invalid body or query', schema: ErrorResponse },
  401: { description: 'Missing or invalid admin token', schema: ErrorResponse },
};

/** Devices nobody registered yet: list them, register one onto an asset. */
export function unknownDeviceRoutes(deps: ProvisioningDeps): RouteSpec[] {
  return [
    defineRoute({
      method: 'get',
      base: 'admin',
      path: '/unknown-devices',
      operationId: 'adminListUnknownDevices',
      summary: 'Device ids seen on the broker that no tenant has registered (most recently seen first)',
      description:
        'Their messages are kept in bronze as rejected `unknown_device`, with no tenant. At most 1000 ids are kept; past that the least recently seen are dropped.',
      tags: ['Admin'],
      auth: 'admin',
      request: { query: UnknownDevicesQuery },
      responses: { 200: { description: 'Success', schema: UnknownDeviceList }, ...errors },
      handler: async (ctx, input) => {
        ctx.body = await listUnknownDevices(deps, input.query as UnknownDevicesQuery);
      },
    }),
    defineRoute({
      method: 'post',
      base: 'admin',
      path: '/unknown-devices/:deviceId/register',
      operationId: 'adminRegisterUnknownDevice',
      summary: 'Register a device from the list onto an asset (it joins the asset’s tenant)',
      description:
        'Its next messages are accepted. The messages it sent before stay in bronze as `unknown_device`; `gantry replay --device <deviceId> --from <firstSeenAt> --to <now>` re-parses them.',
      tags: ['Admin'],
      auth: 'admin',
      request: {
        params: z.object({ deviceId: z.string().min(1).max(200) }),
        body: UnknownDeviceRegister,
      },
      responses: {
        201: { description: 'Registered', schema: UnknownDeviceRegistered },
        ...errors,
        404: { description: 'The id is not in the list', schema: ErrorResponse },
        409: { description: 'The id is registered already', schema: ErrorResponse },
      },
      handler: async (ctx, input) => {
        const { deviceId } = input.params as { deviceId: string };
        ctx.status = 201;
        ctx.body = await registerUnknownDevice(deps, deviceId, input.body as UnknownDeviceRegister);
      },
    }),
  ];
}
