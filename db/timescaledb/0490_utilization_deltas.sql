-- Up Migration
-- TimescaleDB mode: utilization gold (utilization_hourly, utilization_daily and the fleet
-- rollup) is kept by differences in the derivation transaction, as in PostgreSQL mode
-- (db/postgres/0150_utilization_deltas.sql, services/worker/src/features/gold/deltas.ts),
-- instead of being continuous aggregates refreshed after each derivation commit. A
-- refresh recomputes whole buckets from every segment in them, so each refresh of the
-- open hour read every segment of the hour of every asset again: with 10,000 devices at
-- 2,000 msg/s, ~400 ms a call, growing as the hour filled, and the open hour fell 8–17 s
-- behind the newest reading. The differences cost what the segments that changed cost.
--
-- These are the counts behind each gold row and each filtered figure, as 0150 has them
-- (a row exists while `segments` > 0; a filtered figure is NULL while its count is 0),
-- with the storage options gold tables get (db/postgres/0431_gold_storage.sql: room for
-- HOT updates of the open bucket's rows, fixed vacuum thresholds). Plain tables, not
-- hypertables: they are read and written by key.
--
-- packages/db/src/gold.ts recreates the two relations as tables on the same start (their
-- definition hash changed) and marks them for a rebuild: the worker then fills gold, these
-- counts and the fleet rollup from segments. Utilization no longer goes through the
-- invalidation log.
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
) WITH (fillfactor = 70, autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 10000,
        autovacuum_analyze_scale_factor = 0.02);

CREATE TABLE utilization_daily_counts (LIKE utilization_hourly_counts INCLUDING ALL)
  WITH (fillfactor = 70, autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 10000,
        autovacuum_analyze_scale_factor = 0.02);

DELETE FROM gold_invalidations WHERE relation = 'utilization_hourly';

-- Down Migration
DROP TABLE IF EXISTS utilization_daily_counts, utilization_hourly_counts;
