import { z } from 'zod';

const position = z
  .tuple([z.number().min(-180).max(180), z.number().min(-90).max(90)], { error: 'a position is [longitude, latitude]' })
  .rest(z.number());

const linearRing = z
  .array(position)
  .min(4, 'a linear ring needs at least 4 positions')
  .refine((ring) => {
    const first = ring[0];
    const last = ring[ring.length - 1];
    return first !== undefined && last !== undefined && first[0] === last[0] && first[1] === last[1];
  }, 'a linear ring must end where it starts');

const polygonCoordinates = z.array(linearRing).min(1, 'a polygon needs an outer ring');

/** Geofence zones: RFC 7946 Polygon or MultiPolygon, validated. */
export const zoneGeometrySchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('Polygon'), coordinates: polygonCoordinates, bbox: z.array(z.number()).optional() }),
  z.object({
    type: z.literal('MultiPolygon'),
    coordinates: z.array(polygonCoordinates).min(1, 'a multipolygon needs at least one polygon'),
    bbox: z.array(z.number()).optional(),
  }),
]);

export type ZoneGeometry = z.infer<typeof zoneGeometrySchema>;

/** [minLon, minLat, maxLon, maxLat] of a zone. */
export function geometryBbox(geometry: ZoneGeometry): [number, number, number, number] {
  const polygons = geometry.type === 'Polygon' ? [geometry.coordinates] : geometry.coordinates;
  let [minLon, minLat, maxLon, maxLat] = [Infinity, Infinity, -Infinity, -Infinity];
  for (const polygon of polygons) {
    for (const ring of polygon) {
      for (const [lon, lat] of ring) {
        minLon = Math.min(minLon, lon);
        minLat = Math.min(minLat, lat);
        maxLon = Math.max(maxLon, lon);
        maxLat = Math.max(maxLat, lat);
      }
    }
  }
  return [minLon, minLat, maxLon, maxLat];
}
