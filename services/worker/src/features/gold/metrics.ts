import { Counter, Histogram, register } from 'prom-client';

function once<T>(name: string, create: () => T): T {
  return (register.getSingleMetric(name) as T | undefined) ?? create();
}

export const goldMetrics = {
  refreshSeconds: once(
    'gantry_gold_refresh_seconds',
    () =>
      new Histogram({
        name: 'gantry_gold_refresh_seconds',
        help: 'One gold refresh of a relation and its rollups (PostgreSQL: DELETE + INSERT of dirty buckets; TimescaleDB: refresh_continuous_aggregate of dirty windows)',
        labelNames: ['relation', 'kind'],
        buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      }),
  ),
  invalidations: once(
    'gantry_gold_invalidations_applied_total',
    () =>
      new Counter({
        name: 'gantry_gold_invalidations_applied_total',
        help: 'Invalidation log rows applied to gold',
        labelNames: ['relation'],
      }),
  ),
  failures: once(
    'gantry_gold_refresh_failures_total',
    () =>
      new Counter({
        name: 'gantry_gold_refresh_failures_total',
        help: 'Gold refreshes that failed',
        labelNames: ['relation'],
      }),
  ),
};
