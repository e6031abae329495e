-- Up Migration
-- PostgreSQL mode: utilization gold read a page at a time. An asset-by-asset page of a
-- key's fleet (`groupBy=asset&limit=100`) is ordered by bucket, then asset; with only a
-- (tenant_id, bucket) index the database read and sorted every row of the range (10,000
-- assets × 25 hours = 250,000 rows) for a page of 100. With the asset in the index it walks
-- the rows in the answer's order and stops after the page. The new index holds the old
-- one's columns first, so it replaces it. packages/db/src/gold.ts makes every gold table
-- with it; the positions tables made before keep their (tenant_id, bucket) index (no read
-- pages them across assets, and re-indexing months of minutes would hold the upgrade).
DO $$
DECLARE
  relation text;
BEGIN
  FOREACH relation IN ARRAY ARRAY['utilization_hourly', 'utilization_daily'] LOOP
    IF to_regclass(relation) IS NOT NULL THEN
      EXECUTE format('DROP INDEX IF EXISTS %I', relation || '_tenant_bucket_idx');
      EXECUTE format('CREATE INDEX %I ON %I (tenant_id, bucket, asset_id)', relation || '_tenant_bucket_idx', relation);
    END IF;
  END LOOP;
END $$;

-- Down Migration
DO $$
DECLARE
  relation text;
BEGIN
  FOREACH relation IN ARRAY ARRAY['utilization_hourly', 'utilization_daily'] LOOP
    IF to_regclass(relation) IS NOT NULL THEN
      EXECUTE format('DROP INDEX IF EXISTS %I', relation || '_tenant_bucket_idx');
      EXECUTE format('CREATE INDEX %I ON %I (tenant_id, bucket)', relation || '_tenant_bucket_idx', relation);
    END IF;
  END LOOP;
END $$;
