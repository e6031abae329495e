/** A positive number from the environment, or `fallback` when unset: the benches' sizes and rates. */
export function positiveSetting(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} must be a positive number, got "${raw}"`);
  return value;
}

/**
 * The GANTRY_* settings of this shell that tune a service (worker batch sizes, ingest
 * batching, pool sizes…), for a bench to hand to the processes it starts; where the
 * services connect is the bench's own choice and is never taken from here.
 */
export function serviceTuning(): Record<string, string> {
  // SERVICE_NODE_OPTIONS becomes the services' NODE_OPTIONS (a profiler preloaded with --import, say).
  const options = process.env.SERVICE_NODE_OPTIONS;
  const tuning: Record<string, string> = options ? { NODE_OPTIONS: options } : {};
  for (const [name, value] of Object.entries(process.env)) {
    if (!name.startsWith('GANTRY_') || value === undefined) continue;
    if (/_URLS?$|^GANTRY_TEST_|^GANTRY_BENCH_|_PORT$|^GANTRY_HOST$/.test(name)) continue;
    tuning[name] = value;
  }
  return tuning;
}
