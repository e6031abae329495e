-- Up Migration
-- Reporting API (docs/reporting.md):
-- 1. inspections and reports carry their asset's customer_name, and an inspection its
--    latest report's outcome and impact, so customer-scoped lists, the outcome/impact
--    filters and the "rejected" counter are plain indexed columns;
-- 2. rollups kept by triggers (per UTC day and per UTC month for inspections, reports
--    and service requests, per facet for the asset inventory), once for the whole tenant
--    (customer_name NULL) and once per customer, so the overview of a year reads about a
--    thousand rows, not a million, and a list page deep into the offsets can skip whole
--    days by their counts;
-- 3. the indexes of the reporting lists and of `q`.
-- reporting_rebuild(tenant) recomputes all of it, for bulk loads with triggers off.

ALTER TABLE inspections
  ADD COLUMN customer_name  text NOT NULL DEFAULT '',
  ADD COLUMN report_outcome text NOT NULL DEFAULT '',
  ADD COLUMN report_impact  text NOT NULL DEFAULT '',
  ADD COLUMN report_count   integer NOT NULL DEFAULT 0;
ALTER TABLE reports ADD COLUMN customer_name text NOT NULL DEFAULT '';

CREATE INDEX inspections_tenant_customer_time_idx ON inspections (tenant_id, customer_name, occurred_at DESC, id);
CREATE INDEX reports_tenant_customer_time_idx ON reports (tenant_id, customer_name, created_at DESC, id);
CREATE INDEX reports_search_idx ON reports USING gin (lower(external_ref) gin_trgm_ops);
-- An inspection's latest report without a sort (list pages read it for every row).
CREATE INDEX reports_inspection_latest_idx ON reports (inspection_id, created_at DESC, id DESC);
CREATE INDEX assets_tenant_customer_name_idx ON assets (tenant_id, customer_name, name, id);
CREATE INDEX asset_types_search_idx ON asset_types USING gin (lower(name || ' ' || description) gin_trgm_ops);

-- grain 'd': period is a UTC day; grain 'm': the first day of a UTC month. The unique
-- keys INCLUDE the counts: the overview reads a scope's periods as index-only range scans,
-- in key order, whatever order the rows were written in.
CREATE TABLE reporting_inspection_rollup (
  tenant_id     uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
  customer_name text,                -- NULL: the whole tenant
  grain         "char" NOT NULL CHECK (grain IN ('d', 'm')),
  period        date NOT NULL,       -- of occurred_at
  status        text NOT NULL,
  template_id   uuid,
  rejected      boolean NOT NULL,    -- status 'rejected' or latest report outcome 'rejected'
  inspections   integer NOT NULL,
  CONSTRAINT reporting_inspection_rollup_key
    UNIQUE NULLS NOT DISTINCT (tenant_id, customer_name, grain, period, status, template_id, rejected) INCLUDE (inspections)
);

CREATE TABLE reporting_report_rollup (
  tenant_id     uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
  customer_name text,
  grain         "char" NOT NULL CHECK (grain IN ('d', 'm')),
  period        date NOT NULL,       -- of created_at
  outcome       text NOT NULL,
  impact        text NOT NULL,
  reports       integer NOT NULL,
  CONSTRAINT reporting_report_rollup_key
    UNIQUE NULLS NOT DISTINCT (tenant_id, customer_name, grain, period, outcome, impact) INCLUDE (reports)
);

-- Service requests by the day and month they were created, with their current status.
CREATE TABLE reporting_service_request_rollup (
  tenant_id     uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
  customer_name text,
  grain         "char" NOT NULL CHECK (grain IN ('d', 'm')),
  period        date NOT NULL,       -- of created_at
  status        text NOT NULL,
  category      text NOT NULL,
  priority      text NOT NULL,
  cancel_reason text NOT NULL,       -- '' unless cancelled
  requests      integer NOT NULL,
  CONSTRAINT reporting_service_request_rollup_key
    UNIQUE NULLS NOT DISTINCT (tenant_id, customer_name, grain, period, status, category, priority, cancel_reason) INCLUDE (requests)
);

