-- Up Migration
-- Tenancy, keys, reporting master data and records, service requests.
-- Shared by both storage modes; the TimescaleDB layer (db/timescaledb) only changes
-- how the time-series tables of 0002 are stored.

CREATE EXTENSION IF NOT EXISTS pg_trgm;

CREATE TABLE gantry_meta (
  key        text PRIMARY KEY,
  value      jsonb NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE tenants (
  id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name       text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- Keys are "gk_<prefix>_<secret>": the prefix finds the row, the SHA-256 of the whole
-- key is compared in constant time. The key itself is never stored.
CREATE TABLE api_keys (
  id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id     uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
  name          text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  customer_name text,
  key_prefix    text NOT NULL UNIQUE,
  key_hash      bytea NOT NULL,
  enabled       boolean NOT NULL DEFAULT true,
  created_at    timestamptz NOT NULL DEFAULT now(),
  disabled_at   timestamptz,
  last_used_at  timestamptz
);
CREATE INDEX api_keys_tenant_idx ON api_keys (tenant_id);

-- Customers are identified by their exact name (the spec's scope rule); this table
-- lists the names a tenant uses, with optional contact data.
CREATE TABLE customers (
  tenant_id  uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
  name       text NOT NULL,
  email      text,
  phone      text,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant_id, name)
);

CREATE TABLE asset_types (
  id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id   uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
  name        text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  description text NOT NULL DEFAULT '',
  fields      jsonb NOT NULL DEFAULT '{}',
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now(),
  UNIQUE (tenant_id, name)
);

CREATE TABLE assets (
  id                 uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id          uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
  asset_type_id      uuid REFERENCES asset_types (id) ON DELETE SET NULL,
  name               text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  identifier         text NOT NULL CHECK (length(identifier) BETWEEN 1 AND 200),
  display_code       text NOT NULL DEFAULT '',
  location           text NOT NULL DEFAULT '',
  customer_name      text NOT NULL DEFAULT '',
  customer_email     text NOT NULL DEFAULT '',
  customer_phone     text NOT NULL DEFAULT '',
  lifecycle_status   text NOT NULL DEFAULT 'active',
  operational_status text NOT NULL DEFAULT 'operational',
  external_ref       text NOT NULL DEFAULT '',
  -- Derived from inspections and reports by the triggers below.
  inspection_count   integer NOT NULL DEFAULT 0,
  report_count       integer NOT NULL DEFAULT 0,
  latest_inspection_at timestamptz,
  latest_report_at   timestamptz,
  latest_impact      text NOT NULL DEFAULT '',
  latest_outcome     text NOT NULL DEFAULT '',
  created_at         timestamptz NOT NULL DEFAULT now(),
  updated_at         timestamptz NOT NULL DEFAULT now(),
  search_text        text GENERATED ALWAYS AS (
    lower(name || ' ' || identifier || ' ' || display_code || ' ' || external_ref)
  ) STORED,
  UNIQUE (tenant_id, identifier)
);
CREATE INDEX assets_tenant_customer_idx ON assets (tenant_id, customer_name);
CREATE INDEX assets_tenant_type_idx ON assets (tenant_id, asset_type_id);
CREATE INDEX assets_tenant_name_idx ON assets (tenant_id, name, id);
CREATE INDEX assets_search_idx ON assets USING gin (search_text gin_trgm_ops);

CREATE TABLE templates (
  id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id      uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
  name           text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  description    text NOT NULL DEFAULT '',
  status         text NOT NULL DEFAULT 'active',
  latest_version integer NOT NULL DEFAULT 1 CHECK (latest_version >= 1),
  asset_type_ids uuid[] NOT NULL DEFAULT '{}',
  created_at     timestamptz NOT NULL DEFAULT now(),
  updated_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX templates_tenant_idx ON templates (tenant_id, name);

CREATE TABLE inspections (
  id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id           uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
  asset_id            uuid NOT NULL REFERENCES assets (id) ON DELETE CASCADE,
  template_id         uuid REFERENCES templates (id) ON DELETE SET NULL,
  template_version    integer,
  status              text NOT NULL DEFAULT 'completed',
  started_at          timestamptz,
  completed_at        timestamptz,
  inspector_name      text NOT NULL DEFAULT '',
  operator_identifier text NOT NULL DEFAULT '',
  external_ref        text NOT NULL DEFAULT '',
  notes               text NOT NULL DEFAULT '',
  media               jsonb NOT NULL DEFAULT '{}',
  created_at          timestamptz NOT NULL DEFAULT now(),
  updated_at          timestamptz NOT NULL DEFAULT now(),
  -- The time an inspection belongs to in ranges and monthly figures.
  occurred_at         timestamptz GENERATED ALWAYS AS (coalesce(completed_at, started_at, created_at)) STORED
);
CREATE INDEX inspections_tenant_time_idx ON inspections (tenant_id, occurred_at DESC, id);
CREATE INDEX inspections_asset_idx ON inspections (asset_id, occurred_at DESC);
CREATE INDEX inspections_template_idx ON inspections (template_id);
CREATE INDEX inspections_search_idx ON inspections
  USING gin (lower(operator_identifier || ' ' || external_ref) gin_trgm_ops);

CREATE TABLE reports (
  id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id        uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
  inspection_id    uuid NOT NULL REFERENCES inspections (id) ON DELETE CASCADE,
  asset_id         uuid NOT NULL REFERENCES assets (id) ON DELETE CASCADE,
  template_id      uuid REFERENCES templates (id) ON DELETE SET NULL,
  status           text NOT NULL DEFAULT 'final',
  impact           text NOT NULL DEFAULT 'none',
  outcome          text NOT NULL DEFAULT 'completed',
  rejection_reason text NOT NULL DEFAULT '',
  summary          text NOT NULL DEFAULT '',
  external_ref     text NOT NULL DEFAULT '',
  media            jsonb NOT NULL DEFAULT '{}',
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX reports_tenant_time_idx ON reports (tenant_id, created_at DESC, id);
CREATE INDEX reports_asset_idx ON reports (asset_id, created_at DESC);
CREATE INDEX reports_inspection_idx ON reports (inspection_id);

-- Keeps the derived fields of an asset equal to what its inspections and reports say.
CREATE FUNCTION refresh_asset_reporting_fields(target uuid) RETURNS void
LANGUAGE sql AS $$
  UPDATE assets a SET
    inspection_count     = i.cnt,
    latest_inspection_at = i.latest,
    report_count         = r.cnt,
    latest_report_at     = r.latest,
    latest_impact        = coalesce(r.impact, ''),
    latest_outcome       = coalesce(r.outcome, '')
  FROM
    (SELECT count(*)::int AS cnt, max(occurred_at) AS latest FROM inspections WHERE asset_id = target) i,
    (SELECT count(*)::int AS cnt, max(created_at) AS latest,
            (array_agg(impact ORDER BY created_at DESC, id DESC))[1] AS impact,
            (array_agg(outcome ORDER BY created_at DESC, id DESC))[1] AS outcome
       FROM reports WHERE asset_id = target) r
  WHERE a.id = target;
$$;

CREATE FUNCTION asset_reporting_fields_trigger() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP <> 'INSERT' THEN
    PERFORM refresh_asset_reporting_fields(OLD.asset_id);
  END IF;
  IF TG_OP = 'INSERT' OR (TG_OP = 'UPDATE' AND NEW.asset_id <> OLD.asset_id) THEN
    PERFORM refresh_asset_reporting_fields(NEW.asset_id);
  END IF;
  RETURN NULL;
END;
$$;

CREATE TRIGGER inspections_asset_fields AFTER INSERT OR UPDATE OR DELETE ON inspections
  FOR EACH ROW EXECUTE FUNCTION asset_reporting_fields_trigger();
CREATE TRIGGER reports_asset_fields AFTER INSERT OR UPDATE OR DELETE ON reports
  FOR EACH ROW EXECUTE FUNCTION asset_reporting_fields_trigger();

-- Service requests --------------------------------------------------------------

CREATE TABLE service_request_counters (
  tenant_id uuid PRIMARY KEY REFERENCES tenants (id) ON DELETE CASCADE,
  last_seq  integer NOT NULL DEFAULT 0
);

CREATE TABLE service_requests (
  id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id           uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
  seq                 integer NOT NULL,
  display_code        text NOT NULL,
  title               text NOT NULL CHECK (length(title) BETWEEN 1 AND 500),
  description         text NOT NULL DEFAULT '',
  category            text NOT NULL DEFAULT 'other'
    CHECK (category IN ('defect', 'maintenance_request', 'safety', 'cleaning', 'access', 'other')),
  priority            text NOT NULL DEFAULT 'normal' CHECK (priority IN ('low', 'normal', 'high', 'urgent')),
  status              text NOT NULL DEFAULT 'new' CHECK (status IN
    ('new', 'reopened', 'triaged', 'in_progress', 'waiting_customer', 'resolved', 'closed', 'cancelled')),
  source              text NOT NULL DEFAULT 'external',
  asset_id            uuid REFERENCES assets (id) ON DELETE SET NULL,
  assigned_to_user_id uuid,
  assigned_to         jsonb,
  customer_name       text NOT NULL DEFAULT '',
  customer_email      text NOT NULL DEFAULT '',
  customer_phone      text NOT NULL DEFAULT '',
  reported_by_name    text NOT NULL DEFAULT '',
  reported_by_email   text NOT NULL DEFAULT '',
  location            text NOT NULL DEFAULT '',
  external_ref        text NOT NULL DEFAULT '',
  resolution          text NOT NULL DEFAULT '',
  resolution_reviewed boolean NOT NULL DEFAULT false,
  metadata            jsonb NOT NULL DEFAULT '{}',
  cancel_reason       text,
  duplicate_of        text,
  due_at              timestamptz,
  resolved_at         timestamptz,
  closed_at           timestamptz,
  cancelled_at        timestamptz,
  created_by_key_id   uuid REFERENCES api_keys (id) ON DELETE SET NULL,
  created_at          timestamptz NOT NULL DEFAULT now(),
  updated_at          timestamptz NOT NULL DEFAULT now(),
  search_text         text GENERATED ALWAYS AS (lower(title || ' ' || display_code || ' ' || external_ref)) STORED,
  UNIQUE (tenant_id, seq),
  UNIQUE (tenant_id, display_code)
);
CREATE INDEX service_requests_tenant_created_idx ON service_requests (tenant_id, created_at DESC, id);
CREATE INDEX service_requests_tenant_customer_idx ON service_requests (tenant_id, customer_name, created_at DESC);
CREATE INDEX service_requests_asset_idx ON service_requests (asset_id);
CREATE INDEX service_requests_search_idx ON service_requests USING gin (search_text gin_trgm_ops);

CREATE TABLE service_request_events (
  id                 uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id          uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
  service_request_id uuid NOT NULL REFERENCES service_requests (id) ON DELETE CASCADE,
  type               text NOT NULL,
  from_status        text,
  to_status          text,
  message            text NOT NULL DEFAULT '',
  changes            jsonb,
  source             text NOT NULL DEFAULT 'external',
  actor_name         text NOT NULL DEFAULT '',
  actor_email        text NOT NULL DEFAULT '',
  created_at         timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX service_request_events_request_idx ON service_request_events (service_request_id, created_at);

CREATE TABLE service_request_files (
  id                 uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  tenant_id          uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
  service_request_id uuid NOT NULL REFERENCES service_requests (id) ON DELETE CASCADE,
  filename           text NOT NULL,
  stored_name        text NOT NULL,
  storage_key        text NOT NULL,
  mime_type          text NOT NULL,
  size_bytes         bigint NOT NULL,
  sha256             text NOT NULL,
  source             text NOT NULL DEFAULT 'external',
  created_at         timestamptz NOT NULL DEFAULT now(),
  deleted_at         timestamptz
);
CREATE INDEX service_request_files_request_idx ON service_request_files (service_request_id, created_at);

-- Idempotency-Key memory for POST/PATCH of service requests (24 h per API key).
CREATE TABLE idempotency_keys (
  api_key_id      uuid NOT NULL REFERENCES api_keys (id) ON DELETE CASCADE,
  idempotency_key text NOT NULL,
  method          text NOT NULL,
  path            text NOT NULL,
  request_hash    text NOT NULL,
  state           text NOT NULL CHECK (state IN ('in_flight', 'completed')),
  response_status integer,
  response_body   jsonb,
  created_at      timestamptz NOT NULL DEFAULT now(),
  expires_at      timestamptz NOT NULL,
  PRIMARY KEY (api_key_id, idempotency_key)
);
CREATE INDEX idempotency_keys_expiry_idx ON idempotency_keys (expires_at);

-- Down Migration
DROP TABLE IF EXISTS idempotency_keys, service_request_files, service_request_events, service_requests,
  service_request_counters, reports, inspections, templates, assets, asset_types, customers, api_keys,
  tenants, gantry_meta CASCADE;
DROP FUNCTION IF EXISTS asset_reporting_fields_trigger(), refresh_asset_reporting_fields(uuid);
