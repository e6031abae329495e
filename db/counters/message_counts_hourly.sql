-- The recount of message_counts_hourly: bronze messages of known devices per receive
-- hour, message type and outcome, with the columns in the table's order. Ingest keeps the
-- table by adding what each batch stored (services/ingest/src/storage/counters.ts); this
-- definition is what the table must equal (counterDrift in the tests, the baseline
-- of pnpm bench:data-quality). Hours are UTC: date_bin does not follow the session's
-- time zone as date_trunc would.
SELECT
  m.tenant_id,
  m.device_id,
  m.asset_id,
  date_bin(INTERVAL '1 hour', m.received_at, TIMESTAMPTZ '2000-01-01 00:00:00+00') AS bucket,
  m.message_type,
  m.status,
  coalesce(m.error, '') AS reason,
  count(*) AS message_count,
  sum(m.reading_count) AS reading_count,
  sum(m.payload_size) AS payload_bytes,
  count(*) FILTER (WHERE m.device_ts IS NOT NULL) AS timed_count,
  count(*) FILTER (WHERE m.received_at - m.device_ts > INTERVAL '5 minutes') AS delayed_count
FROM device_messages m
WHERE m.device_id IS NOT NULL AND m.tenant_id IS NOT NULL AND m.message_type IS NOT NULL AND {{filter}}
GROUP BY 1, 2, 3, 4, 5, 6, 7
