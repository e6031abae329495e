-- Up Migration
-- The fleet rollup of utilization and container work (docs/derivation.md, "Fleet
-- rollup"): per tenant and bucket, the sums of utilization_hourly / utilization_daily over
-- the tenant's fleet (assets with at least one device — the fleet the API measures) and
-- over each customer's part of it, so a fleet series reads one row per bucket instead
-- of one per asset. Plain tables in both storage modes.
--
-- fleet_members records which assets the rollup holds and under which customer. Triggers
-- on assets and devices keep it equal to the assets' current state in the transaction
-- that changes them, moving the asset's gold from its old fleet rows to its new ones (a
-- deleted asset, an asset whose last device left, an asset moved to another customer).
-- The worker keeps the rollup equal to the sum of its members' gold whenever it
-- refreshes gold. Both take the advisory lock of the utilization refresh, so neither
-- reads what the other is changing.

CREATE TABLE fleet_members (
  asset_id      uuid PRIMARY KEY,
  tenant_id     uuid NOT NULL,
  customer_name text NOT NULL
);
CREATE INDEX fleet_members_scope_idx ON fleet_members (tenant_id, customer_name);

-- all_customers: the tenant's whole fleet (customer_name is then ''); otherwise the assets
-- whose customer_name is exactly customer_name. Sums are numeric, exact: adding and
-- removing an asset's gold leaves the same numbers as summing again.
CREATE TABLE utilization_fleet_hourly (
  tenant_id                  uuid NOT NULL,
  all_customers              boolean NOT NULL,
  customer_name              text NOT NULL,
  bucket                     timestamptz NOT NULL,
  -- Member assets with a gold row in the bucket; a row whose count falls to 0 is deleted.
  asset_count                integer NOT NULL,
  running_seconds            numeric NOT NULL DEFAULT 0,
  moving_seconds             numeric NOT NULL DEFAULT 0,
  stationary_running_seconds numeric NOT NULL DEFAULT 0,
  loaded_seconds             numeric NOT NULL DEFAULT 0,
  empty_seconds              numeric NOT NULL DEFAULT 0,
  distance_m                 numeric NOT NULL DEFAULT 0,
  loaded_distance_m          numeric NOT NULL DEFAULT 0,
  empty_distance_m           numeric NOT NULL DEFAULT 0,
  hourmeter_delta            numeric NOT NULL DEFAULT 0,
  container_cycle_count      numeric NOT NULL DEFAULT 0,
  imu_anomaly_count          numeric NOT NULL DEFAULT 0,
  imu_sample_count           numeric NOT NULL DEFAULT 0,
  data_seconds               numeric NOT NULL DEFAULT 0,
  PRIMARY KEY (tenant_id, all_customers, customer_name, bucket)
);
CREATE INDEX utilization_fleet_hourly_empty_idx ON utilization_fleet_hourly (tenant_id) WHERE asset_count = 0;

CREATE TABLE utilization_fleet_daily (LIKE utilization_fleet_hourly INCLUDING ALL);

INSERT INTO fleet_members (asset_id, tenant_id, customer_name)
SELECT a.id, a.tenant_id, a.customer_name FROM assets a WHERE EXISTS (SELECT 1 FROM devices d WHERE d.asset_id = a.id);

-- The rollup is built whole by the worker's next utilization refresh (gold may exist already).
INSERT INTO gold_coverage (relation, status) VALUES ('utilization_fleet', 'rebuild')
ON CONFLICT (relation) DO UPDATE SET status = 'rebuild';

-- The summed columns, in one place for the functions below (packages/db/src/gold-read.ts
-- lists the same ones).
CREATE FUNCTION gantry_fleet_columns() RETURNS text[]
LANGUAGE sql IMMUTABLE AS $$
  SELECT ARRAY['running_seconds', 'moving_seconds', 'stationary_running_seconds', 'loaded_seconds', 'empty_seconds',
               'distance_m', 'loaded_distance_m', 'empty_distance_m', 'hourmeter_delta', 'container_cycle_count',
               'imu_anomaly_count', 'imu_sample_count', 'data_seconds']
$$;

