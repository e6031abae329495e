import { z } from 'zod';
import { ExternalApiKeyScope, ErrorResponse } from '../../http/common-schemas.ts';
import { requireApiKey } from '../../http/auth.ts';
import { defineRoute, type RouteSpec } from '../../http/route.ts';

export const API_VERSION_LABEL = 'v1';

export const MeResponse = z
  .object({
    tenant: z.object({ id: z.uuid(), name: z.string() }),
    apiKey: ExternalApiKeyScope,
    version: z.string().meta({ example: 'v1' }),
  })
  .meta({ id: 'Me' });

export function meRoutes(): RouteSpec[] {
  return [
    defineRoute({
      method: 'get',
      base: 'external',
      path: '/me',
      operationId: 'getMe',
      summary: 'The tenant, key scope and API version of the calling key',
      description: 'Intended as the first call to verify the key, tenant and scope.',
      tags: ['Key and scope'],
      auth: 'apiKey',
      responses: {
        200: { description: 'The key and its scope', schema: MeResponse },
        401: { description: 'Missing, disabled or invalid key', schema: ErrorResponse },
      },
      handler: async (ctx, { auth }) => {
        const key = requireApiKey(auth);
        ctx.body = {
          tenant: { id: key.tenantId, name: key.tenantName },
          apiKey: { name: key.keyName, customerName: key.customerName, customerScoped: key.customerScoped },
          version: API_VERSION_LABEL,
        };
      },
    }),
  ];
}
