-- Up Migration
-- The fleet rollup (migration 0100) is a row per tenant, customer and bucket, and the open
-- hour's and day's rows are updated by every derivation of the tenant (PostgreSQL mode,
-- in its transaction) or every gold refresh (TimescaleDB mode): the most updated rows of
-- gold, on the fewest pages. Half-empty pages let each update stay on its page (HOT: no
-- key column changes unless an asset joins or leaves the bucket), and a fixed vacuum
-- threshold keeps the dead versions from piling up on a table that only grows. Plain
-- tables in both storage modes. Existing pages keep their fill until rewritten.
ALTER TABLE utilization_fleet_hourly SET (fillfactor = 50, autovacuum_vacuum_scale_factor = 0,
  autovacuum_vacuum_threshold = 2000);
ALTER TABLE utilization_fleet_daily SET (fillfactor = 50, autovacuum_vacuum_scale_factor = 0,
  autovacuum_vacuum_threshold = 2000);

-- Down Migration
ALTER TABLE utilization_fleet_hourly RESET (fillfactor, autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold);
ALTER TABLE utilization_fleet_daily RESET (fillfactor, autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold);