-- Recomputes the fleet rows of the given tenants' buckets from their members' gold: the
-- hours and the days overlapping each [from, to). With no tenants, every fleet row (the
-- rebuild). TimescaleDB mode uses it after refreshing the continuous aggregates, whose
-- old values the worker never sees; PostgreSQL mode applies differences instead.
CREATE FUNCTION gantry_fleet_recompute(p_tenants uuid[], p_from timestamptz[], p_to timestamptz[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  grain text;
  width interval;
  cols text[] := gantry_fleet_columns();
  names text;
  sums text;
  keys text;
BEGIN
  SELECT string_agg(quote_ident(c), ', ' ORDER BY n), string_agg(format('coalesce(sum(g.%I), 0)', c), ', ' ORDER BY n)
    INTO names, sums FROM unnest(cols) WITH ORDINALITY AS t(c, n);
  FOREACH grain IN ARRAY ARRAY['hourly', 'daily'] LOOP
    width := CASE grain WHEN 'hourly' THEN INTERVAL '1 hour' ELSE INTERVAL '1 day' END;
    IF p_tenants IS NULL THEN
      EXECUTE format('DELETE FROM utilization_fleet_%s', grain);
      EXECUTE format(
        'INSERT INTO utilization_fleet_%1$s (tenant_id, all_customers, customer_name, bucket, asset_count, %2$s)
         SELECT g.tenant_id, GROUPING(m.customer_name) = 1,
                CASE WHEN GROUPING(m.customer_name) = 1 THEN '''' ELSE m.customer_name END, g.bucket, count(*), %3$s
           FROM utilization_%1$s g JOIN fleet_members m ON m.asset_id = g.asset_id AND m.tenant_id = g.tenant_id
          GROUP BY GROUPING SETS ((g.tenant_id, g.bucket, m.customer_name), (g.tenant_id, g.bucket))',
        grain, names, sums);
    ELSE
      -- The (tenant, bucket) pairs of the windows, each once however the windows overlap.
      keys := format(
        'SELECT DISTINCT w.t AS tenant_id, b AS bucket
           FROM unnest($1::uuid[], $2::timestamptz[], $3::timestamptz[]) AS w(t, f, u),
                generate_series(date_bin(%1$L, w.f, TIMESTAMPTZ ''2000-01-03 00:00:00+00''),
                                date_bin(%1$L, w.u - INTERVAL ''1 microsecond'', TIMESTAMPTZ ''2000-01-03 00:00:00+00''),
                                %1$L::interval) AS b
          WHERE w.u > w.f',
        width);
      EXECUTE format(
        'DELETE FROM utilization_fleet_%s f USING (%s) k WHERE f.tenant_id = k.tenant_id AND f.bucket = k.bucket',
        grain, keys) USING p_tenants, p_from, p_to;
      EXECUTE format(
        'INSERT INTO utilization_fleet_%1$s (tenant_id, all_customers, customer_name, bucket, asset_count, %2$s)
         SELECT g.tenant_id, GROUPING(m.customer_name) = 1,
                CASE WHEN GROUPING(m.customer_name) = 1 THEN '''' ELSE m.customer_name END, g.bucket, count(*), %3$s
           FROM (%4$s) k
           JOIN utilization_%1$s g ON g.tenant_id = k.tenant_id AND g.bucket = k.bucket
           JOIN fleet_members m ON m.asset_id = g.asset_id AND m.tenant_id = g.tenant_id
          GROUP BY GROUPING SETS ((g.tenant_id, g.bucket, m.customer_name), (g.tenant_id, g.bucket))',
        grain, names, sums, keys) USING p_tenants, p_from, p_to;
    END IF;
  END LOOP;
END $$;

-- Adds sign × one asset's gold (hourly and daily) to its tenant's and customer's fleet rows.
CREATE FUNCTION gantry_fleet_apply_asset(p_asset uuid, p_tenant uuid, p_customer text, p_sign integer) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  grain text;
  cols text[] := gantry_fleet_columns();
  names text;
  signed text;
  added text;
BEGIN
  SELECT string_agg(quote_ident(c), ', ' ORDER BY n),
         string_agg(format('$4 * coalesce(g.%I, 0)', c), ', ' ORDER BY n),
         string_agg(format('%1$I = f.%1$I + EXCLUDED.%1$I', c), ', ' ORDER BY n)
    INTO names, signed, added FROM unnest(cols) WITH ORDINALITY AS t(c, n);
  FOREACH grain IN ARRAY ARRAY['hourly', 'daily'] LOOP
    EXECUTE format(
      'INSERT INTO utilization_fleet_%1$s AS f (tenant_id, all_customers, customer_name, bucket, asset_count, %2$s)
       SELECT $2, k.all_customers, k.customer_name, g.bucket, $4, %3$s
         FROM utilization_%1$s g CROSS JOIN (VALUES (true, ''''), (false, $3)) AS k(all_customers, customer_name)
        WHERE g.asset_id = $1 AND g.tenant_id = $2
       ON CONFLICT (tenant_id, all_customers, customer_name, bucket)
       DO UPDATE SET asset_count = f.asset_count + EXCLUDED.asset_count, %4$s',
      grain, names, signed, added) USING p_asset, p_tenant, p_customer, p_sign;
    EXECUTE format('DELETE FROM utilization_fleet_%s WHERE tenant_id = $1 AND asset_count = 0', grain) USING p_tenant;
  END LOOP;
END $$;

-- Brings fleet_members (and the fleet rows) of the given assets in line with assets and
-- devices as this transaction sees them. Idempotent: any number of calls, in any order,
-- leave the same state.
CREATE FUNCTION gantry_fleet_resync(p_assets uuid[]) RETURNS void
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
  -- Waits for a gold refresh in progress (same key as the worker's), and holds it back
  -- until this transaction ends: each then reads what the other committed.
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

CREATE FUNCTION gantry_fleet_asset_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM gantry_fleet_resync(ARRAY[CASE WHEN TG_OP = 'DELETE' THEN OLD.id ELSE NEW.id END]);
  RETURN NULL;
END $$;

CREATE FUNCTION gantry_fleet_device_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    PERFORM gantry_fleet_resync(ARRAY[NEW.asset_id]);
  ELSIF TG_OP = 'DELETE' THEN
    PERFORM gantry_fleet_resync(ARRAY[OLD.asset_id]);
  ELSE
    PERFORM gantry_fleet_resync(ARRAY[OLD.asset_id, NEW.asset_id]);
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER assets_fleet_moved AFTER UPDATE OF tenant_id, customer_name ON assets FOR EACH ROW
  WHEN (OLD.tenant_id IS DISTINCT FROM NEW.tenant_id OR OLD.customer_name IS DISTINCT FROM NEW.customer_name)
  EXECUTE FUNCTION gantry_fleet_asset_changed();
CREATE TRIGGER assets_fleet_deleted AFTER DELETE ON assets FOR EACH ROW
  EXECUTE FUNCTION gantry_fleet_asset_changed();
CREATE TRIGGER devices_fleet_added_removed AFTER INSERT OR DELETE ON devices FOR EACH ROW
  EXECUTE FUNCTION gantry_fleet_device_changed();
CREATE TRIGGER devices_fleet_moved AFTER UPDATE OF asset_id ON devices FOR EACH ROW
  WHEN (OLD.asset_id IS DISTINCT FROM NEW.asset_id)
  EXECUTE FUNCTION gantry_fleet_device_changed();

-- Down Migration
DROP TRIGGER IF EXISTS devices_fleet_moved ON devices;
DROP TRIGGER IF EXISTS devices_fleet_added_removed ON devices;
DROP TRIGGER IF EXISTS assets_fleet_deleted ON assets;
DROP TRIGGER IF EXISTS assets_fleet_moved ON assets;
DROP FUNCTION IF EXISTS gantry_fleet_device_changed();
DROP FUNCTION IF EXISTS gantry_fleet_asset_changed();
DROP FUNCTION IF EXISTS gantry_fleet_resync(uuid[]);
DROP FUNCTION IF EXISTS gantry_fleet_apply_asset(uuid, uuid, text, integer);
DROP FUNCTION IF EXISTS gantry_fleet_recompute(uuid[], timestamptz[], timestamptz[]);
DROP FUNCTION IF EXISTS gantry_fleet_columns();
DELETE FROM gold_coverage WHERE relation = 'utilization_fleet';
DROP TABLE IF EXISTS utilization_fleet_daily, utilization_fleet_hourly, fleet_members;
