-- The recount of reading_counts_hourly: silver readings per device hour (device time)
-- and reading type, with valid GPS fixes, in the table's column order (see
-- message_counts_hourly.sql).
SELECT
  r.tenant_id,
  r.device_id,
  r.asset_id,
  date_bin(INTERVAL '1 hour', r.ts, TIMESTAMPTZ '2000-01-01 00:00:00+00') AS bucket,
  r.type,
  count(*) AS reading_count,
  count(*) FILTER (WHERE r.gps_valid) AS valid_gps_count
FROM telemetry_readings r
WHERE {{filter}}
GROUP BY 1, 2, 3, 4, 5
