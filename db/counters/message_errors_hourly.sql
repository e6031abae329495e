-- The recount of message_errors_hourly: rejected and partly stored bronze messages of
-- known devices per receive hour, message type, status and error code (see
-- device_counts_hourly.sql). {{m}} is the condition on bronze.
SELECT
  m.tenant_id,
  m.device_id,
  m.asset_id,
  date_bin(INTERVAL '1 hour', m.received_at, TIMESTAMPTZ '2000-01-01 00:00:00+00') AS bucket,
  m.message_type,
  m.status,
  coalesce(m.error, '') AS reason,
  count(*) AS message_count
FROM device_messages m
WHERE m.device_id IS NOT NULL AND m.tenant_id IS NOT NULL AND m.message_type IS NOT NULL
  AND m.status IN ('rejected', 'partial') AND {{m}}
GROUP BY 1, 2, 3, 4, 5, 6, 7
