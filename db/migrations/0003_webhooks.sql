-- Up Migration
-- Webhook subscriptions, the event outbox and the delivery log (docs/webhooks.md).

CREATE TABLE webhook_subscriptions (
  id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id  uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
  name       text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  url        text NOT NULL,
  enabled    boolean NOT NULL DEFAULT true,
  events     text[] NOT NULL,
  -- Needed in clear to sign each delivery; never returned by the API after creation.
  secret     text,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  deleted_at timestamptz
);
CREATE INDEX webhook_subscriptions_tenant_idx ON webhook_subscriptions (tenant_id) WHERE deleted_at IS NULL;

-- The outbox: one row per event, written in the transaction of the change.
CREATE TABLE webhook_events (
  id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id     uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
  event_type    text NOT NULL,
  entity_type   text NOT NULL,
  entity_id     uuid,
  customer_name text,
  data          jsonb NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_events_tenant_time_idx ON webhook_events (tenant_id, created_at DESC);

-- One delivery per (event, subscription); its id is the X-Service-Webhook-Id and
-- body the exact bytes signed and sent on every attempt.
CREATE TABLE webhook_deliveries (
  id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id       uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
  event_id        uuid REFERENCES webhook_events (id) ON DELETE CASCADE,
  subscription_id uuid NOT NULL REFERENCES webhook_subscriptions (id) ON DELETE CASCADE,
  url             text NOT NULL,
  event_type      text NOT NULL,
  entity_type     text NOT NULL,
  entity_id       uuid,
  body            text NOT NULL,
  status          text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'retrying', 'delivered', 'failed')),
  http_status     integer,
  error           text NOT NULL DEFAULT '',
  attempt_count   integer NOT NULL DEFAULT 0,
  max_attempts    integer NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now(),
  delivered_at    timestamptz,
  last_attempt_at timestamptz,
  next_attempt_at timestamptz,
  locked_until    timestamptz,
  UNIQUE (event_id, subscription_id)
);
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at)
  WHERE status IN ('pending', 'retrying');
CREATE INDEX webhook_deliveries_tenant_time_idx ON webhook_deliveries (tenant_id, created_at DESC, id);
CREATE INDEX webhook_deliveries_subscription_idx ON webhook_deliveries (subscription_id, created_at DESC);

CREATE TABLE webhook_delivery_attempts (
  id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  delivery_id uuid NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
  attempt     integer NOT NULL,
  started_at  timestamptz NOT NULL,
  duration_ms integer,
  http_status integer,
  error       text NOT NULL DEFAULT ''
);
CREATE INDEX webhook_delivery_attempts_delivery_idx ON webhook_delivery_attempts (delivery_id, attempt);

-- Down Migration
DROP TABLE IF EXISTS webhook_delivery_attempts, webhook_deliveries, webhook_events, webhook_subscriptions CASCADE;
