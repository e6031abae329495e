-- Utilization and container work per asset and UTC day, rolled up from the hourly relation.
SELECT
  h.tenant_id,
  h.asset_id,
  time_bucket(INTERVAL '1 day', h.bucket) AS bucket,
  sum(h.running_seconds) AS running_seconds,
  sum(h.moving_seconds) AS moving_seconds,
  sum(h.stationary_running_seconds) AS stationary_running_seconds,
  sum(h.loaded_seconds) AS loaded_seconds,
  sum(h.empty_seconds) AS empty_seconds,
  sum(h.distance_m) AS distance_m,
  sum(h.loaded_distance_m) AS loaded_distance_m,
  sum(h.empty_distance_m) AS empty_distance_m,
  sum(h.hourmeter_delta) AS hourmeter_delta,
  sum(h.container_cycle_count) AS container_cycle_count,
  sum(h.imu_anomaly_count) AS imu_anomaly_count,
  sum(h.imu_sample_count) AS imu_sample_count,
  sum(h.data_seconds) AS data_seconds
FROM utilization_hourly h
WHERE {{filter}}
GROUP BY h.tenant_id, h.asset_id, time_bucket(INTERVAL '1 day', h.bucket)
