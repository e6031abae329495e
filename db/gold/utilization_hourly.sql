-- Utilization and container work per asset and hour, from derived segments.
-- Segments never cross an hour boundary, so every figure is a plain sum. Sums are taken
-- in numeric so they are exact and independent of row order: gold, live, PostgreSQL and
-- TimescaleDB answers are then identical to the last digit.
SELECT
  s.tenant_id,
  s.asset_id,
  time_bucket(INTERVAL '1 hour', s.start_ts) AS bucket,
  sum(s.seconds::numeric) FILTER (WHERE s.running) AS running_seconds,
  sum(s.seconds::numeric) FILTER (WHERE s.running AND s.moving) AS moving_seconds,
  sum(s.seconds::numeric) FILTER (WHERE s.running AND NOT s.moving) AS stationary_running_seconds,
  sum(s.seconds::numeric) FILTER (WHERE s.running AND s.loaded) AS loaded_seconds,
  sum(s.seconds::numeric) FILTER (WHERE s.running AND NOT s.loaded) AS empty_seconds,
  sum(s.distance_m::numeric) AS distance_m,
  sum(s.distance_m::numeric) FILTER (WHERE s.loaded) AS loaded_distance_m,
  sum(s.distance_m::numeric) FILTER (WHERE NOT s.loaded) AS empty_distance_m,
  sum(s.hourmeter_delta::numeric) AS hourmeter_delta,
  sum(s.container_cycles) AS container_cycle_count,
  sum(s.imu_anomalies) AS imu_anomaly_count,
  sum(s.imu_samples) AS imu_sample_count,
  sum(s.seconds::numeric) FILTER (WHERE s.has_data) AS data_seconds
FROM telemetry_segments s
WHERE s.asset_id IS NOT NULL AND {{filter}}
GROUP BY s.tenant_id, s.asset_id, time_bucket(INTERVAL '1 hour', s.start_ts)
