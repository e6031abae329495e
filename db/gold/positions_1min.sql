-- Last valid position per asset and minute, from silver GPS readings.
SELECT
  r.tenant_id,
  r.asset_id,
  time_bucket(INTERVAL '1 minute', r.ts) AS bucket,
  last(r.latitude, r.ts) AS latitude,
  last(r.longitude, r.ts) AS longitude,
  count(*) AS point_count,
  max(r.ts) AS last_event_ts
FROM telemetry_readings r
WHERE r.type = 'gps' AND r.gps_valid AND r.asset_id IS NOT NULL AND {{filter}}
GROUP BY r.tenant_id, r.asset_id, time_bucket(INTERVAL '1 minute', r.ts)
