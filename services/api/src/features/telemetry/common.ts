import { ErrorResponse } from '../../http/common-schemas.ts';
import type { ResponseSpec } from '../../http/route.ts';

export const TELEMETRY_TAG = 'Telemetry';

/** Error answers every telemetry read may give. */
export const readErrors: Record<number, ResponseSpec> = {
  400: { description: 'Invalid query parameter, range or filter', schema: ErrorResponse },
  401: { description: 'Missing, disabled or invalid X-API-Key', schema: ErrorResponse },
  429: { description: 'Rate limit exceeded', schema: ErrorResponse },
};

export const notFound: ResponseSpec = {
  description: 'Object not found in the key’s tenant/customer scope',
  schema: ErrorResponse,
};
