-- Up Migration
-- Ingest's traffic counters, one row per device and hour instead of one per device, hour,
-- message type and outcome (message_counts_hourly) or reading type (reading_counts_hourly):
-- a batch upserts about one row per device, and data quality reads about devices × hours
-- rows (services/ingest/src/storage/counters.ts, docs/ingest.md "Traffic counters").
-- The outcome-by-error-code detail, which only rejected and partly stored messages have,
-- moves to the narrow message_errors_hourly. db/counters/*.sql define both from bronze and
-- silver (the recount). Plain tables in both storage modes, as the ones they replace.

-- One row per device, hour and asset. The bucket is an hour (UTC) whose meaning depends on
-- the column group: the message columns count bronze messages of known devices by receive
-- hour, the reading columns count silver readings by device-time hour (late data counts in
-- the hour of its own time, as its rows do).
CREATE TABLE device_counts_hourly (
  tenant_id            uuid NOT NULL,
  device_id            uuid NOT NULL,
  asset_id             uuid,
  bucket               timestamptz NOT NULL,
  -- by receive hour, per message type (the topic's; 'other' for a type that is none of
  -- them, always rejected): messages, those with an error (rejected or partly stored),
  -- those rejected
  gps_messages         bigint NOT NULL DEFAULT 0,
  gps_errors           bigint NOT NULL DEFAULT 0,
  gps_rejected         bigint NOT NULL DEFAULT 0,
  adcin_messages       bigint NOT NULL DEFAULT 0,
  adcin_errors         bigint NOT NULL DEFAULT 0,
  adcin_rejected       bigint NOT NULL DEFAULT 0,
  hourmeter_messages   bigint NOT NULL DEFAULT 0,
  hourmeter_errors     bigint NOT NULL DEFAULT 0,
  hourmeter_rejected   bigint NOT NULL DEFAULT 0,
  imu_messages         bigint NOT NULL DEFAULT 0,
  imu_errors           bigint NOT NULL DEFAULT 0,
  imu_rejected         bigint NOT NULL DEFAULT 0,
  identifier_messages  bigint NOT NULL DEFAULT 0,
  identifier_errors    bigint NOT NULL DEFAULT 0,
  identifier_rejected  bigint NOT NULL DEFAULT 0,
  heartbeat_messages   bigint NOT NULL DEFAULT 0,
  heartbeat_errors     bigint NOT NULL DEFAULT 0,
  heartbeat_rejected   bigint NOT NULL DEFAULT 0,
  batch_messages       bigint NOT NULL DEFAULT 0,
  batch_errors         bigint NOT NULL DEFAULT 0,
  batch_rejected       bigint NOT NULL DEFAULT 0,
  other_messages       bigint NOT NULL DEFAULT 0,
  other_errors         bigint NOT NULL DEFAULT 0,
  other_rejected       bigint NOT NULL DEFAULT 0,
  -- by receive hour, every message type: duplicates, the readings the messages added to
  -- silver (bronze reading_count), payload bytes, messages with a device time and those
  -- received more than 5 minutes after it
  duplicates           bigint NOT NULL DEFAULT 0,
  readings_added       bigint NOT NULL DEFAULT 0,
  payload_bytes        bigint NOT NULL DEFAULT 0,
  timed_messages       bigint NOT NULL DEFAULT 0,
  delayed_messages     bigint NOT NULL DEFAULT 0,
  -- by device-time hour: silver readings per reading type, and valid GPS fixes
  gps_readings         bigint NOT NULL DEFAULT 0,
  adcin_readings       bigint NOT NULL DEFAULT 0,
  hourmeter_readings   bigint NOT NULL DEFAULT 0,
  imu_readings         bigint NOT NULL DEFAULT 0,
  identifier_readings  bigint NOT NULL DEFAULT 0,
  heartbeat_readings   bigint NOT NULL DEFAULT 0,
  valid_gps_fixes      bigint NOT NULL DEFAULT 0,
  CONSTRAINT device_counts_hourly_key UNIQUE NULLS NOT DISTINCT (device_id, bucket, asset_id)
) WITH (fillfactor = 70); -- room on each page, so most increments are HOT updates

-- Rejected and partly stored messages of known devices per receive hour, message type,
-- status and error code. Accepted and duplicate messages never touch it.
CREATE TABLE message_errors_hourly (
  tenant_id     uuid NOT NULL,
  device_id     uuid NOT NULL,
  asset_id      uuid,
  bucket        timestamptz NOT NULL,
  message_type  text NOT NULL,
  status        text NOT NULL,
  reason        text NOT NULL,
  message_count bigint NOT NULL,
  CONSTRAINT message_errors_hourly_key
    UNIQUE NULLS NOT DISTINCT (device_id, bucket, message_type, status, reason, asset_id)
) WITH (fillfactor = 70);

-- Filled from the narrow counters (not from bronze and silver: the counters also hold
-- hours whose raw rows retention has removed). A device's rows name one tenant; the key
-- has none, so one is kept should its rows ever disagree.
INSERT INTO device_counts_hourly
SELECT (array_agg(tenant_id ORDER BY tenant_id))[1], device_id, asset_id, bucket,
       coalesce(sum(message_count) FILTER (WHERE message_type = 'gps'), 0),
       coalesce(sum(message_count) FILTER (WHERE message_type = 'gps' AND status IN ('rejected', 'partial')), 0),
       coalesce(sum(message_count) FILTER (WHERE message_type = 'gps' AND status = 'rejected'), 0),
       coalesce(sum(message_count) FILTER (WHERE message_type = 'adcin'), 0),
       coalesce(sum(message_count) FILTER (WHERE message_type = 'adcin' AND status IN ('rejected', 'partial')), 0),
       coalesce(sum(message_count) FILTER (WHERE message_type = 'adcin' AND status = 'rejected'), 0),
       coalesce(sum(message_count) FILTER (WHERE message_type = 'hourmeter'), 0),
       coalesce(sum(message_count) FILTER (WHERE message_type = 'hourmeter' AND status IN ('rejected', 'partial')), 0),
       coalesce(sum(message_count) FILTER (WHERE message_type = 'hourmeter' AND status = 'rejected'), 0),
       coalesce(sum(message_count) FILTER (WHERE message_type = 'imu'), 0),
       coalesce(sum(message_count) FILTER (WHERE message_type = 'imu' AND status IN ('rejected', 'partial')), 0),
       coalesce(sum(message_count) FILTER (WHERE message_type = 'imu' AND status = 'rejected'), 0),
       coalesce(sum(message_count) FILTER (WHERE message_type = 'identifier'), 0),
       coalesce(sum(message_count) FILTER (WHERE message_type = 'identifier' AND status IN ('rejected', 'partial')), 0),
       coalesce(sum(message_count) FILTER (WHERE message_type = 'identifier' AND status = 'rejected'), 0),
       coalesce(sum(message_count) FILTER (WHERE message_type = 'heartbeat'), 0),
       coalesce(sum(message_count) FILTER (WHERE message_type = 'heartbeat' AND status IN ('rejected', 'partial')), 0),
       coalesce(sum(message_count) FILTER (WHERE message_type = 'heartbeat' AND status = 'rejected'), 0),
       coalesce(sum(message_count) FILTER (WHERE message_type = 'batch'), 0),
       coalesce(sum(message_count) FILTER (WHERE message_type = 'batch' AND status IN ('rejected', 'partial')), 0),
       coalesce(sum(message_count) FILTER (WHERE message_type = 'batch' AND status = 'rejected'), 0),
       coalesce(sum(message_count) FILTER (WHERE message_type NOT IN ('gps', 'adcin', 'hourmeter', 'imu', 'identifier', 'heartbeat', 'batch')), 0),
       coalesce(sum(message_count) FILTER (WHERE message_type NOT IN ('gps', 'adcin', 'hourmeter', 'imu', 'identifier', 'heartbeat', 'batch') AND status IN ('rejected', 'partial')), 0),
       coalesce(sum(message_count) FILTER (WHERE message_type NOT IN ('gps', 'adcin', 'hourmeter', 'imu', 'identifier', 'heartbeat', 'batch') AND status = 'rejected'), 0),
       coalesce(sum(message_count) FILTER (WHERE status = 'duplicate'), 0),
       coalesce(sum(reading_count) FILTER (WHERE source = 'm'), 0),
       coalesce(sum(payload_bytes), 0),
       coalesce(sum(timed_count), 0),
       coalesce(sum(delayed_count), 0),
       coalesce(sum(reading_count) FILTER (WHERE source = 'r' AND message_type = 'gps'), 0),
       coalesce(sum(reading_count) FILTER (WHERE source = 'r' AND message_type = 'adcin'), 0),
       coalesce(sum(reading_count) FILTER (WHERE source = 'r' AND message_type = 'hourmeter'), 0),
       coalesce(sum(reading_count) FILTER (WHERE source = 'r' AND message_type = 'imu'), 0),
       coalesce(sum(reading_count) FILTER (WHERE source = 'r' AND message_type = 'identifier'), 0),
       coalesce(sum(reading_count) FILTER (WHERE source = 'r' AND message_type = 'heartbeat'), 0),
       coalesce(sum(valid_gps_count), 0)
  FROM (SELECT 'm' AS source, tenant_id, device_id, asset_id, bucket, message_type, status, message_count,
               reading_count, payload_bytes, timed_count, delayed_count, NULL::bigint AS valid_gps_count
          FROM message_counts_hourly
         UNION ALL
        SELECT 'r', tenant_id, device_id, asset_id, bucket, type, NULL, NULL,
               reading_count, NULL, NULL, NULL, valid_gps_count
          FROM reading_counts_hourly) counted
 GROUP BY device_id, bucket, asset_id;

INSERT INTO message_errors_hourly
SELECT tenant_id, device_id, asset_id, bucket, message_type, status, reason, message_count
  FROM message_counts_hourly
 WHERE status IN ('rejected', 'partial') AND message_count <> 0;

DROP TABLE message_counts_hourly, reading_counts_hourly;

-- Down Migration
DROP TABLE IF EXISTS device_counts_hourly, message_errors_hourly;
