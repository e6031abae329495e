-- Last valid position per asset and 15 minutes, rolled up from the 1-minute relation.
SELECT
  p.tenant_id,
  p.asset_id,
  time_bucket(INTERVAL '15 minutes', p.bucket) AS bucket,
  last(p.latitude, p.last_event_ts) AS latitude,
  last(p.longitude, p.last_event_ts) AS longitude,
  sum(p.point_count) AS point_count,
  max(p.last_event_ts) AS last_event_ts
FROM positions_1min p
WHERE {{filter}}
GROUP BY p.tenant_id, p.asset_id, time_bucket(INTERVAL '15 minutes', p.bucket)