-- facet: assetType (label = asset type id, '' without type), location, customer, lifecycle.
CREATE TABLE reporting_asset_facets (
  tenant_id     uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
  customer_name text,
  facet         text NOT NULL,
  label         text NOT NULL,
  assets        integer NOT NULL,
  CONSTRAINT reporting_asset_facets_key UNIQUE NULLS NOT DISTINCT (tenant_id, customer_name, facet, label)
);

-- Rollup writers. A tenant being deleted cascades into its rows; its rollups go with it.
CREATE FUNCTION reporting_count_inspection(t uuid, c text, at timestamptz, s text, tpl uuid, rej boolean, delta integer)
RETURNS void LANGUAGE sql AS $$
  INSERT INTO reporting_inspection_rollup AS d (tenant_id, customer_name, grain, period, status, template_id, rejected, inspections)
  SELECT t, scope, g.grain, g.period, s, tpl, rej, delta
    FROM unnest(ARRAY[NULL, c]) AS scope,
         (VALUES ('d'::"char", (at AT TIME ZONE 'UTC')::date),
                 ('m'::"char", date_trunc('month', at AT TIME ZONE 'UTC')::date)) AS g (grain, period)
   WHERE EXISTS (SELECT 1 FROM tenants WHERE id = t)
  ON CONFLICT ON CONSTRAINT reporting_inspection_rollup_key DO UPDATE SET inspections = d.inspections + EXCLUDED.inspections;
$$;

CREATE FUNCTION reporting_count_report(t uuid, c text, at timestamptz, o text, i text, delta integer)
RETURNS void LANGUAGE sql AS $$
  INSERT INTO reporting_report_rollup AS d (tenant_id, customer_name, grain, period, outcome, impact, reports)
  SELECT t, scope, g.grain, g.period, o, i, delta
    FROM unnest(ARRAY[NULL, c]) AS scope,
         (VALUES ('d'::"char", (at AT TIME ZONE 'UTC')::date),
                 ('m'::"char", date_trunc('month', at AT TIME ZONE 'UTC')::date)) AS g (grain, period)
   WHERE EXISTS (SELECT 1 FROM tenants WHERE id = t)
  ON CONFLICT ON CONSTRAINT reporting_report_rollup_key DO UPDATE SET reports = d.reports + EXCLUDED.reports;
$$;

CREATE FUNCTION reporting_count_service_request(t uuid, c text, at timestamptz, s text, cat text, prio text, reason text, delta integer)
RETURNS void LANGUAGE sql AS $$
  INSERT INTO reporting_service_request_rollup AS d (tenant_id, customer_name, grain, period, status, category, priority, cancel_reason, requests)
  SELECT t, scope, g.grain, g.period, s, cat, prio, CASE WHEN s = 'cancelled' THEN coalesce(reason, '') ELSE '' END, delta
    FROM unnest(ARRAY[NULL, c]) AS scope,
         (VALUES ('d'::"char", (at AT TIME ZONE 'UTC')::date),
                 ('m'::"char", date_trunc('month', at AT TIME ZONE 'UTC')::date)) AS g (grain, period)
   WHERE EXISTS (SELECT 1 FROM tenants WHERE id = t)
  ON CONFLICT ON CONSTRAINT reporting_service_request_rollup_key DO UPDATE SET requests = d.requests + EXCLUDED.requests;
$$;

CREATE FUNCTION reporting_count_asset(t uuid, c text, type_id uuid, loc text, lifecycle text, delta integer)
RETURNS void LANGUAGE sql AS $$
  INSERT INTO reporting_asset_facets AS f (tenant_id, customer_name, facet, label, assets)
  SELECT t, scope, facet, label, delta
    FROM unnest(ARRAY[NULL, c]) AS scope,
         (VALUES ('assetType', coalesce(type_id::text, '')), ('location', loc), ('customer', c), ('lifecycle', lifecycle)) AS v (facet, label)
   WHERE EXISTS (SELECT 1 FROM tenants WHERE id = t)
  ON CONFLICT ON CONSTRAINT reporting_asset_facets_key DO UPDATE SET assets = f.assets + EXCLUDED.assets;
