-- The recount of device_counts_hourly from bronze (m) and silver (r), one row per device,
-- hour and asset. Ingest keeps the table by adding what each batch stored
-- (services/ingest/src/storage/counters.ts); this definition is what it must equal
-- (counterDrift in the tests and drills, recountCounters for data written without
-- ingest). The message columns count bronze messages of known devices by receive hour,
-- the reading columns silver readings by device-time hour. Hours are UTC: date_bin does
-- not follow the session's time zone as date_trunc would. {{m}} and {{r}} are the
-- conditions on each source.
SELECT
  tenant_id,
  device_id,
  asset_id,
  bucket,
  count(*) FILTER (WHERE source = 'm' AND type = 'gps') AS gps_messages,
  count(*) FILTER (WHERE source = 'm' AND type = 'gps' AND status IN ('rejected', 'partial')) AS gps_errors,
  count(*) FILTER (WHERE source = 'm' AND type = 'gps' AND status = 'rejected') AS gps_rejected,
  count(*) FILTER (WHERE source = 'm' AND type = 'adcin') AS adcin_messages,
  count(*) FILTER (WHERE source = 'm' AND type = 'adcin' AND status IN ('rejected', 'partial')) AS adcin_errors,
  count(*) FILTER (WHERE source = 'm' AND type = 'adcin' AND status = 'rejected') AS adcin_rejected,
  count(*) FILTER (WHERE source = 'm' AND type = 'hourmeter') AS hourmeter_messages,
  count(*) FILTER (WHERE source = 'm' AND type = 'hourmeter' AND status IN ('rejected', 'partial')) AS hourmeter_errors,
  count(*) FILTER (WHERE source = 'm' AND type = 'hourmeter' AND status = 'rejected') AS hourmeter_rejected,
  count(*) FILTER (WHERE source = 'm' AND type = 'imu') AS imu_messages,
  count(*) FILTER (WHERE source = 'm' AND type = 'imu' AND status IN ('rejected', 'partial')) AS imu_errors,
  count(*) FILTER (WHERE source = 'm' AND type = 'imu' AND status = 'rejected') AS imu_rejected,
  count(*) FILTER (WHERE source = 'm' AND type = 'identifier') AS identifier_messages,
  count(*) FILTER (WHERE source = 'm' AND type = 'identifier' AND status IN ('rejected', 'partial')) AS identifier_errors,
  count(*) FILTER (WHERE source = 'm' AND type = 'identifier' AND status = 'rejected') AS identifier_rejected,
  count(*) FILTER (WHERE source = 'm' AND type = 'heartbeat') AS heartbeat_messages,
  count(*) FILTER (WHERE source = 'm' AND type = 'heartbeat' AND status IN ('rejected', 'partial')) AS heartbeat_errors,
  count(*) FILTER (WHERE source = 'm' AND type = 'heartbeat' AND status = 'rejected') AS heartbeat_rejected,
  count(*) FILTER (WHERE source = 'm' AND type = 'batch') AS batch_messages,
  count(*) FILTER (WHERE source = 'm' AND type = 'batch' AND status IN ('rejected', 'partial')) AS batch_errors,
  count(*) FILTER (WHERE source = 'm' AND type = 'batch' AND status = 'rejected') AS batch_rejected,
  count(*) FILTER (WHERE source = 'm' AND type NOT IN ('gps', 'adcin', 'hourmeter', 'imu', 'identifier', 'heartbeat', 'batch')) AS other_messages,
  count(*) FILTER (WHERE source = 'm' AND type NOT IN ('gps', 'adcin', 'hourmeter', 'imu', 'identifier', 'heartbeat', 'batch') AND status IN ('rejected', 'partial')) AS other_errors,
  count(*) FILTER (WHERE source = 'm' AND type NOT IN ('gps', 'adcin', 'hourmeter', 'imu', 'identifier', 'heartbeat', 'batch') AND status = 'rejected') AS other_rejected,
  count(*) FILTER (WHERE source = 'm' AND status = 'duplicate') AS duplicates,
  coalesce(sum(reading_count), 0)::bigint AS readings_added,
  coalesce(sum(payload_size), 0)::bigint AS payload_bytes,
  count(device_ts) AS timed_messages,
  count(*) FILTER (WHERE received_at - device_ts > INTERVAL '5 minutes') AS delayed_messages,
  count(*) FILTER (WHERE source = 'r' AND type = 'gps') AS gps_readings,
  count(*) FILTER (WHERE source = 'r' AND type = 'adcin') AS adcin_readings,
  count(*) FILTER (WHERE source = 'r' AND type = 'hourmeter') AS hourmeter_readings,
  count(*) FILTER (WHERE source = 'r' AND type = 'imu') AS imu_readings,
  count(*) FILTER (WHERE source = 'r' AND type = 'identifier') AS identifier_readings,
  count(*) FILTER (WHERE source = 'r' AND type = 'heartbeat') AS heartbeat_readings,
  count(*) FILTER (WHERE gps_valid) AS valid_gps_fixes
FROM (
  SELECT 'm' AS source, m.tenant_id, m.device_id, m.asset_id,
         date_bin(INTERVAL '1 hour', m.received_at, TIMESTAMPTZ '2000-01-01 00:00:00+00') AS bucket,
         m.message_type AS type, m.status, m.reading_count, m.payload_size, m.device_ts, m.received_at,
         NULL::boolean AS gps_valid
    FROM device_messages m
   WHERE m.device_id IS NOT NULL AND m.tenant_id IS NOT NULL AND m.message_type IS NOT NULL AND {{m}}
  UNION ALL
  SELECT 'r', r.tenant_id, r.device_id, r.asset_id,
         date_bin(INTERVAL '1 hour', r.ts, TIMESTAMPTZ '2000-01-01 00:00:00+00'),
         r.type, NULL, NULL, NULL, NULL, NULL, r.gps_valid
    FROM telemetry_readings r
   WHERE {{r}}
) counted
GROUP BY tenant_id, device_id, asset_id, bucket
