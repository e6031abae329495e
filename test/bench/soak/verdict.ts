/** RSS of one process at one moment of the soak (seconds since the soak started). */
export interface RssPoint {
  t: number;
  bytes: number;
}

export interface Flatness {
  /** Mean RSS of the middle and the last third of the soak, MiB. */
  middleMiB: number;
  lastMiB: number;
  growthMiB: number;
  toleranceMiB: number;
  /** Least-squares slope over the middle and last thirds, MiB per minute (information). */
  slopeMiBPerMinute: number;
  flat: boolean;
}

const MiB = 1024 * 1024;

function mean(values: number[]): number {
  return values.length === 0 ? Number.NaN : values.reduce((total, value) => total + value, 0) / values.length;
}

function slope(points: Array<{ x: number; y: number }>): number {
  if (points.length < 2) return Number.NaN;
  const mx = mean(points.map((p) => p.x));
  const my = mean(points.map((p) => p.y));
  let numerator = 0;
  let denominator = 0;
  for (const { x, y } of points) {
    numerator += (x - mx) * (y - my);
    denominator += (x - mx) ** 2;
  }
  return denominator === 0 ? 0 : numerator / denominator;
}

/**
 * Memory is flat when the mean RSS of the last third of the soak exceeds the mean of the
 * middle third by no more than the tolerance: max(toleranceMiB, tolerancePercent of the
 * middle mean). The first third is warm-up (caches, JIT, pools, V8 heap sizing) and is
 * not judged. Means over thirds, not single samples, so a GC cycle's sawtooth does not
 * decide the verdict; a steady leak shows as growth between the thirds.
 */
export function judgeFlatness(
  points: RssPoint[],
  durationSeconds: number,
  toleranceMiB: number,
  tolerancePercent: number,
): Flatness {
  const live = points.filter((point) => point.bytes > 0);
  const middle = live
    .filter((point) => point.t >= durationSeconds / 3 && point.t < (2 * durationSeconds) / 3)
    .map((point) => point.bytes / MiB);
  const last = live.filter((point) => point.t >= (2 * durationSeconds) / 3).map((point) => point.bytes / MiB);
  const middleMiB = mean(middle);
  const lastMiB = mean(last);
  const growthMiB = lastMiB - middleMiB;
  const allowed = Math.max(toleranceMiB, (tolerancePercent / 100) * middleMiB);
  const judged = live
    .filter((point) => point.t >= durationSeconds / 3)
    .map((point) => ({ x: point.t / 60, y: point.bytes / MiB }));
  return {
    middleMiB,
    lastMiB,
    growthMiB,
    toleranceMiB: allowed,
    slopeMiBPerMinute: slope(judged),
    flat: Number.isFinite(growthMiB) && growthMiB <= allowed,
  };
}

export interface Check {
  name: string;
  ok: boolean;
  detail: string;
}
