-- Up Migration
-- TimescaleDB mode only: bronze's two tables (migration 0080) become hypertables, so
-- retention drops whole chunks. Batch rows are compressed already (their arrays, by
-- TOAST); the one-row-per-message table is compressed by tenant like bronze before it.
-- Both keep their own time indexes (no default index per hypertable).

SELECT create_hypertable('device_message_batches', 'received_from',
  chunk_time_interval => INTERVAL '1 day', create_default_indexes => false, migrate_data => true);
SELECT create_hypertable('device_message_rows', 'received_at',
  chunk_time_interval => INTERVAL '1 day', create_default_indexes => false, migrate_data => true);

ALTER TABLE device_message_rows SET (
  timescaledb.compress,
  timescaledb.compress_segmentby = 'tenant_id',
  timescaledb.compress_orderby = 'received_at DESC'
);
SELECT add_compression_policy('device_message_rows', INTERVAL '3 days');
