-- Up Migration
-- TimescaleDB mode only: the time-series tables of 0002 become hypertables with
-- compression. Retention policies follow the configuration and are applied at start
-- (see packages/db/src/storage-mode.ts); gold continuous aggregates are created from
-- db/gold by the same code.
-- Bronze (device_messages) was made a hypertable here until migration 0080 turned it into
-- a view over two tables (0002_bronze.sql makes those hypertables); a database created
-- before 0080 ran the earlier version of this file, and 0080 moved its rows.

CREATE EXTENSION IF NOT EXISTS timescaledb;

SELECT create_hypertable('telemetry_readings', 'ts',
  chunk_time_interval => INTERVAL '1 day', migrate_data => true);
SELECT create_hypertable('telemetry_segments', 'start_ts',
  chunk_time_interval => INTERVAL '7 days', migrate_data => true);

ALTER TABLE telemetry_readings SET (
  timescaledb.compress,
  timescaledb.compress_segmentby = 'device_id, type',
  timescaledb.compress_orderby = 'ts'
);
SELECT add_compression_policy('telemetry_readings', INTERVAL '7 days');

ALTER TABLE telemetry_segments SET (
  timescaledb.compress,
  timescaledb.compress_segmentby = 'device_id',
  timescaledb.compress_orderby = 'start_ts'
);
SELECT add_compression_policy('telemetry_segments', INTERVAL '30 days');