$$;

-- Denormalised columns ---------------------------------------------------------------

CREATE FUNCTION reporting_row_customer() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.customer_name := coalesce((SELECT customer_name FROM assets WHERE id = NEW.asset_id), '');
  RETURN NEW;
END;
$$;

CREATE TRIGGER inspections_reporting_customer BEFORE INSERT OR UPDATE OF asset_id ON inspections
  FOR EACH ROW EXECUTE FUNCTION reporting_row_customer();
CREATE TRIGGER reports_reporting_customer BEFORE INSERT OR UPDATE OF asset_id ON reports
  FOR EACH ROW EXECUTE FUNCTION reporting_row_customer();

CREATE FUNCTION reporting_asset_customer_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE inspections SET customer_name = NEW.customer_name WHERE asset_id = NEW.id AND customer_name <> NEW.customer_name;
  UPDATE reports SET customer_name = NEW.customer_name WHERE asset_id = NEW.id AND customer_name <> NEW.customer_name;
  RETURN NULL;
END;
$$;

CREATE TRIGGER assets_reporting_customer AFTER UPDATE OF customer_name ON assets
  FOR EACH ROW WHEN (OLD.customer_name IS DISTINCT FROM NEW.customer_name)
  EXECUTE FUNCTION reporting_asset_customer_changed();

-- The latest report (created_at, then id) of an inspection decides its outcome and impact.
CREATE FUNCTION reporting_refresh_inspection_report(target uuid) RETURNS void LANGUAGE sql AS $$
  UPDATE inspections i SET
    report_outcome = coalesce(r.outcome, ''),
    report_impact  = coalesce(r.impact, ''),
    report_count   = r.cnt
  FROM (SELECT count(*)::int AS cnt,
               (array_agg(outcome ORDER BY created_at DESC, id DESC))[1] AS outcome,
               (array_agg(impact ORDER BY created_at DESC, id DESC))[1] AS impact
          FROM reports WHERE inspection_id = target) r
  WHERE i.id = target
    AND (i.report_outcome, i.report_impact, i.report_count) IS DISTINCT FROM (coalesce(r.outcome, ''), coalesce(r.impact, ''), r.cnt);
$$;

CREATE FUNCTION reporting_reports_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP <> 'INSERT' THEN
    PERFORM reporting_count_report(OLD.tenant_id, OLD.customer_name, OLD.created_at, OLD.outcome, OLD.impact, -1);
    PERFORM reporting_refresh_inspection_report(OLD.inspection_id);
  END IF;
  IF TG_OP <> 'DELETE' THEN
    PERFORM reporting_count_report(NEW.tenant_id, NEW.customer_name, NEW.created_at, NEW.outcome, NEW.impact, 1);
    IF TG_OP = 'INSERT' OR NEW.inspection_id <> OLD.inspection_id OR (NEW.created_at, NEW.outcome, NEW.impact) IS DISTINCT FROM (OLD.created_at, OLD.outcome, OLD.impact) THEN
      PERFORM reporting_refresh_inspection_report(NEW.inspection_id);
    END IF;
  END IF;
  RETURN NULL;
END;
$$;

CREATE TRIGGER reports_reporting_rollup AFTER INSERT OR DELETE ON reports
  FOR EACH ROW EXECUTE FUNCTION reporting_reports_changed();
CREATE TRIGGER reports_reporting_rollup_update AFTER UPDATE ON reports
  FOR EACH ROW WHEN ((OLD.tenant_id, OLD.customer_name, OLD.created_at, OLD.outcome, OLD.impact, OLD.inspection_id)
                     IS DISTINCT FROM (NEW.tenant_id, NEW.customer_name, NEW.created_at, NEW.outcome, NEW.impact, NEW.inspection_id))
  EXECUTE FUNCTION reporting_reports_changed();

