import { z } from 'zod';

// Building blocks of the spec's "Common building blocks", named as in the spec so the
// OpenAPI document shows them as components.

export const dateTime = z.iso.datetime({ offset: true }).meta({ description: 'RFC 3339 UTC timestamp' });
export const nullableDateTime = dateTime.nullable();
export const uuid = z.uuid();

export const ErrorResponse = z
  .object({
    error: z.string().meta({ description: 'Human-readable message', example: 'invalid api key' }),
    code: z.string().optional().meta({ description: 'Stable snake_case error code', example: 'invalid_api_key' }),
  })
  .meta({ id: 'ErrorResponse' });

export const Paging = z.object({ limit: z.number().int(), offset: z.number().int() }).meta({ id: 'Paging' });

export const TimeRange = z.object({ from: nullableDateTime, to: nullableDateTime }).meta({ id: 'TimeRange' });

export const Scope = z
  .object({ customerName: z.string().nullable(), customerScoped: z.boolean() })
  .meta({ id: 'Scope' });

export const ExternalApiKeyScope = z
  .object({ name: z.string(), customerName: z.string().nullable(), customerScoped: z.boolean() })
  .meta({ id: 'ExternalApiKeyScope' });

export const AssetRef = z
  .object({
    id: uuid,
    identifier: z.string(),
    name: z.string(),
    displayCode: z.string(),
    assetType: z.string(),
    location: z.string(),
    customerName: z.string(),
  })
  .meta({ id: 'AssetRef' });

export const CountBreakdownItem = z
  .object({ label: z.string(), count: z.number().int() })
  .meta({ id: 'CountBreakdownItem' });

export const AggregateRefresh = z
  .object({
    status: z.string(),
    coverageFrom: nullableDateTime,
    coverageTo: nullableDateTime,
    updatedAt: nullableDateTime,
  })
  .meta({ id: 'AggregateRefresh' });

export const CancelResponse = z.object({ id: uuid, cancelled: z.boolean() }).meta({ id: 'CancelResponse' });
export const DeleteResponse = z.object({ id: uuid, deleted: z.boolean() }).meta({ id: 'DeleteResponse' });

export const ContainerWorkSummary = z
  .object({
    containerCycleCount: z.number().int(),
    emptyDistanceM: z.number(),
    emptySeconds: z.number().int(),
    loadedDistanceM: z.number(),
    loadedPercent: z.number(),
    loadedSeconds: z.number().int(),
  })
  .meta({ id: 'ContainerWorkSummary' });

const geoPosition = z.array(z.number()).min(2).max(3);

export const GeoJSONGeometry = z
  .object({
    type: z.enum(['Point', 'MultiPoint', 'LineString', 'MultiLineString', 'Polygon', 'MultiPolygon']),
    coordinates: z.array(z.unknown()).or(geoPosition),
    bbox: z.array(z.number()).optional(),
  })
  .meta({ id: 'GeoJSONGeometry', description: 'RFC 7946 geometry; longitude before latitude' });

/** Serialises a timestamp the way every response does: ISO 8601 in UTC, or null. */
export function iso(value: Date | string | null | undefined): string | null {
  if (value === null || value === undefined) return null;
  return (value instanceof Date ? value : new Date(value)).toISOString();
}

/** As iso() for values that are never null. */
export function isoRequired(value: Date | string): string {
  return (value instanceof Date ? value : new Date(value)).toISOString();
}
