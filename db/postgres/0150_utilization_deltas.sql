-- Up Migration
-- PostgreSQL mode only. Utilization gold (utilization_hourly, utilization_daily and the
-- fleet rollup) is kept by differences in the derivation transaction that changes
-- telemetry_segments: the sums of the segments it deleted are taken away, those of the
-- segments it wrote are added (services/worker/src/features/gold/deltas.ts).
--
-- A gold row must vanish when its bucket has no segment left, and a sum taken with a
-- FILTER is NULL, not 0, when no segment of the bucket matches the filter (as the
-- definition db/gold/utilization_hourly.sql gives it). Sums alone cannot tell, so these
-- tables count, per asset and bucket, the segments behind each figure: `segments` all of
-- them, and each filtered figure's column the segments its filter keeps. A gold row
-- exists exactly when `segments` > 0; a filtered figure is NULL exactly when its count
-- is 0. Daily counts are the sums of the hourly ones.
CREATE TABLE utilization_hourly_counts (
  asset_id                   uuid NOT NULL,
  bucket                     timestamptz NOT NULL,
  segments                   bigint NOT NULL,
  running_seconds            bigint NOT NULL,
  moving_seconds             bigint NOT NULL,
  stationary_running_seconds bigint NOT NULL,
  loaded_seconds             bigint NOT NULL,
  empty_seconds              bigint NOT NULL,
  loaded_distance_m          bigint NOT NULL,
  empty_distance_m           bigint NOT NULL,
  data_seconds               bigint NOT NULL,
  PRIMARY KEY (asset_id, bucket)
);

CREATE TABLE utilization_daily_counts (LIKE utilization_hourly_counts INCLUDING ALL);

-- Gold built before this has no counts: the worker rebuilds it (and the counts, and the
-- fleet rollup) whole. Utilization no longer goes through the invalidation log.
UPDATE gold_coverage SET status = 'rebuild' WHERE relation IN ('utilization_hourly', 'utilization_daily');
DELETE FROM gold_invalidations WHERE relation = 'utilization_hourly';

-- Down Migration
DROP TABLE IF EXISTS utilization_daily_counts, utilization_hourly_counts;
UPDATE gold_coverage SET status = 'rebuild' WHERE relation IN ('utilization_hourly', 'utilization_daily');
