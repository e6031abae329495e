-- Up Migration
-- Bulk provisioning (one statement inserting 10,000 assets or devices) was dominated by
-- row-level triggers: each asset upserted the same eight facet rows of its tenant (10,000
-- versions of each in one transaction), each device resynced the fleet rollup on its own.
-- Inserts and deletes now run once per statement over its transition table, with the
-- same result; updates keep their row-level triggers, which fire only when a counted
-- column changes.

CREATE FUNCTION reporting_assets_counted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO reporting_asset_facets AS f (tenant_id, customer_name, facet, label, assets)
  SELECT c.tenant_id, scope, v.facet, v.label, (CASE WHEN TG_OP = 'DELETE' THEN -1 ELSE 1 END) * count(*)
    FROM changed c
   CROSS JOIN LATERAL unnest(ARRAY[NULL, c.customer_name]) AS scope
   CROSS JOIN LATERAL (VALUES ('assetType', coalesce(c.asset_type_id::text, '')), ('location', c.location),
                              ('customer', c.customer_name), ('lifecycle', c.lifecycle_status)) AS v (facet, label)
   WHERE EXISTS (SELECT 1 FROM tenants WHERE id = c.tenant_id)
   GROUP BY c.tenant_id, scope, v.facet, v.label
  ON CONFLICT ON CONSTRAINT reporting_asset_facets_key DO UPDATE SET assets = f.assets + EXCLUDED.assets;
  RETURN NULL;
END;
$$;

DROP TRIGGER assets_reporting_rollup ON assets;
CREATE TRIGGER assets_reporting_rollup_insert AFTER INSERT ON assets
  REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION reporting_assets_counted();
CREATE TRIGGER assets_reporting_rollup_delete AFTER DELETE ON assets
  REFERENCING OLD TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION reporting_assets_counted();

CREATE FUNCTION gantry_fleet_devices_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM gantry_fleet_resync(ARRAY(SELECT DISTINCT asset_id FROM changed WHERE asset_id IS NOT NULL));
  RETURN NULL;
END $$;

DROP TRIGGER devices_fleet_added_removed ON devices;
CREATE TRIGGER devices_fleet_added AFTER INSERT ON devices
  REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION gantry_fleet_devices_changed();
CREATE TRIGGER devices_fleet_removed AFTER DELETE ON devices
  REFERENCING OLD TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION gantry_fleet_devices_changed();

-- The assets of p_assets whose rollup membership differs from what assets and devices say.
CREATE FUNCTION gantry_fleet_differences(p_assets uuid[])
RETURNS TABLE (asset_id uuid, old_tenant uuid, old_customer text, new_tenant uuid, new_customer text)
LANGUAGE sql STABLE AS $$
  SELECT x.asset_id, m.tenant_id, m.customer_name, a.tenant_id, a.customer_name
    FROM (SELECT DISTINCT u.asset_id FROM unnest(p_assets) AS u(asset_id) WHERE u.asset_id IS NOT NULL) x
    LEFT JOIN fleet_members m ON m.asset_id = x.asset_id
    LEFT JOIN assets a ON a.id = x.asset_id AND EXISTS (SELECT 1 FROM devices d WHERE d.asset_id = a.id)
   WHERE m.tenant_id IS DISTINCT FROM a.tenant_id OR m.customer_name IS DISTINCT FROM a.customer_name
$$;

