-- Up Migration
-- Traffic counters kept by ingest in the transaction of each batch
-- (services/ingest/src/storage/counters.ts), in both storage modes. They replace the
-- gold relations of the same names, which the worker materialized for closed hours only,
-- so that data quality never re-reads the open hour's raw traffic.
-- db/counters/*.sql define the same figures from bronze and silver (the recount).

DO $$
DECLARE
  relation text;
  kind "char";
BEGIN
  FOREACH relation IN ARRAY ARRAY['message_counts_hourly', 'reading_counts_hourly'] LOOP
    SELECT c.relkind INTO kind FROM pg_class c
      WHERE c.relname = relation AND c.relnamespace = current_schema()::regnamespace;
    -- A continuous aggregate (TimescaleDB mode) is a view; a gold table in PostgreSQL mode.
    IF kind = 'v' THEN
      EXECUTE format('DROP MATERIALIZED VIEW %I CASCADE', relation);
    ELSIF kind = 'r' THEN
      EXECUTE format('DROP TABLE %I CASCADE', relation);
    END IF;
  END LOOP;
END $$;

DELETE FROM gantry_meta WHERE key IN ('gold:message_counts_hourly', 'gold:reading_counts_hourly');
DELETE FROM gold_coverage WHERE relation IN ('message_counts_hourly', 'reading_counts_hourly');
DELETE FROM gold_invalidations WHERE relation IN ('message_counts_hourly', 'reading_counts_hourly');

-- Bronze messages of known devices per receive hour, message type and outcome
-- (status, and the error code of a rejected or partly stored message; '' for none).
CREATE TABLE message_counts_hourly (
  tenant_id     uuid NOT NULL,
  device_id     uuid NOT NULL,
  asset_id      uuid,
  bucket        timestamptz NOT NULL,
  message_type  text NOT NULL,
  status        text NOT NULL,
  reason        text NOT NULL,
  message_count bigint NOT NULL,
  -- bronze reading_count: readings the messages added to silver
  reading_count bigint NOT NULL,
  payload_bytes bigint NOT NULL,
  -- messages with a device time, and those received more than 5 minutes after it
  timed_count   bigint NOT NULL,
  delayed_count bigint NOT NULL,
  CONSTRAINT message_counts_hourly_key
    UNIQUE NULLS NOT DISTINCT (device_id, bucket, message_type, status, reason, asset_id)
) WITH (fillfactor = 70); -- room on each page, so most increments are HOT updates

-- Silver readings per device hour (device time) and reading type.
CREATE TABLE reading_counts_hourly (
  tenant_id       uuid NOT NULL,
  device_id       uuid NOT NULL,
  asset_id        uuid,
  bucket          timestamptz NOT NULL,
  type            text NOT NULL,
  reading_count   bigint NOT NULL,
  valid_gps_count bigint NOT NULL,
  CONSTRAINT reading_counts_hourly_key UNIQUE NULLS NOT DISTINCT (device_id, bucket, type, asset_id)
) WITH (fillfactor = 70);

-- What is already stored is counted once here; from now on ingest counts as it writes.
INSERT INTO message_counts_hourly
SELECT m.tenant_id, m.device_id, m.asset_id, date_bin(INTERVAL '1 hour', m.received_at, TIMESTAMPTZ '2000-01-01 00:00:00+00'), m.message_type, m.status,
       coalesce(m.error, ''), count(*), sum(m.reading_count), sum(m.payload_size),
       count(*) FILTER (WHERE m.device_ts IS NOT NULL),
       count(*) FILTER (WHERE m.received_at - m.device_ts > INTERVAL '5 minutes')
  FROM device_messages m
 WHERE m.device_id IS NOT NULL AND m.tenant_id IS NOT NULL AND m.message_type IS NOT NULL
 GROUP BY 1, 2, 3, 4, 5, 6, 7;

INSERT INTO reading_counts_hourly
SELECT r.tenant_id, r.device_id, r.asset_id, date_bin(INTERVAL '1 hour', r.ts, TIMESTAMPTZ '2000-01-01 00:00:00+00'), r.type, count(*),
       count(*) FILTER (WHERE r.gps_valid)
  FROM telemetry_readings r
 GROUP BY 1, 2, 3, 4, 5;

-- Down Migration
DROP TABLE IF EXISTS message_counts_hourly, reading_counts_hourly;
