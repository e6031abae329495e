-- Data quality per device, message type and hour of receipt, from bronze. A message
-- with an error is rejected, or a batch stored in part (status partial): it counts as
-- an error, and as parsed when anything of it was stored.
SELECT
  m.tenant_id,
  m.device_id,
  m.message_type,
  time_bucket(INTERVAL '1 hour', m.received_at) AS bucket,
  count(*) AS message_count,
  count(*) FILTER (WHERE m.status IN ('rejected', 'partial')) AS error_count,
  count(*) FILTER (WHERE m.status <> 'rejected') AS parsed_count,
  sum(m.reading_count) AS reading_count,
  count(*) FILTER (WHERE m.device_ts IS NOT NULL) AS timed_count,
  count(*) FILTER (WHERE m.received_at - m.device_ts > INTERVAL '5 minutes') AS delayed_count,
  sum(extract(epoch FROM m.received_at - m.device_ts)) AS delay_seconds_sum,
  max(m.received_at) AS last_received_at
FROM device_messages m
WHERE m.device_id IS NOT NULL AND m.message_type IS NOT NULL AND {{filter}}
GROUP BY m.tenant_id, m.device_id, m.message_type, time_bucket(INTERVAL '1 hour', m.received_at)
