-- Up Migration
-- Data quality's recent errors are the messages with an error: rejected, or a batch
-- stored in part (docs/telemetry-api.md).
CREATE INDEX device_messages_tenant_errors_idx ON device_messages (tenant_id, received_at DESC)
  WHERE status IN ('rejected', 'partial');
DROP INDEX IF EXISTS device_messages_tenant_error_idx;

-- Down Migration
CREATE INDEX device_messages_tenant_error_idx ON device_messages (tenant_id, received_at DESC) WHERE status = 'rejected';
DROP INDEX IF EXISTS device_messages_tenant_errors_idx;