-- As in migration 0100, but assets without gold (new ones, say) join or leave the rollup
-- in two set-based statements: their gold would add nothing to its sums. Assets with
-- gold still move their sums one by one.
CREATE OR REPLACE FUNCTION gantry_fleet_resync(p_assets uuid[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  r record;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM gantry_fleet_differences(p_assets)) THEN
    RETURN;
  END IF;
  -- Waits for a gold refresh in progress (same key as the worker's), and holds it back
  -- until this transaction ends: each then reads what the other committed.
  PERFORM pg_advisory_xact_lock(hashtext('gantry:gold:utilization_hourly'));
  -- Gold tables come after the migrations (packages/db gold.ts): read at run time only.
  DELETE FROM fleet_members f USING gantry_fleet_differences(p_assets) d
   WHERE f.asset_id = d.asset_id
     AND NOT EXISTS (SELECT 1 FROM utilization_hourly g WHERE g.asset_id = d.asset_id)
     AND NOT EXISTS (SELECT 1 FROM utilization_daily g WHERE g.asset_id = d.asset_id);
  INSERT INTO fleet_members (asset_id, tenant_id, customer_name)
  SELECT d.asset_id, d.new_tenant, d.new_customer FROM gantry_fleet_differences(p_assets) d
   WHERE d.new_tenant IS NOT NULL
     AND NOT EXISTS (SELECT 1 FROM utilization_hourly g WHERE g.asset_id = d.asset_id)
     AND NOT EXISTS (SELECT 1 FROM utilization_daily g WHERE g.asset_id = d.asset_id);
  FOR r IN SELECT * FROM gantry_fleet_differences(p_assets) d ORDER BY d.asset_id LOOP
    IF r.old_tenant IS NOT NULL THEN
      PERFORM gantry_fleet_apply_asset(r.asset_id, r.old_tenant, r.old_customer, -1);
      DELETE FROM fleet_members WHERE asset_id = r.asset_id;
    END IF;
    IF r.new_tenant IS NOT NULL THEN
      INSERT INTO fleet_members (asset_id, tenant_id, customer_name) VALUES (r.asset_id, r.new_tenant, r.new_customer);
      PERFORM gantry_fleet_apply_asset(r.asset_id, r.new_tenant, r.new_customer, 1);
    END IF;
  END LOOP;
END $$;

-- Down Migration
DROP TRIGGER IF EXISTS devices_fleet_added ON devices;
DROP TRIGGER IF EXISTS devices_fleet_removed ON devices;
CREATE TRIGGER devices_fleet_added_removed AFTER INSERT OR DELETE ON devices FOR EACH ROW
  EXECUTE FUNCTION gantry_fleet_device_changed();
DROP FUNCTION IF EXISTS gantry_fleet_devices_changed();
DROP TRIGGER IF EXISTS assets_reporting_rollup_insert ON assets;
DROP TRIGGER IF EXISTS assets_reporting_rollup_delete ON assets;
CREATE TRIGGER assets_reporting_rollup AFTER INSERT OR DELETE ON assets
  FOR EACH ROW EXECUTE FUNCTION reporting_assets_changed();
DROP FUNCTION IF EXISTS reporting_assets_counted();
-- Migration 0100's resync, then its helper.
CREATE OR REPLACE FUNCTION gantry_fleet_resync(p_assets uuid[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  r record;
BEGIN
  IF NOT EXISTS (
    SELECT 1
      FROM unnest(p_assets) AS x(asset_id)
      LEFT JOIN fleet_members m ON m.asset_id = x.asset_id
      LEFT JOIN assets a ON a.id = x.asset_id AND EXISTS (SELECT 1 FROM devices d WHERE d.asset_id = a.id)
     WHERE x.asset_id IS NOT NULL
       AND (m.tenant_id IS DISTINCT FROM a.tenant_id OR m.customer_name IS DISTINCT FROM a.customer_name)
  ) THEN
    RETURN;
  END IF;
  PERFORM pg_advisory_xact_lock(hashtext('gantry:gold:utilization_hourly'));
  FOR r IN
    SELECT x.asset_id, m.tenant_id AS old_tenant, m.customer_name AS old_customer,
           a.tenant_id AS new_tenant, a.customer_name AS new_customer
      FROM (SELECT DISTINCT asset_id FROM unnest(p_assets) AS u(asset_id) WHERE asset_id IS NOT NULL) x
      LEFT JOIN fleet_members m ON m.asset_id = x.asset_id
      LEFT JOIN assets a ON a.id = x.asset_id AND EXISTS (SELECT 1 FROM devices d WHERE d.asset_id = a.id)
     WHERE m.tenant_id IS DISTINCT FROM a.tenant_id OR m.customer_name IS DISTINCT FROM a.customer_name
     ORDER BY x.asset_id
  LOOP
    IF r.old_tenant IS NOT NULL THEN
      PERFORM gantry_fleet_apply_asset(r.asset_id, r.old_tenant, r.old_customer, -1);
      DELETE FROM fleet_members WHERE asset_id = r.asset_id;
    END IF;
    IF r.new_tenant IS NOT NULL THEN
      INSERT INTO fleet_members (asset_id, tenant_id, customer_name) VALUES (r.asset_id, r.new_tenant, r.new_customer);
      PERFORM gantry_fleet_apply_asset(r.asset_id, r.new_tenant, r.new_customer, 1);
    END IF;
  END LOOP;
END $$;
DROP FUNCTION IF EXISTS gantry_fleet_differences(uuid[]);
