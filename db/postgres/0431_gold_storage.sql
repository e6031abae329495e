-- Up Migration
-- PostgreSQL mode: the gold tables updated on every ingest batch (positions_1min,
-- positions_15min: the open minute and quarter hour of each asset) or every derivation
-- (utilization_hourly, utilization_daily and their _counts: the open hour and day) leave
-- a dead row version per update. None of those updates changes an indexed column (the
-- keys and the (tenant_id, bucket) indexes hold asset, tenant and bucket), so each can be
-- HOT — the new version on the same page, no new index entries, the old one pruned by
-- the next visit of the page — when the page has room for it. At the default fillfactor
-- the open rows sit on full pages among closed ones: after an upload, half of
-- positions_1min's tuples were dead, waiting for a vacuum that scans the whole table.
-- Pages filled to 70 % keep room for tens of versions of these ~100-byte rows (closed
-- buckets never change, so the room on their pages is given away: the tables are a few
-- percent of silver). The vacuum thresholds are fixed numbers, not a share of a table
-- that grows all the time (gold keeps its history): 20 % of a year of minutes would be
-- millions of dead rows before autovacuum — or the worker's table maintenance, which
-- applies the same options where autovacuum is off — looks at it.
-- packages/db/src/gold.ts gives a gold table the same options when it creates one (a
-- fresh database, or a definition that changed); this sets them where they exist.
-- Existing pages keep their fill until rewritten.
DO $$
DECLARE
  relation text;
BEGIN
  FOREACH relation IN ARRAY ARRAY['positions_1min', 'positions_15min', 'utilization_hourly', 'utilization_daily',
                                  'utilization_hourly_counts', 'utilization_daily_counts'] LOOP
    IF to_regclass(relation) IS NOT NULL THEN
      EXECUTE format('ALTER TABLE %I SET (fillfactor = 70, autovacuum_vacuum_scale_factor = 0.01, '
        'autovacuum_vacuum_threshold = 10000, autovacuum_analyze_scale_factor = 0.02)', relation);
    END IF;
  END LOOP;
END $$;

-- Down Migration
DO $$
DECLARE
  relation text;
BEGIN
  FOREACH relation IN ARRAY ARRAY['positions_1min', 'positions_15min', 'utilization_hourly', 'utilization_daily',
                                  'utilization_hourly_counts', 'utilization_daily_counts'] LOOP
    IF to_regclass(relation) IS NOT NULL THEN
      EXECUTE format('ALTER TABLE %I RESET (fillfactor, autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold, '
        'autovacuum_analyze_scale_factor)', relation);
    END IF;
  END LOOP;
END $$;