CREATE FUNCTION reporting_inspections_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP <> 'INSERT' THEN
    PERFORM reporting_count_inspection(OLD.tenant_id, OLD.customer_name, OLD.occurred_at, OLD.status, OLD.template_id,
      OLD.status = 'rejected' OR OLD.report_outcome = 'rejected', -1);
  END IF;
  IF TG_OP <> 'DELETE' THEN
    PERFORM reporting_count_inspection(NEW.tenant_id, NEW.customer_name, NEW.occurred_at, NEW.status, NEW.template_id,
      NEW.status = 'rejected' OR NEW.report_outcome = 'rejected', 1);
  END IF;
  RETURN NULL;
END;
$$;

CREATE TRIGGER inspections_reporting_rollup AFTER INSERT OR DELETE ON inspections
  FOR EACH ROW EXECUTE FUNCTION reporting_inspections_changed();
CREATE TRIGGER inspections_reporting_rollup_update AFTER UPDATE ON inspections
  FOR EACH ROW WHEN ((OLD.tenant_id, OLD.customer_name, OLD.occurred_at, OLD.status, OLD.template_id, OLD.report_outcome = 'rejected')
                     IS DISTINCT FROM (NEW.tenant_id, NEW.customer_name, NEW.occurred_at, NEW.status, NEW.template_id, NEW.report_outcome = 'rejected'))
  EXECUTE FUNCTION reporting_inspections_changed();

CREATE FUNCTION reporting_service_requests_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP <> 'INSERT' THEN
    PERFORM reporting_count_service_request(OLD.tenant_id, OLD.customer_name, OLD.created_at, OLD.status, OLD.category,
      OLD.priority, OLD.cancel_reason, -1);
  END IF;
  IF TG_OP <> 'DELETE' THEN
    PERFORM reporting_count_service_request(NEW.tenant_id, NEW.customer_name, NEW.created_at, NEW.status, NEW.category,
      NEW.priority, NEW.cancel_reason, 1);
  END IF;
  RETURN NULL;
END;
$$;

CREATE TRIGGER service_requests_reporting_rollup AFTER INSERT OR DELETE ON service_requests
  FOR EACH ROW EXECUTE FUNCTION reporting_service_requests_changed();
CREATE TRIGGER service_requests_reporting_rollup_update AFTER UPDATE ON service_requests
  FOR EACH ROW WHEN ((OLD.tenant_id, OLD.customer_name, OLD.created_at, OLD.status, OLD.category, OLD.priority, OLD.cancel_reason)
                     IS DISTINCT FROM (NEW.tenant_id, NEW.customer_name, NEW.created_at, NEW.status, NEW.category, NEW.priority, NEW.cancel_reason))
  EXECUTE FUNCTION reporting_service_requests_changed();

CREATE FUNCTION reporting_assets_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP <> 'INSERT' THEN
    PERFORM reporting_count_asset(OLD.tenant_id, OLD.customer_name, OLD.asset_type_id, OLD.location, OLD.lifecycle_status, -1);
  END IF;
  IF TG_OP <> 'DELETE' THEN
    PERFORM reporting_count_asset(NEW.tenant_id, NEW.customer_name, NEW.asset_type_id, NEW.location, NEW.lifecycle_status, 1);
  END IF;
  RETURN NULL;
END;
$$;

CREATE TRIGGER assets_reporting_rollup AFTER INSERT OR DELETE ON assets
  FOR EACH ROW EXECUTE FUNCTION reporting_assets_changed();
CREATE TRIGGER assets_reporting_rollup_update AFTER UPDATE ON assets
  FOR EACH ROW WHEN ((OLD.tenant_id, OLD.customer_name, OLD.asset_type_id, OLD.location, OLD.lifecycle_status)
                     IS DISTINCT FROM (NEW.tenant_id, NEW.customer_name, NEW.asset_type_id, NEW.location, NEW.lifecycle_status))
  EXECUTE FUNCTION reporting_assets_changed();

