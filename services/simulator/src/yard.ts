import { bearingDeg, boxAround, boxCenter, destination, haversineM, pathClear, type Box, type LatLon } from './geo.ts';
import { DEMO_YARD } from './traffic.ts';

/** Random waypoints keep this far from the zones to avoid. */
const ZONE_MARGIN_M = 20;

/** The boxes (zone bounding box plus a margin) that routes keep out of. */
export function avoidBoxes(rings: LatLon[][] | undefined, marginM = ZONE_MARGIN_M): Box[] {
  return (rings ?? []).filter((ring) => ring.length > 0).map((ring) => boxAround(ring, marginM));
}

/**
 * A random point of the working area, at least 80 m from `from`, whose straight path from
 * `from` stays out of the boxes (the last candidate after 40 tries otherwise).
 */
export function pickWaypoint(
  from: LatLon,
  center: LatLon,
  radiusM: number,
  boxes: Box[],
  random: () => number,
): LatLon {
  let candidate = from;
  for (let attempt = 0; attempt < 40; attempt += 1) {
    candidate = destination(center, Math.sqrt(random()) * radiusM, random() * 360);
    if (haversineM(from, candidate) >= 80 && pathClear(from, candidate, boxes)) return candidate;
  }
  return candidate;
}

export interface ZoneCrossing {
  /** Where the pass starts, outside the zone on the yard's side. */
  approach: LatLon;
  /** The zone's centre, then as far beyond it as the approach lies before it. */
  route: LatLon[];
}

/** A pass straight through a zone, along the line from the yard centre to the zone's centre. */
export function zoneCrossing(ring: LatLon[], center: LatLon = DEMO_YARD, approachM = 150): ZoneCrossing {
  const middle = boxCenter(boxAround(ring));
  const bearing = bearingDeg(center, middle);
  return {
    approach: destination(middle, approachM, bearing + 180),
    route: [middle, destination(middle, approachM, bearing)],
  };
}
