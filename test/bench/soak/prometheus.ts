/** The few Prometheus text-format reads the soak needs: counters and gauges summed by name. */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const line = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/;
const label = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

export function parsePrometheus(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const raw of text.split('\n')) {
    if (raw.startsWith('#') || raw.trim() === '') continue;
    const match = line.exec(raw);
    if (!match) continue;
    const labels: Record<string, string> = {};
    for (const [, key, value] of (match[2] ?? '').matchAll(label)) labels[key!] = value!;
    samples.push({ name: match[1]!, labels, value: Number(match[3]) });
  }
  return samples;
}

/** GET <url>/metrics; null when the process does not answer (it is counted elsewhere). */
export async function scrape(url: string): Promise<Sample[] | null> {
  try {
    const response = await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(10_000) });
    if (!response.ok) return null;
    return parsePrometheus(await response.text());
  } catch {
    return null;
  }
}

/** Sum of every sample of a metric (over all label sets), optionally filtered by labels. */
export function sum(
  samples: Sample[] | null,
  name: string,
  where: (labels: Record<string, string>) => boolean = () => true,
): number {
  if (!samples) return 0;
  return samples
    .filter((sample) => sample.name === name && where(sample.labels))
    .reduce((total, sample) => total + sample.value, 0);
}

/** Cumulative bucket counts of a histogram (summed over label sets), by upper bound. */
export function buckets(samples: Sample[] | null, name: string): Map<number, number> {
  const counts = new Map<number, number>();
  for (const sample of samples ?? []) {
    if (sample.name !== `${name}_bucket`) continue;
    const le = sample.labels.le === '+Inf' ? Number.POSITIVE_INFINITY : Number(sample.labels.le);
    counts.set(le, (counts.get(le) ?? 0) + sample.value);
  }
  return counts;
}

/**
 * The upper bound of the bucket holding the q-quantile of what a histogram observed
 * between two scrapes (NaN when it observed nothing): "95 % of the window was ≤ this".
 */
export function quantileBound(before: Map<number, number>, after: Map<number, number>, q: number): number {
  const bounds = [...after.keys()].sort((a, b) => a - b);
  const total = (after.get(Number.POSITIVE_INFINITY) ?? 0) - (before.get(Number.POSITIVE_INFINITY) ?? 0);
  if (total <= 0) return Number.NaN;
  for (const le of bounds) {
    if ((after.get(le) ?? 0) - (before.get(le) ?? 0) >= q * total) return le;
  }
  return Number.POSITIVE_INFINITY;
}