-- Recomputes every reporting column and rollup of one tenant from its rows (after a bulk
-- load with triggers disabled, or to repair). Returns the number of rollup rows written.
-- Correct with triggers on, but fast only with them off: after a bulk load run it in the
-- load's transaction under SET LOCAL session_replication_role = replica.
CREATE FUNCTION reporting_rebuild(target uuid) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  written integer := 0;
  affected integer;
BEGIN
  UPDATE inspections i SET customer_name = a.customer_name
    FROM assets a WHERE a.id = i.asset_id AND i.tenant_id = target AND i.customer_name <> a.customer_name;
  UPDATE reports r SET customer_name = a.customer_name
    FROM assets a WHERE a.id = r.asset_id AND r.tenant_id = target AND r.customer_name <> a.customer_name;
  WITH latest AS (
    SELECT DISTINCT ON (inspection_id) inspection_id, outcome, impact,
           count(*) OVER (PARTITION BY inspection_id)::int AS cnt
      FROM reports WHERE tenant_id = target
     ORDER BY inspection_id, created_at DESC, id DESC
  )
  UPDATE inspections i SET report_outcome = coalesce(l.outcome, ''), report_impact = coalesce(l.impact, ''), report_count = coalesce(l.cnt, 0)
    FROM inspections i2 LEFT JOIN latest l ON l.inspection_id = i2.id
   WHERE i.id = i2.id AND i2.tenant_id = target
     AND (i.report_outcome, i.report_impact, i.report_count) IS DISTINCT FROM (coalesce(l.outcome, ''), coalesce(l.impact, ''), coalesce(l.cnt, 0));

  DELETE FROM reporting_inspection_rollup WHERE tenant_id = target;
  DELETE FROM reporting_report_rollup WHERE tenant_id = target;
  DELETE FROM reporting_asset_facets WHERE tenant_id = target;
  DELETE FROM reporting_service_request_rollup WHERE tenant_id = target;

  INSERT INTO reporting_inspection_rollup (tenant_id, customer_name, grain, period, status, template_id, rejected, inspections)
  SELECT target, customer_name, grain, period, status, template_id, rejected, sum(n)::int
    FROM (SELECT customer_name, day, status, template_id, rejected, count(*) AS n
            FROM (SELECT customer_name, (occurred_at AT TIME ZONE 'UTC')::date AS day, status, template_id,
                         status = 'rejected' OR report_outcome = 'rejected' AS rejected
                    FROM inspections WHERE tenant_id = target) base
           GROUP BY GROUPING SETS ((customer_name, day, status, template_id, rejected), (day, status, template_id, rejected))) s
   CROSS JOIN LATERAL (VALUES ('d'::"char", s.day), ('m'::"char", date_trunc('month', s.day)::date)) AS g (grain, period)
   GROUP BY customer_name, grain, period, status, template_id, rejected;
  GET DIAGNOSTICS affected = ROW_COUNT;
  written := written + affected;

  INSERT INTO reporting_report_rollup (tenant_id, customer_name, grain, period, outcome, impact, reports)
  SELECT target, customer_name, grain, period, outcome, impact, sum(n)::int
    FROM (SELECT customer_name, day, outcome, impact, count(*) AS n
            FROM (SELECT customer_name, (created_at AT TIME ZONE 'UTC')::date AS day, outcome, impact
                    FROM reports WHERE tenant_id = target) base
           GROUP BY GROUPING SETS ((customer_name, day, outcome, impact), (day, outcome, impact))) s
   CROSS JOIN LATERAL (VALUES ('d'::"char", s.day), ('m'::"char", date_trunc('month', s.day)::date)) AS g (grain, period)
   GROUP BY customer_name, grain, period, outcome, impact;
  GET DIAGNOSTICS affected = ROW_COUNT;
  written := written + affected;

  INSERT INTO reporting_service_request_rollup (tenant_id, customer_name, grain, period, status, category, priority, cancel_reason, requests)
  SELECT target, customer_name, grain, period, status, category, priority, cancel_reason, sum(n)::int
    FROM (SELECT customer_name, day, status, category, priority, cancel_reason, count(*) AS n
            FROM (SELECT customer_name, (created_at AT TIME ZONE 'UTC')::date AS day, status, category, priority,
                         CASE WHEN status = 'cancelled' THEN coalesce(cancel_reason, '') ELSE '' END AS cancel_reason
                    FROM service_requests WHERE tenant_id = target) base
           GROUP BY GROUPING SETS ((customer_name, day, status, category, priority, cancel_reason),
                                   (day, status, category, priority, cancel_reason))) s
   CROSS JOIN LATERAL (VALUES ('d'::"char", s.day), ('m'::"char", date_trunc('month', s.day)::date)) AS g (grain, period)
   GROUP BY customer_name, grain, period, status, category, priority, cancel_reason;
  GET DIAGNOSTICS affected = ROW_COUNT;
  written := written + affected;

  INSERT INTO reporting_asset_facets (tenant_id, customer_name, facet, label, assets)
  SELECT target, scope.customer_name, v.facet, v.label, count(*)::int
    FROM assets a
    CROSS JOIN LATERAL (VALUES (a.customer_name), (NULL::text)) AS scope (customer_name)
    CROSS JOIN LATERAL (VALUES ('assetType', coalesce(a.asset_type_id::text, '')), ('location', a.location),
                               ('customer', a.customer_name), ('lifecycle', a.lifecycle_status)) AS v (facet, label)
   WHERE a.tenant_id = target
   GROUP BY scope.customer_name, v.facet, v.label;
  GET DIAGNOSTICS affected = ROW_COUNT;
  RETURN written + affected;
