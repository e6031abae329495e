/** Great-circle helpers (spherical earth, as the derivation uses). */
export const EARTH_RADIUS_M = 6_371_008.8;

export interface LatLon {
  lat: number;
  lon: number;
}

const rad = (degrees: number) => (degrees * Math.PI) / 180;
const deg = (radians: number) => (radians * 180) / Math.PI;

/** Haversine distance in metres. */
export function haversineM(a: LatLon, b: LatLon): number {
  const dLat = rad(b.lat - a.lat);
  const dLon = rad(b.lon - a.lon);
  const h = Math.sin(dLat / 2) ** 2 + Math.cos(rad(a.lat)) * Math.cos(rad(b.lat)) * Math.sin(dLon / 2) ** 2;
  return 2 * EARTH_RADIUS_M * Math.asin(Math.min(1, Math.sqrt(h)));
}

/** Initial bearing from a to b, degrees 0..360. */
export function bearingDeg(a: LatLon, b: LatLon): number {
  const y = Math.sin(rad(b.lon - a.lon)) * Math.cos(rad(b.lat));
  const x =
    Math.cos(rad(a.lat)) * Math.sin(rad(b.lat)) -
    Math.sin(rad(a.lat)) * Math.cos(rad(b.lat)) * Math.cos(rad(b.lon - a.lon));
  return (deg(Math.atan2(y, x)) + 360) % 360;
}

/** The point a fraction of the way from `from` to `to` (linear in degrees: fine at yard scale). */
export function interpolate(from: LatLon, to: LatLon, fraction: number): LatLon {
  return { lat: from.lat + (to.lat - from.lat) * fraction, lon: from.lon + (to.lon - from.lon) * fraction };
}

/** The point at `distanceM` and `bearing` from a start point. */
export function destination(from: LatLon, distanceM: number, bearing: number): LatLon {
  const angular = distanceM / EARTH_RADIUS_M;
  const lat1 = rad(from.lat);
  const lon1 = rad(from.lon);
  const theta = rad(bearing);
  const lat2 = Math.asin(Math.sin(lat1) * Math.cos(angular) + Math.cos(lat1) * Math.sin(angular) * Math.cos(theta));
  const lon2 =
    lon1 +
    Math.atan2(
      Math.sin(theta) * Math.sin(angular) * Math.cos(lat1),
      Math.cos(angular) - Math.sin(lat1) * Math.sin(lat2),
    );
  return { lat: deg(lat2), lon: ((deg(lon2) + 540) % 360) - 180 };
}

/** A latitude/longitude rectangle. */
export interface Box {
  minLat: number;
  maxLat: number;
  minLon: number;
  maxLon: number;
}

/** The bounding box of a ring of points, widened by `marginM` metres on every side. */
export function boxAround(ring: LatLon[], marginM = 0): Box {
  const lats = ring.map((point) => point.lat);
  const lons = ring.map((point) => point.lon);
  const midLat = (Math.min(...lats) + Math.max(...lats)) / 2;
  const dLat = marginM / 111_320;
  const dLon = marginM / (111_320 * Math.cos(rad(midLat)));
  return {
    minLat: Math.min(...lats) - dLat,
    maxLat: Math.max(...lats) + dLat,
    minLon: Math.min(...lons) - dLon,
    maxLon: Math.max(...lons) + dLon,
  };
}

export function boxCenter(box: Box): LatLon {
  return { lat: (box.minLat + box.maxLat) / 2, lon: (box.minLon + box.maxLon) / 2 };
}

export function inBox(point: LatLon, box: Box): boolean {
  return point.lat >= box.minLat && point.lat <= box.maxLat && point.lon >= box.minLon && point.lon <= box.maxLon;
}

/** True when the straight path from `from` to `to` stays out of every box (checked every `stepM` metres). */
export function pathClear(from: LatLon, to: LatLon, boxes: Box[], stepM = 5): boolean {
  if (boxes.length === 0) return true;
  const steps = Math.max(1, Math.ceil(haversineM(from, to) / stepM));
  for (let step = 0; step <= steps; step += 1) {
    const point = interpolate(from, to, step / steps);
    if (boxes.some((box) => inBox(point, box))) return false;
  }
  return true;
}

/**
 * Waypoints from `from` to `to` that keep out of the boxes: straight when the path is
 * clear, else round one or two corners of a box in the way (the boxes are small
 * rectangles), else straight anyway.
 */
export function routeAround(from: LatLon, to: LatLon, boxes: Box[]): LatLon[] {
  if (pathClear(from, to, boxes)) return [to];
  for (const box of boxes) {
    const corners = [
      { lat: box.minLat, lon: box.minLon },
      { lat: box.minLat, lon: box.maxLon },
      { lat: box.maxLat, lon: box.minLon },
      { lat: box.maxLat, lon: box.maxLon },
    ]
      // A little outside the corner, so the corner itself is clear.
      .map((corner) => destination(corner, 10, bearingDeg(boxCenter(box), corner)))
      .sort((a, b) => haversineM(from, a) + haversineM(a, to) - (haversineM(from, b) + haversineM(b, to)));
    for (const corner of corners) {
      if (pathClear(from, corner, boxes) && pathClear(corner, to, boxes)) return [corner, to];
    }
    // From right beside one side to the opposite side: round two corners.
    for (const first of corners) {
      for (const second of corners) {
        if (
          first === second ||
          !pathClear(from, first, boxes) ||
          !pathClear(first, second, boxes) ||
          !pathClear(second, to, boxes)
        )
          continue;
        return [first, second, to];
      }
    }
  }
  return [to];
}
