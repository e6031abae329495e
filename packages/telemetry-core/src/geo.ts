import booleanPointInPolygon from '@turf/boolean-point-in-polygon';
import { point } from '@turf/helpers';
import type { GeofenceZone } from './types.ts';

const EARTH_RADIUS_M = 6_371_008.8;
const toRadians = (degrees: number) => (degrees * Math.PI) / 180;

/** Great-circle distance in metres (haversine, mean Earth radius). */
export function haversineMeters(lat1: number, lon1: number, lat2: number, lon2: number): number {
  const dLat = toRadians(lat2 - lat1);
  const dLon = toRadians(lon2 - lon1);
  const a = Math.sin(dLat / 2) ** 2 + Math.cos(toRadians(lat1)) * Math.cos(toRadians(lat2)) * Math.sin(dLon / 2) ** 2;
  return 2 * EARTH_RADIUS_M * Math.asin(Math.min(1, Math.sqrt(a)));
}

/** Whether a position lies inside a zone (boundary counts as inside). */
export function isInsideZone(zone: GeofenceZone, latitude: number, longitude: number): boolean {
  const [minLon, minLat, maxLon, maxLat] = zone.bbox;
  if (
    minLon !== undefined &&
    minLat !== undefined &&
    maxLon !== undefined &&
    maxLat !== undefined &&
    (longitude < minLon || longitude > maxLon || latitude < minLat || latitude > maxLat)
  ) {
    return false;
  }
  return booleanPointInPolygon(point([longitude, latitude]), zone.geometry);
}
