-- Silver readings per device, reading type and hour of device time, with valid GPS fixes.
SELECT
  r.tenant_id,
  r.device_id,
  r.type,
  time_bucket(INTERVAL '1 hour', r.ts) AS bucket,
  count(*) AS reading_count,
  count(*) FILTER (WHERE r.gps_valid) AS valid_gps_count,
  max(r.ts) AS last_ts
FROM telemetry_readings r
WHERE {{filter}}
GROUP BY r.tenant_id, r.device_id, r.type, time_bucket(INTERVAL '1 hour', r.ts)
