-- Up Migration
-- PostgreSQL mode only: silver (telemetry_readings) and bronze's two tables
-- (device_message_batches, device_message_rows) become tables partitioned by time, one
-- partition per UTC day, so retention detaches and drops whole days instead of deleting
-- rows one by one (at 1,000 devices reporting every second, 86 M readings a day to delete
-- and vacuum). TimescaleDB mode has had the same through hypertable chunks.
--
-- * Keys: silver's dedupe key (device_id, ts, type) already holds the partition column,
--   so it stays the primary key; bronze's tables have no unique key.
-- * A DEFAULT partition per table takes a row whose day has no partition yet (a reading
--   older than any partition, or written before the worker created the day), so nothing
--   is ever lost; the worker moves such rows into a partition of their own day
--   (packages/db/src/partitions.ts, maintainPartitions, which also creates the days ahead
--   and drops the days past retention; `gantry migrate` creates [now - 1 day, now + 7 days]).
-- * Partitions: <table>_pYYYYMMDD for [day, day + 1) in UTC, <table>_default.
-- * What is stored already is copied: a partition for each day that holds rows (no
--   partitions for days without data), then one INSERT … SELECT per table. The cost is a
--   read of each table and a write of its rows and indexes again, in this migration's
--   transaction (docs/operations.md, "Partitions").

-- The view over bronze's tables (migration 0080) goes while they are replaced.
DROP VIEW device_messages;

CREATE FUNCTION pg_temp.partition_from(source text, parent text, time_column text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  day date;
BEGIN
  EXECUTE format('CREATE TABLE %I PARTITION OF %I DEFAULT', parent || '_default', parent);
  FOR day IN EXECUTE format('SELECT DISTINCT (%I AT TIME ZONE ''UTC'')::date FROM %I', time_column, source) LOOP
    EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)',
      parent || '_p' || to_char(day, 'YYYYMMDD'), parent,
      day::timestamp AT TIME ZONE 'UTC', (day + 1)::timestamp AT TIME ZONE 'UTC');
  END LOOP;
  EXECUTE format('INSERT INTO %I SELECT * FROM %I', parent, source);
  EXECUTE format('DROP TABLE %I', source);
END $$;

-- Silver. The old table's indexes go first, so the new table takes their names (LIKE
-- copies columns, defaults, checks and storage).
ALTER TABLE telemetry_readings RENAME TO telemetry_readings_unpartitioned;
ALTER TABLE telemetry_readings_unpartitioned DROP CONSTRAINT telemetry_readings_pkey;
DROP INDEX telemetry_readings_positions_idx;
CREATE TABLE telemetry_readings (LIKE telemetry_readings_unpartitioned INCLUDING ALL) PARTITION BY RANGE (ts);
ALTER TABLE telemetry_readings ADD CONSTRAINT telemetry_readings_pkey PRIMARY KEY (device_id, ts, type);
CREATE INDEX telemetry_readings_positions_idx ON telemetry_readings (asset_id, ts) WHERE type = 'gps' AND gps_valid;
SELECT pg_temp.partition_from('telemetry_readings_unpartitioned', 'telemetry_readings', 'ts');

-- Bronze: batch rows by the receive time of their first message (retention drops a batch
-- with its day), single rows by their receive time. Message ids keep their sequence.
ALTER SEQUENCE device_message_batch_ids OWNED BY NONE;
ALTER TABLE device_message_batches RENAME TO device_message_batches_unpartitioned;
DROP INDEX device_message_batches_received_idx;
CREATE TABLE device_message_batches (LIKE device_message_batches_unpartitioned INCLUDING ALL)
  PARTITION BY RANGE (received_from);
CREATE INDEX device_message_batches_received_idx ON device_message_batches (received_from);
SELECT pg_temp.partition_from('device_message_batches_unpartitioned', 'device_message_batches', 'received_from');
ALTER SEQUENCE device_message_batch_ids OWNED BY device_message_batches.id;

ALTER TABLE device_message_rows RENAME TO device_message_rows_unpartitioned;
DROP INDEX device_message_rows_received_idx;
DROP INDEX device_message_rows_tenant_errors_idx;
CREATE TABLE device_message_rows (LIKE device_message_rows_unpartitioned INCLUDING ALL) PARTITION BY RANGE (received_at);
CREATE INDEX device_message_rows_received_idx ON device_message_rows USING brin (received_at);
CREATE INDEX device_message_rows_tenant_errors_idx ON device_message_rows (tenant_id, received_at DESC)
  WHERE status IN ('rejected', 'partial');
