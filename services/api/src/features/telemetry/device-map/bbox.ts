import { z } from 'zod';
import type { SqlParams } from '../sql.ts';

/** `[minLon, minLat, maxLon, maxLat]`, GeoJSON order (RFC 7946 §5). */
export type Bbox = [number, number, number, number];

export const WORLD: Bbox = [-180, -90, 180, 90];

const BBOX_RULE =
  'must be minLon,minLat,maxLon,maxLat: four numbers, longitudes within -180..180, latitudes within -90..90, minLat ≤ maxLat';

/** "4.0,51.9,4.1,52.0" → the four numbers, or null when it is not a box on the globe. */
export function parseBbox(text: string): Bbox | null {
  const parts = text.split(',');
  if (parts.length !== 4 || parts.some((part) => !/^\s*-?\d+(\.\d+)?\s*$/.test(part))) return null;
  const [minLon, minLat, maxLon, maxLat] = parts.map(Number) as Bbox;
  const lon = (value: number) => value >= -180 && value <= 180;
  const lat = (value: number) => value >= -90 && value <= 90;
  if (!lon(minLon) || !lon(maxLon) || !lat(minLat) || !lat(maxLat) || minLat > maxLat) return null;
  return [minLon, minLat, maxLon, maxLat];
}

export const bboxParam = z
  .string()
  .max(200, BBOX_RULE)
  .transform((value, ctx) => {
    const bbox = parseBbox(value);
    if (!bbox) {
      ctx.addIssue({ code: 'custom', message: BBOX_RULE });
      return z.NEVER;
    }
    return bbox;
  })
  .optional()
  .meta({
    description:
      'Only devices whose last position lies in this box: `minLon,minLat,maxLon,maxLat` (GeoJSON order, degrees, edges included). A minLon greater than maxLon is a box across the antimeridian. Devices without a position are left out.',
    example: '4.03,51.94,4.07,51.97',
  });

/**
 * The condition that the device state `s` holds a position inside the box. A box whose
 * west edge lies east of its east edge wraps over the antimeridian (RFC 7946 §5.2).
 */
export function bboxCondition(params: SqlParams, [minLon, minLat, maxLon, maxLat]: Bbox): string {
  const lat = `s.latitude BETWEEN ${params.add(minLat, 'float8')} AND ${params.add(maxLat, 'float8')}`;
  const west = params.add(minLon, 'float8');
  const east = params.add(maxLon, 'float8');
  const lon =
    minLon <= maxLon ? `s.longitude BETWEEN ${west} AND ${east}` : `(s.longitude >= ${west} OR s.longitude <= ${east})`;
  return `${lat} AND ${lon}`;
}
