-- Up Migration
-- Durable webhook delivery (docs/webhooks.md): leases instead of long-held row locks, and the
-- indexes the worker's fair claim and the delivery log use.

-- A worker claims a delivery by setting locked_until (the lease) and lease_token; the
-- HTTP attempt runs outside any transaction. Its outcome is recorded only while the
-- token still matches, so a worker that stalled past its lease cannot overwrite the
-- attempt of the worker that took the delivery over. A killed worker's claims come
-- back when their lease runs out.
ALTER TABLE webhook_deliveries ADD COLUMN lease_token uuid;

-- The claim walks subscriptions and takes each one's oldest due deliveries.
CREATE INDEX webhook_deliveries_subscription_due_idx ON webhook_deliveries (subscription_id, next_attempt_at, id)
  WHERE status IN ('pending', 'retrying');
-- In-flight deliveries per subscription (the per-subscription concurrency cap).
CREATE INDEX webhook_deliveries_leased_idx ON webhook_deliveries (subscription_id)
  WHERE locked_until IS NOT NULL;
-- Delivery log filters.
CREATE INDEX webhook_deliveries_tenant_status_idx ON webhook_deliveries (tenant_id, status, created_at DESC);
CREATE INDEX webhook_deliveries_tenant_event_idx ON webhook_deliveries (tenant_id, event_type, created_at DESC);

-- Down Migration
DROP INDEX IF EXISTS webhook_deliveries_tenant_event_idx;
DROP INDEX IF EXISTS webhook_deliveries_tenant_status_idx;
DROP INDEX IF EXISTS webhook_deliveries_leased_idx;
DROP INDEX IF EXISTS webhook_deliveries_subscription_due_idx;
ALTER TABLE webhook_deliveries DROP COLUMN IF EXISTS lease_token;