SELECT pg_temp.partition_from('device_message_rows_unpartitioned', 'device_message_rows', 'received_at');

-- The view and its insert trigger, as migration 0080 made them.
CREATE VIEW device_messages AS
SELECT b.id * 1048576 + m.position AS id,
       m.received_at,
       m.topic,
       split_part(m.topic, '/', 4) AS device_key,
       b.devices[m.device_index] AS device_id,
       b.device_tenants[m.device_index] AS tenant_id,
       b.device_assets[m.device_index] AS asset_id,
       split_part(m.topic, '/', 5) AS message_type,
       CASE WHEN m.reading_count > 0 THEN 'accepted' ELSE 'duplicate' END AS status,
       NULL::text AS error,
       NULL::text AS error_detail,
       m.device_ts,
       m.reading_count,
       octet_length(m.payload) AS payload_size,
       convert_to(m.payload, 'UTF8') AS payload
  FROM device_message_batches b
 CROSS JOIN LATERAL unnest(b.positions, b.received_at, b.topic, b.device_index, b.device_ts, b.reading_count, b.payload)
       AS m(position, received_at, topic, device_index, device_ts, reading_count, payload)
UNION ALL
SELECT id, received_at, topic, device_key, device_id, tenant_id, asset_id, message_type, status, error, error_detail,
       device_ts, reading_count, payload_size, payload
  FROM device_message_rows;

CREATE TRIGGER device_messages_insert INSTEAD OF INSERT ON device_messages
  FOR EACH ROW EXECUTE FUNCTION device_messages_insert();

-- Down Migration
DROP VIEW device_messages;
CREATE FUNCTION pg_temp.unpartition(parent text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE format('ALTER TABLE %I RENAME TO %I', parent, parent || '_partitioned');
  EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING COMPRESSION INCLUDING STORAGE)',
    parent, parent || '_partitioned');
  EXECUTE format('INSERT INTO %I SELECT * FROM %I', parent, parent || '_partitioned');
  EXECUTE format('DROP TABLE %I', parent || '_partitioned');
END $$;
ALTER SEQUENCE device_message_batch_ids OWNED BY NONE;
SELECT pg_temp.unpartition(name) FROM unnest(ARRAY['telemetry_readings', 'device_message_batches', 'device_message_rows']) AS name;
ALTER SEQUENCE device_message_batch_ids OWNED BY device_message_batches.id;
ALTER TABLE telemetry_readings ADD CONSTRAINT telemetry_readings_pkey PRIMARY KEY (device_id, ts, type);
CREATE INDEX telemetry_readings_positions_idx ON telemetry_readings (asset_id, ts) WHERE type = 'gps' AND gps_valid;
CREATE INDEX device_message_batches_received_idx ON device_message_batches (received_from);
CREATE INDEX device_message_rows_received_idx ON device_message_rows USING brin (received_at);
CREATE INDEX device_message_rows_tenant_errors_idx ON device_message_rows (tenant_id, received_at DESC)
  WHERE status IN ('rejected', 'partial');
CREATE VIEW device_messages AS
SELECT b.id * 1048576 + m.position AS id,
       m.received_at,
       m.topic,
       split_part(m.topic, '/', 4) AS device_key,
       b.devices[m.device_index] AS device_id,
       b.device_tenants[m.device_index] AS tenant_id,
       b.device_assets[m.device_index] AS asset_id,
       split_part(m.topic, '/', 5) AS message_type,
       CASE WHEN m.reading_count > 0 THEN 'accepted' ELSE 'duplicate' END AS status,
       NULL::text AS error,
       NULL::text AS error_detail,
       m.device_ts,
       m.reading_count,
       octet_length(m.payload) AS payload_size,
       convert_to(m.payload, 'UTF8') AS payload
  FROM device_message_batches b
 CROSS JOIN LATERAL unnest(b.positions, b.received_at, b.topic, b.device_index, b.device_ts, b.reading_count, b.payload)
       AS m(position, received_at, topic, device_index, device_ts, reading_count, payload)
UNION ALL
SELECT id, received_at, topic, device_key, device_id, tenant_id, asset_id, message_type, status, error, error_detail,
       device_ts, reading_count, payload_size, payload
  FROM device_message_rows;

CREATE TRIGGER device_messages_insert INSTEAD OF INSERT ON device_messages
  FOR EACH ROW EXECUTE FUNCTION device_messages_insert();