END;
$$;

-- Existing data (an upgraded deployment) gets its columns and rollups once.
SELECT reporting_rebuild(id) FROM tenants;

-- Down Migration
DROP TRIGGER IF EXISTS inspections_reporting_customer ON inspections;
DROP TRIGGER IF EXISTS reports_reporting_customer ON reports;
DROP TRIGGER IF EXISTS assets_reporting_customer ON assets;
DROP TRIGGER IF EXISTS reports_reporting_rollup ON reports;
DROP TRIGGER IF EXISTS reports_reporting_rollup_update ON reports;
DROP TRIGGER IF EXISTS inspections_reporting_rollup ON inspections;
DROP TRIGGER IF EXISTS inspections_reporting_rollup_update ON inspections;
DROP TRIGGER IF EXISTS service_requests_reporting_rollup ON service_requests;
DROP TRIGGER IF EXISTS service_requests_reporting_rollup_update ON service_requests;
DROP TRIGGER IF EXISTS assets_reporting_rollup ON assets;
DROP TRIGGER IF EXISTS assets_reporting_rollup_update ON assets;
DROP FUNCTION IF EXISTS reporting_rebuild(uuid), reporting_assets_changed(), reporting_service_requests_changed(),
  reporting_count_service_request(uuid, text, timestamptz, text, text, text, text, integer), reporting_inspections_changed(),
  reporting_reports_changed(), reporting_refresh_inspection_report(uuid), reporting_asset_customer_changed(),
  reporting_row_customer(), reporting_count_asset(uuid, text, uuid, text, text, integer),
  reporting_count_report(uuid, text, timestamptz, text, text, integer),
  reporting_count_inspection(uuid, text, timestamptz, text, uuid, boolean, integer);
DROP TABLE IF EXISTS reporting_asset_facets, reporting_service_request_rollup, reporting_report_rollup, reporting_inspection_rollup;
DROP INDEX IF EXISTS reports_inspection_latest_idx, asset_types_search_idx, assets_tenant_customer_name_idx, reports_search_idx,
  reports_tenant_customer_time_idx, inspections_tenant_customer_time_idx;
ALTER TABLE reports DROP COLUMN IF EXISTS customer_name;
ALTER TABLE inspections DROP COLUMN IF EXISTS report_count, DROP COLUMN IF EXISTS report_impact,
  DROP COLUMN IF EXISTS report_outcome, DROP COLUMN IF EXISTS customer_name;
